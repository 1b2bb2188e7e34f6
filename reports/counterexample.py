"""The counterexample's picture: one row per process, one bar per operation from its invoke
to its completion (in event order, not time: a counterexample has a handful of events), and
an arrow for each edge of the anomaly's cycle (the explanation's steps), as inline SVG."""

from __future__ import annotations

import html
import json

from sleuth.reports.plots import COLORS

RUN_PAGE_WIDTH = 1000  # the run report's column in pixels (run_report.render gives it to run.html.j2)
EDGE_COLORS = {"rw": "#c92a2a", "wr": "#1c7ed6", "ww": "#5f3dc4", "realtime": "#868e96",
               "process": "#868e96"}


def timeline_svg(rows: list[dict], steps: list[dict]) -> str:
    """`rows`: the op table (sleuth.checker.shrink.Counterexample.rows); `steps`: the cycle's
    edges, naming operations by their original invoke line (`from-line`, `to-line`)."""
    procs = sorted({r["process"] for r in rows}, key=str)
    row_of = {p: i for i, p in enumerate(procs)}
    events = max([r["complete"] or r["invoke"] for r in rows] or [1]) + 1
    left, lane = 90, 58
    # up to 24 events fit the report's 1,000-pixel column; more scroll sideways in their own box
    step = max(36, min(64, (RUN_PAGE_WIDTH - left - 40) // events))
    width, height = left + step * events + 40, lane * len(procs) + 20
    by_line = {r["line"]: r for r in rows}

    def y(r: dict) -> int:  # the top of the op's bar
        return 24 + lane * row_of[r["process"]]

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'font-size="11" font-family="sans-serif">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
             'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
             'fill="context-stroke"/></marker></defs>']
    for p, i in row_of.items():
        parts.append(f'<text x="4" y="{36 + lane * i}">process {html.escape(str(p))}</text>')
    for r in rows:
        x0 = left + step * r["invoke"]
        x1 = left + step * (r["complete"] or events)
        tip = html.escape(f"line {r['line']}: {r['f']} {json.dumps(r['value'])[:300]} → {r['type']}")
        parts.append(f'<rect x="{x0}" y="{y(r)}" width="{max(8, x1 - x0)}" height="16" rx="3" '
                     f'fill="{COLORS.get(r["type"], "#495057")}" opacity="0.8"><title>{tip}</title></rect>')
        parts.append(f'<text x="{x0 + 3}" y="{y(r) + 12}" font-size="10" fill="white">'
                     f'{html.escape(str(r.get("name", "")))}</text>')
        parts.append(f'<text x="{x0}" y="{y(r) - 3}" font-size="9">line {r["line"]}</text>')
    for s in steps:
        a, b = by_line.get(s.get("from-line")), by_line.get(s.get("to-line"))
        if a is None or b is None:
            continue
        color = EDGE_COLORS.get(s.get("kind"), "#495057")
        # from the end of one bar to the start of the other, bowing down and up between lanes
        ax, ay = left + step * (a["complete"] or events), y(a) + 8
        bx, by = left + step * b["invoke"], y(b) + 8
        bow = 22 if by >= ay else -22
        curve = ((ax, ay), (ax + 18, ay + bow), (bx - 18, by - bow), (bx, by))
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = curve
        parts.append(f'<path d="M{x0:.0f},{y0:.0f} C{x1:.0f},{y1:.0f} {x2:.0f},{y2:.0f} {x3:.0f},{y3:.0f}" '
                     f'fill="none" stroke="{color}" stroke-width="1.8" marker-end="url(#arrow)">'
                     f'<title>{html.escape(str(s.get("why", "")))}</title></path>')
        lx, ly = _bezier(0.3, *curve)  # not the middle: two edges of one pair cross there
        label = html.escape(str(s.get("kind")))
        parts.append(f'<rect x="{lx - 3.5 * len(label) - 3:.0f}" y="{ly - 8:.0f}" width="{7 * len(label) + 6}" '
                     f'height="14" fill="white" opacity="0.85"/><text x="{lx:.0f}" y="{ly + 3:.0f}" '
                     f'fill="{color}" font-weight="bold" text-anchor="middle">{label}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _bezier(t: float, *points: tuple[float, float]) -> tuple[float, float]:
    """The point at `t` of the cubic Bézier curve through four control points (a label
    placed a third of the way along its edge, so two edges between one pair do not collide)."""
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = points
    u = 1 - t
    return (u ** 3 * x0 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t ** 3 * x3,
            u ** 3 * y0 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t ** 3 * y3)
