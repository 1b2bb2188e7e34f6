"""The counterexample's picture: one row per process, one bar per operation from its invoke
to its completion (in event order, not time: a counterexample has a handful of events), and
an arrow for each edge of the anomaly's cycle (the explanation's steps), as inline SVG."""

from __future__ import annotations

import html
import json

from sleuth.reports.plots import COLORS

EDGE_COLORS = {"rw": "#c92a2a", "wr": "#1c7ed6", "ww": "#5f3dc4", "realtime": "#868e96",
               "process": "#868e96"}


def timeline_svg(rows: list[dict], steps: list[dict]) -> str:
    """`rows`: the op table (sleuth.checker.shrink.Counterexample.rows); `steps`: the cycle's
    edges, naming operations by their original invoke line (`from-line`, `to-line`)."""
    procs = sorted({r["process"] for r in rows}, key=str)
    row_of = {p: i for i, p in enumerate(procs)}
    events = max([r["complete"] or r["invoke"] for r in rows] or [1]) + 1
    left, step, lane = 90, 46, 34
    width, height = left + step * events + 20, lane * len(procs) + 30
    by_line = {r["line"]: r for r in rows}

    def y(r: dict) -> int:
        return 16 + lane * row_of[r["process"]]

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'font-size="11" font-family="sans-serif">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
             'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
             'fill="context-stroke"/></marker></defs>']
    for p, i in row_of.items():
        parts.append(f'<text x="4" y="{30 + lane * i}">process {html.escape(str(p))}</text>')
    for r in rows:
        x0 = left + step * r["invoke"]
        x1 = left + step * (r["complete"] or events)
        tip = html.escape(f"line {r['line']}: {r['f']} {json.dumps(r['value'])[:300]} → {r['type']}")
        parts.append(f'<rect x="{x0}" y="{y(r) + 4}" width="{max(8, x1 - x0)}" height="14" rx="3" '
                     f'fill="{COLORS.get(r["type"], "#495057")}" opacity="0.8"><title>{tip}</title></rect>')
        parts.append(f'<text x="{x0 + 2}" y="{y(r) + 1}" font-size="9">line {r["line"]}</text>')
    for s in steps:
        a, b = by_line.get(s.get("from-line")), by_line.get(s.get("to-line"))
        if a is None or b is None:
            continue
        color = EDGE_COLORS.get(s.get("kind"), "#495057")
        ax, bx = left + step * ((a["invoke"] + (a["complete"] or events)) / 2), left + step * b["invoke"]
        ay, by = y(a) + 11, y(b) + 11
        parts.append(f'<path d="M{ax:.0f},{ay} C{ax:.0f},{ay + 20} {bx:.0f},{by - 20} {bx:.0f},{by}" '
                     f'fill="none" stroke="{color}" stroke-width="1.6" marker-end="url(#arrow)">'
                     f'<title>{html.escape(str(s.get("why", "")))}</title></path>')
        parts.append(f'<text x="{(ax + bx) / 2:.0f}" y="{(ay + by) / 2 + 4:.0f}" fill="{color}" '
                     f'font-weight="bold">{html.escape(str(s.get("kind")))}</text>')
    parts.append("</svg>")
    return "".join(parts)
