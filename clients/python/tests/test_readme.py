"""The README's worker and producer, run as written (with this test's DSN
and queue)."""
import contextlib
import io
import os
import re
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(os.path.dirname(HERE), "README.md")


def blocks():
    with open(README) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_readme_worker_runs_as_written(dsn, queue, tmp_path):
    worker_code, app_code = blocks()[:2]
    assert 12 <= len(worker_code.strip().splitlines()) <= 20

    def adapt(code):
        assert '"dbname=app"' in code and '"emails"' in code
        return code.replace('"dbname=app"', repr(dsn)).replace('"emails"', repr(queue))

    script = tmp_path / "worker.py"
    script.write_text(adapt(worker_code))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
    log = open(tmp_path / "worker.log", "w+")
    p = subprocess.Popen([sys.executable, str(script)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(adapt(app_code), "README.md", "exec"), {})
        assert re.search(r"Outcome\(status='done', result=\{'to': 'ada@example.com',"
                         r" 'message_id': 'msg-pg_wf:" + re.escape(queue) + r":\d+'\}, error=None\)",
                         out.getvalue()), out.getvalue()
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.seek(0)
        text = log.read()
        log.close()
    assert "received SIGTERM" in text and "stopped" in text, text
