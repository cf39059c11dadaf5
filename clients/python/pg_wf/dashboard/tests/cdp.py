"""A small Chrome DevTools Protocol client over a WebSocket, standard library
only: enough to drive Debian's headless chromium in the dashboard's browser
test (navigate, evaluate, click with real mouse events, type, screenshot) and
to collect everything the page logs (console, exceptions, network errors).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from typing import Any, Callable
from urllib.parse import urlsplit


class CDPError(Exception):
    pass


class WebSocket:
    """RFC 6455 client: text frames, masked, no extensions."""

    def __init__(self, url: str, timeout: float = 30):
        u = urlsplit(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + (("?" + u.query) if u.query else "")
        req = (f"GET {path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise CDPError("websocket handshake: connection closed")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise CDPError("websocket handshake refused: " + head.decode(errors="replace"))

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise CDPError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text: str) -> None:
        data = text.encode()
        head = bytearray([0x81])
        n = len(data)
        if n < 126:
            head.append(0x80 | n)
        elif n < 65536:
            head.append(0x80 | 126)
            head += struct.pack(">H", n)
        else:
            head.append(0x80 | 127)
            head += struct.pack(">Q", n)
        mask = os.urandom(4)
        head += mask
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(bytes(head) + masked)

    def _send_control(self, opcode: int, payload: bytes = b"") -> None:
        mask = os.urandom(4)
        self.sock.sendall(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask +
                          bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self, timeout: float | None) -> str | None:
        """One message, or None if nothing came within timeout."""
        self.sock.settimeout(timeout)
        parts: list[bytes] = []
        try:
            while True:
                b0, b1 = self._read(2)
                # once a frame has started, read it whole whatever the timeout
                self.sock.settimeout(30)
                opcode, fin = b0 & 0x0F, b0 & 0x80
                n = b1 & 0x7F
                if n == 126:
                    n = struct.unpack(">H", self._read(2))[0]
                elif n == 127:
                    n = struct.unpack(">Q", self._read(8))[0]
                mask = self._read(4) if b1 & 0x80 else None
                payload = self._read(n)
                if mask:
                    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
                if opcode == 0x9:
                    self._send_control(0xA, payload)
                    continue
                if opcode == 0xA:
                    continue
                if opcode == 0x8:
                    raise CDPError("websocket closed by the browser")
                parts.append(payload)
                if fin:
                    return b"".join(parts).decode()
        except socket.timeout:
            if parts:
                raise
            return None

    def close(self) -> None:
        try:
            self._send_control(0x8)
        except OSError:
            pass
        self.sock.close()


class Browser:
    """Headless chromium with a page to drive. Everything the page reports
    at level error lands in self.errors (see error_entries)."""

    def __init__(self, binary: str | None = None, width: int = 1400, height: int = 900):
        self.binary = binary or shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
        self.profile = tempfile.mkdtemp(prefix="pgwf-dash-chromium-")
        args = [self.binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                f"--user-data-dir={self.profile}", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps", "--disable-domain-reliability", "--no-pings",
                "--hide-scrollbars", "--mute-audio", "--force-device-scale-factor=1",
                "--disable-features=Translate,MediaRouter,OptimizationHints",
                f"--window-size={width},{height}", "about:blank"]
        self.log = open(os.path.join(self.profile, "chromium.log"), "wb")
        env = dict(os.environ)
        env.setdefault("HOME", self.profile)  # CI may run without one
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=env, stdin=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and len(open(port_file).read().split("\n")) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise CDPError(f"chromium did not start (exit {self.proc.returncode}); see its log")
            time.sleep(0.1)
        port, path = open(port_file).read().split("\n")[:2]
        self.ws = WebSocket(f"ws://127.0.0.1:{port}{path}")
        self.next_id = 0
        self.events: list[dict] = []
        self.handlers: list[Callable[[dict], None]] = []
        self.errors: list[dict] = []
        self.console: list[dict] = []
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(domain + ".enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.width, self.height = width, height

    # -- protocol --------------------------------------------------------------

    def call(self, method: str, params: dict | None = None, session: bool = True, timeout: float = 30) -> dict:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError(f"{method}: no answer in {timeout} s")
            m = self.ws.recv(left)
            if m is None:
                continue
            data = json.loads(m)
            if data.get("id") == msg["id"]:
                if "error" in data:
                    raise CDPError(f"{method}: {data['error']}")
                return data.get("result", {})
            if "method" in data:
                self._event(data)

    def pump(self, seconds: float = 0.0) -> None:
        """Takes in the events that arrived (for up to `seconds`)."""
        deadline = time.monotonic() + seconds
        while True:
            m = self.ws.recv(max(0.0, deadline - time.monotonic()) or 0.01)
            if m is None:
                if time.monotonic() >= deadline:
                    return
                continue
            data = json.loads(m)
            if "method" in data:
                self._event(data)

    def _event(self, ev: dict) -> None:
        self.events.append(ev)
        method, p = ev["method"], ev.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            entry = {"source": "console", "level": p.get("type"), "text": text}
            self.console.append(entry)
            if p.get("type") in ("error", "assert"):
                self.errors.append(entry)
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text")
            self.errors.append({"source": "exception", "level": "error", "text": text, "url": d.get("url")})
        elif method == "Log.entryAdded":
            e = p.get("entry", {})
            entry = {"source": e.get("source"), "level": e.get("level"), "text": e.get("text"), "url": e.get("url")}
            self.console.append(entry)
            if e.get("level") == "error":
                self.errors.append(entry)
        elif method == "Network.loadingFailed":
            if not p.get("canceled"):
                self.errors.append({"source": "network", "level": "error", "text": p.get("errorText"),
                                    "requestId": p.get("requestId")})
        for h in self.handlers:
            h(ev)

    # -- page helpers ------------------------------------------------------------

    def navigate(self, url: str, timeout: float = 30, fresh: bool = True) -> None:
        """Loads url; fresh: as a new document even if only its #fragment
        differs from the current one (else that is a same-document move)."""
        if fresh and url != "about:blank":
            self.navigate("about:blank", timeout, fresh=False)
        before = len(self.events)
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        done = ("Page.loadEventFired", "Page.navigatedWithinDocument")
        while not any(e["method"] in done for e in self.events[before:]):
            if time.monotonic() > deadline:
                raise CDPError(f"{url} did not load in {timeout} s")
            self.pump(0.1)

    def eval(self, expression: str, timeout: float = 30) -> Any:
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise CDPError("evaluate: " + (d.get("exception", {}).get("description") or d.get("text", "")))
        return r.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 10, what: str | None = None) -> Any:
        deadline = time.monotonic() + timeout
        # a DOM node does not come back by value: make it true
        expression = f"(() => {{ const v = ({expression}); return v instanceof Node ? true : v; }})()"
        while True:
            try:
                v = self.eval(expression)
            except CDPError:
                v = None
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what or expression}")
            self.pump(0.15)

    def click(self, selector: str, timeout: float = 10) -> None:
        """A real click (mouse events at the element's centre)."""
        sel = json.dumps(selector)
        pos = self.wait_for(
            f"(() => {{ const e = document.querySelector({sel}); if (!e) return null;"
            f" e.scrollIntoView({{block: 'center', inline: 'center'}}); const r = e.getBoundingClientRect();"
            f" return r.width && r.height ? [r.x + r.width / 2, r.y + r.height / 2] : null; }})()",
            timeout, what=f"element {selector}")
        x, y = pos
        hit = self.eval(f"(() => {{ const e = document.elementFromPoint({x}, {y}); const t = document.querySelector({sel});"
                        f" return !!e && (e === t || t.contains(e)); }})()")
        if not hit:
            raise AssertionError(f"{selector} is covered by another element at ({x:.0f}, {y:.0f})")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                   "buttons": 1 if kind == "mousePressed" else 0,
                                                   "clickCount": 0 if kind == "mouseMoved" else 1})
        self.pump(0.05)

    def type_text(self, selector: str, text: str) -> None:
        self.click(selector)
        self.eval(f"document.querySelector({json.dumps(selector)}).select && document.querySelector({json.dumps(selector)}).select()")
        self.call("Input.insertText", {"text": text})

    def key(self, key: str, code: str | None = None, vk: int | None = None) -> None:
        for kind in ("keyDown", "keyUp"):
            p = {"type": kind, "key": key, "code": code or key}
            if vk:
                p["windowsVirtualKeyCode"] = vk
            if key == "Enter" and kind == "keyDown":
                p["text"] = "\r"
            self.call("Input.dispatchKeyEvent", p)

    def screenshot(self, path: str, full_page: bool = True, max_height: int = 2400) -> tuple[int, int]:
        params: dict[str, Any] = {"format": "png"}
        w, h = self.width, self.height
        if full_page:
            m = self.call("Page.getLayoutMetrics")
            size = m.get("cssContentSize") or m.get("contentSize")
            h = int(min(max(self.height, size["height"]), max_height))
            params.update({"captureBeyondViewport": True,
                           "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}})
        data = self.call("Page.captureScreenshot", params, timeout=60)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return w, h

    def close(self) -> None:
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(10)
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)
