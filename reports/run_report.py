"""A run's HTML report: `render(run_dir)` writes index.html, timeline.html and PNGs beside them.

Reads only the run directory (test.json, history.jsonl, results.json,
nodes/*/…), so `sleuth report DIR` can re-render any run, and links are
relative, so the directory can be moved or served.
"""

from __future__ import annotations

import html
import json
import os
from typing import Any

import jinja2
import numpy as np
import orjson

from sleuth.reports import plots

START_FS = {"kill", "pause", "clock-bump", "start-partition", "start-dual-leader"}
STOP_FOR = {"restart": "kill", "resume": "pause", "clock-reset": "clock-bump",
            "stop-partition": "start-partition", "stop-dual-leader": "start-dual-leader"}
CYCLES_DRAWN = 3
TIMELINE_OPS = 2000


def nemesis_windows(events: list[dict], end: float) -> list[tuple[float, float, str]]:
    """(start s, stop s, f) for each fault; a fault never healed stays open until `end`."""
    open_: dict[str, float] = {}
    out = []
    for e in events:
        t, f = e["time"] / 1e9, e["f"]
        if f in START_FS or f.startswith("start-"):
            open_.setdefault(f, t)
        else:
            start_f = STOP_FOR.get(f) or ("start-" + f[5:] if f.startswith("stop-") else None)
            if start_f in open_:
                out.append((open_.pop(start_f), t, start_f))
    out.extend((t, end, f) for f, t in open_.items())
    return sorted(out)


def load_ops(path: str) -> tuple[list[dict], list[dict]]:
    """Operations (invoke paired with completion, per process) and nemesis events."""
    pending: dict[Any, dict] = {}
    ops, nemesis = [], []
    with open(path, "rb") as f:
        for line in f:
            e = orjson.loads(line)
            if e["process"] == "nemesis":
                nemesis.append(e)
            elif e["type"] == "invoke":
                pending[e["process"]] = e
            else:
                inv = pending.pop(e["process"], None)
                if inv is not None:
                    ops.append({"process": e["process"], "f": e["f"], "type": e["type"],
                                "start": inv["time"], "end": e["time"], "value": e.get("value"),
                                "error": e.get("error")})
    for inv in pending.values():  # never completed: info
        ops.append({"process": inv["process"], "f": inv["f"], "type": "info", "start": inv["time"],
                    "end": None, "value": inv.get("value"), "error": "no completion"})
    return ops, nemesis


def _json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def render(run_dir: str) -> str:
    test = _json(os.path.join(run_dir, "test.json"))
    results = _json(os.path.join(run_dir, "results.json"))
    ops, nemesis = load_ops(os.path.join(run_dir, "history.jsonl"))
    done = [o for o in ops if o["end"] is not None]
    t = np.array([o["end"] for o in done], dtype=np.float64) / 1e9
    lat = np.array([o["end"] - o["start"] for o in done], dtype=np.float64) / 1e6
    typ = np.array([o["type"] for o in done])
    end = float(t.max()) if len(t) else 1.0
    windows = nemesis_windows(nemesis, end)
    arrays = {"t": t, "lat": lat, "type": typ}
    plots.latency(os.path.join(run_dir, "latency.png"), arrays, windows, "latency by completion time")
    plots.throughput(os.path.join(run_dir, "throughput.png"), arrays, windows, "throughput")

    anomalies = []
    for name in results.get("anomaly-types", []) + results.get("also-found", []):
        examples = results.get("anomalies", {}).get(name, [])
        pictures = []
        for i, ex in enumerate(examples[:CYCLES_DRAWN]):
            if ex.get("steps"):
                png = f"anomaly-{name}-{i}.png"
                plots.cycle(os.path.join(run_dir, png), ex["steps"], f"{name} #{i + 1}")
                pictures.append(png)
        anomalies.append({"name": name, "allowed": name not in results.get("anomaly-types", []),
                          "count": len(examples), "examples": [_example_text(ex) for ex in examples[:5]],
                          "pictures": pictures})

    counts = {k: int((typ == k).sum()) for k in ("ok", "fail", "info")}
    logs = sorted(os.path.relpath(os.path.join(dp, f), run_dir)
                  for dp, _, fs in os.walk(os.path.join(run_dir, "nodes")) for f in fs)
    _timeline(run_dir, ops, windows)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates")),
                             autoescape=True)
    page = env.get_template("run.html.j2").render(
        test=test, results=results, valid=results.get("valid"), counts=counts, anomalies=anomalies,
        windows=windows, logs=logs, duration=end, n_ops=len(ops),
        timestamps=results.get("timestamps"))
    out = os.path.join(run_dir, "index.html")
    with open(out, "w") as f:
        f.write(page)
    return out


def _example_text(ex: dict) -> dict:
    text = ex.get("explanation") or ""
    steps = [s.get("why", "") for s in ex.get("steps", [])][:12]
    return {"text": text, "steps": steps, "more": max(0, len(ex.get("steps", [])) - 12)}


def _timeline(run_dir: str, ops: list[dict], windows: list) -> None:
    """One row per process, one bar per operation (first TIMELINE_OPS ops), as inline SVG."""
    shown = sorted(ops, key=lambda o: o["start"])[:TIMELINE_OPS]
    procs = sorted({o["process"] for o in shown}, key=lambda p: (isinstance(p, str), p))
    row = {p: i for i, p in enumerate(procs)}
    t_end = max([o["end"] or o["start"] for o in shown] or [1])
    width, height = 1400, 18 * len(procs) + 30
    sx = (width - 80) / max(t_end, 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-size="10">']
    for a, b, f in windows:
        parts.append(f'<rect x="{80 + a * 1e9 * sx:.1f}" y="0" width="{max(1, (b - a) * 1e9 * sx):.1f}" '
                     f'height="{height}" fill="#868e96" opacity="0.15"><title>{html.escape(f)}</title></rect>')
    for p, i in row.items():
        parts.append(f'<text x="2" y="{20 + 18 * i}">process {html.escape(str(p))}</text>')
    for o in shown:
        x = 80 + o["start"] * sx
        w = max(1.0, ((o["end"] or t_end) - o["start"]) * sx)
        tip = html.escape(f"{o['f']} {json.dumps(o['value'])[:300]} → {o['type']}"
                          + (f" ({o['error']})" if o.get("error") else ""))
        parts.append(f'<rect x="{x:.1f}" y="{10 + 18 * row[o["process"]]}" width="{w:.1f}" height="12" '
                     f'fill="{plots.COLORS[o["type"]]}"><title>{tip}</title></rect>')
    parts.append("</svg>")
    page = ("<!doctype html><meta charset='utf-8'><title>timeline</title>"
            "<body style='font-family:sans-serif'><p><a href='index.html'>← report</a> — "
            f"first {len(shown)} of {len(ops)} operations; hover a bar for its value</p>"
            + "".join(parts) + "</body>")
    with open(os.path.join(run_dir, "timeline.html"), "w") as f:
        f.write(page)
