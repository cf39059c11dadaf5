#!/usr/bin/python3
"""Formats the benchmark's rows (TSV: measure, pg_wf, baseline, unit, note)
as one Markdown table with the ratio pg_wf / baseline of each row."""
import sys


def num(s):
    """The leading number of a cell ("1052.0 (graph finished)" -> 1052.0)."""
    try:
        return float(s.split()[0])
    except (ValueError, IndexError):
        return None


def fmt(s):
    v = num(s)
    if v is None:
        return s or "—"
    rest = s.split(None, 1)[1] if len(s.split(None, 1)) > 1 else ""
    return (fmt_number(v) + " " + rest).strip()


def fmt_number(v):
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def main():
    rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
    header = ["measure", "pg_wf", "baseline", "ratio pg_wf/baseline", "notes"]
    out = []
    for r in rows:
        r += [""] * (5 - len(r))
        measure, wf, base, unit, note = r[:5]
        a, b = num(wf), num(base)
        ratio = f"{a / b:.2f}×" if a is not None and b not in (None, 0.0) else "—"
        if unit:
            measure = f"{measure} ({unit})"
        out.append([measure, fmt(wf), fmt(base), ratio, note])
    widths = [max(len(x[i]) for x in out + [header]) for i in range(5)]
    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for x in out:
        print(line(x))


if __name__ == "__main__":
    main()
