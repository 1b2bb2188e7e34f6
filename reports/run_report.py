"""A run's HTML report: `render(run_dir)` writes index.html, timeline.html and PNGs beside them.

Reads only the run directory (test.json, history.jsonl, results.json,
nodes/*/…) through the store and the history module, so `sleuth report DIR`
can re-render any run; `sleuth run` hands over the values it already holds
instead (the history is read once per run). Links are relative, so the
directory can be moved or served. Times are seconds since the run started
(a history's `time` is nanoseconds since then, docs/history-format.md).
"""

from __future__ import annotations

import html
import json
import os
import re

import jinja2
import msgspec
import numpy as np

from sleuth.base.exits import verdict_headline, verdict_word
from sleuth.checker import counterexample
from sleuth.checker.judge import Checks, was_judged
from sleuth.checker.online.when import lines_named, timeline
from sleuth.checker.result import AT_LEAST, found_counts
from sleuth.history.jsonl import History, read_jsonl, write_jsonl
from sleuth.nemesis.faults import ANY_STARTS, ANY_STOPS
from sleuth.records import store
from sleuth.records.measure import duration, duration_text
from sleuth.records.run import Results, TestRecord
from sleuth.reports import plots
from sleuth.reports.counterexample import RUN_PAGE_WIDTH, timeline_svg

CYCLES_DRAWN = 3
TIMELINE_OPS = 2000


def nemesis_windows(events: list[dict], end: float) -> list[tuple[float, float, str]]:
    """(start s, stop s, start event name) for each fault; a fault never healed stays open
    until `end`. Event names are the nemesis's own, or Jepsen's in an imported history
    (nemesis/faults.py: ANY_STARTS, ANY_STOPS)."""
    open_: dict[str, tuple[float, str]] = {}
    out = []
    for e in events:
        t, f = e["time"] / 1e9, e["f"]
        if f in ANY_STARTS:
            open_.setdefault(ANY_STARTS[f], (t, f))
        elif f in ANY_STOPS and ANY_STOPS[f] in open_:
            start, name = open_.pop(ANY_STOPS[f])
            out.append((start, t, name))
    out.extend((t, end, f) for t, f in open_.values())
    return sorted(out)


def load_ops(history: History) -> tuple[list[dict], list[dict]]:
    """The report's view of a history: operations (start and end in ns, end None when
    unknown) and nemesis events, both from sleuth.history.jsonl's pairing."""
    events = history.events if history.compact is None else None
    ops = []
    for o in history.ops():
        end = o.complete_time
        if end is None and o.complete_pos is not None and events is not None:
            end = events[o.complete_pos].time  # an info's completion: when the client gave up
        ops.append({"process": o.process, "f": o.f, "type": o.type, "start": o.invoke_time, "end": end,
                    "node": o.node,
                    "value": o.value, "error": o.error if o.complete_pos is not None else "no completion",
                    "lines": (history.line_of(o.invoke_pos),
                              None if o.complete_pos is None else history.line_of(o.complete_pos))})
    nemesis = [{"time": e.time, "f": e.f, "value": e.value} for e in history.nemesis_events()]
    return ops, nemesis


def by_node(ops: list[dict]) -> dict[str, dict[str, int]]:
    """node -> {"ok", "fail", "info"} counts of the operations sent to it (none: {})."""
    out: dict[str, dict[str, int]] = {}
    for o in ops:
        if o.get("node") is not None:
            c = out.setdefault(str(o["node"]), {"ok": 0, "fail": 0, "info": 0})
            c[o["type"]] = c.get(o["type"], 0) + 1
    return dict(sorted(out.items()))


def nemesis_lines(nemesis: list[dict], limit: int = 60) -> list[str]:
    """Each nemesis event as a line naming the nodes it acted on: "12.3 s kill: n1",
    "20.0 s start-partition (isolate-one): n3|n1, n3|n2"."""
    out = []
    for e in nemesis[:limit]:
        v = e.get("value")
        if isinstance(v, list):
            what = ", ".join(map(str, v))
        elif isinstance(v, dict) and "cut" in v:
            what = f"({v.get('grudge', '?')}) " + ", ".join("|".join(map(str, p)) for p in v["cut"])
        elif isinstance(v, dict):
            what = ", ".join(f"{k} {x}" for k, x in v.items())
        else:
            what = "" if v is None else str(v)
        out.append(f"{e['time'] / 1e9:.1f} s {e['f']}" + (f": {what}" if what else ""))
    if len(nemesis) > limit:
        out.append(f"… {len(nemesis) - limit} more in history.jsonl")
    return out


def fault_counts(nemesis: list[dict]) -> dict[str, int]:
    """Start events that took effect, by name (a start that failed records {"error": …})."""
    out: dict[str, int] = {}
    for e in nemesis:
        if e["f"] in ANY_STARTS and not (isinstance(e.get("value"), dict) and "error" in e["value"]):
            out[e["f"]] = out.get(e["f"], 0) + 1
    return out


_NS = re.compile(r"\bt=(\d+) ns\b")
_TS = re.compile(r"\bts (\d{12,14})\b")


def seconds(text: str, started: float | None = None) -> str:
    """Explanations name instants as history times (`t=1234567890 ns`); shown as seconds since
    the run started (`t=1.235 s`), the scale of the plots and the timeline. The reference
    cluster's timestamps (`ts 1795452386000`, milliseconds of the oracle's clock) keep their
    value, which identifies them, followed by where they fall from the run's start
    (`ts 1795452386000 (start +1.770 s)`) when the start is known."""
    text = _NS.sub(lambda m: f"t={int(m.group(1)) / 1e9:.3f} s", text)
    if started:
        text = _TS.sub(lambda m: f"ts {m.group(1)} (start {int(m.group(1)) / 1e3 - started:+.3f} s)", text)
    return text


def report_history(out_dir: str, history: History, results: dict, checks: Checks, source: str,
                   run_test: TestRecord | None = None) -> str:
    """`sleuth check --report DIR`: any history (imported ones too) as a run directory
    (history.jsonl in sleuth's format, results.json, a small test.json) with its report.

    test.json records the checks (`sleuth.checker.checks.Checks`, model and options included) as a
    run's record does, so `sleuth check DIR` judges it again with the same model and options
    (--total, --linearizable-keys, --timestamps, …); a run's history (`run_test`: its
    test.json) keeps its run's record, with the checks it was judged with here. Without a
    run, test.json has no `finished`: a whole history, not a run cut short."""
    os.makedirs(store.nodes_dir(out_dir), exist_ok=True)
    write_jsonl(history.events, store.history_path(out_dir))
    if run_test is not None:  # its `workload` is the run's client workload, not the checker's name
        test = msgspec.structs.replace(run_test, model=checks.model, checks=checks)
    else:
        # the faults the history itself records (a Jepsen file's :start-partition, say): the
        # report names them and counts each, as it does a run's nemesis, beside the grey bands
        nemesis = sorted({ANY_STARTS[e.f] for e in history.nemesis_events() if e.f in ANY_STARTS})
        test = TestRecord(name=os.path.basename(source), workload=checks.checker, target=f"history {source}",
                          model=checks.model, checks=checks, nemesis=nemesis, fault=[])
    store.write_record(out_dir, test, Results.of(results))
    return render(out_dir, history=history, test=test, results=results)


def render(run_dir: str, history: History | None = None, test: TestRecord | None = None,
           results: dict | None = None) -> str:
    """Write the report of `run_dir`; the history, test record and results are read from it
    unless given (sleuth.records.run: RecordError names a record file that is not one)."""
    test = TestRecord.read(store.test_path(run_dir)) if test is None else test
    results = Results.read(store.results_path(run_dir)).to_json() if results is None else results
    history = read_jsonl(store.history_path(run_dir)) if history is None else history
    ops, nemesis = load_ops(history)
    done = [o for o in ops if o["end"] is not None]
    t = np.array([o["end"] for o in done], dtype=np.float64) / 1e9
    lat = np.array([o["end"] - o["start"] for o in done], dtype=np.float64) / 1e6
    typ = np.array([o["type"] for o in done])
    end = float(t.max()) if len(t) else 1.0
    windows = nemesis_windows(nemesis, end)
    arrays = {"t": t, "lat": lat, "type": typ}
    plotted = len(t) > 0  # no operation completed (a run that crashed at once): nothing to plot, no empty axes
    for name, draw, title in (("latency.png", plots.latency, "latency by completion time"),
                              ("throughput.png", plots.throughput, "throughput")):
        if plotted:
            draw(os.path.join(run_dir, name), arrays, windows, title)
        elif os.path.exists(os.path.join(run_dir, name)):
            os.remove(os.path.join(run_dir, name))  # a report rendered again must not show an old picture

    anomalies = []
    found = found_counts(results)
    for name in results.get("anomaly-types", []) + results.get("also-found", []):
        examples = results.get("anomalies", {}).get(name, [])
        pictures = []
        for i, ex in enumerate(examples[:CYCLES_DRAWN]):
            if ex.get("steps"):
                png = f"anomaly-{name}-{i}.png"
                plots.cycle(os.path.join(run_dir, png), ex["steps"], f"{name} #{i + 1}")
                pictures.append(png)
        anomalies.append({"name": name, "allowed": name not in results.get("anomaly-types", []),
                          "found": found.get(name), "examples": [_example_text(ex, test.started) for ex in examples[:5]],
                          "pictures": pictures})

    shrunk = counterexample.read_summary(run_dir)
    if shrunk is not None:
        shrunk["svg"] = timeline_svg(shrunk["rows"], (shrunk.get("example") or {}).get("steps", []))
        shrunk["text"] = _example_text(shrunk.get("example") or {}, test.started)
    counts = {k: sum(1 for o in ops if o["type"] == k) for k in ("ok", "fail", "info")}
    logs = sorted(os.path.relpath(os.path.join(dp, f), run_dir)
                  for dp, _, fs in os.walk(os.path.join(run_dir, "nodes")) for f in fs)
    first = results.get("anomaly-types", [])[:1]
    example = (results.get("anomalies", {}).get(first[0]) or [{}])[0] if first else {}
    _timeline(run_dir, ops, windows, focus=(first[0], lines_named(example, lists=False)) if first else None)
    lower = any((a["found"] or "").startswith(AT_LEAST) for a in anomalies)  # the legend of the mark
    when = _when_found(results, history, test.started)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates")),
                             autoescape=True)
    page = env.get_template("run.html.j2").render(
        test=test, results=results, valid=results.get("valid"), verdict=verdict_headline(results.get("valid")),
        verdict_class=verdict_word(results.get("valid")), counts=counts, anomalies=anomalies,
        windows=windows, logs=logs, duration=duration_text(duration(history)), n_ops=len(ops), plotted=plotted,
        judged=was_judged(results),
        timestamps=results.get("timestamps"), faults=fault_counts(nemesis), shrunk=shrunk,
        nodes=by_node(ops), nemesis_lines=nemesis_lines(nemesis),
        page_width=RUN_PAGE_WIDTH, lower_bound=AT_LEAST if lower else None, when=when)
    out = store.report_path(run_dir)
    with open(out, "w") as f:
        f.write(page)
    return out


def _when_found(results: dict, history: History, started: float | None) -> list[dict] | None:
    """For a run judged online (`sleuth run --online`): each anomaly type, when it happened and
    whether it was found online (and when) or only at the end (`checker.online.when`); None
    for a run judged only at the end."""
    online = results.get("online")
    if not isinstance(online, dict):
        return None
    rows = online.get("anomalies")
    if rows is None:  # a results.json written before this record had it
        rows = timeline(results, history, online.get("found", []), float("nan"))
    out = []
    for r in rows:
        at = r.get("found-at")
        after = None if started is None or at is None or at != at else at - started
        out.append({**r, "found-after": after})
    return out


def _example_text(ex: dict, started: float | None = None) -> dict:
    """An example's explanation, each part once: a cycle's explanation already spells out its
    steps line by line, so with steps the sentence keeps only its first line (what the
    anomaly is) and each step is listed once, as the edge and why it holds."""
    text = seconds(str(ex.get("explanation") or ""), started)
    all_steps = ex.get("steps", [])
    steps = [seconds(f"{s.get('from')} < {s.get('to')} ({s.get('kind')}) because {s.get('why', '')}", started)
             for s in all_steps][:12]
    if all_steps:
        text = text.splitlines()[0] if text else ""
    return {"text": text, "steps": steps, "more": max(0, len(all_steps) - 12)}


def _timeline(run_dir: str, ops: list[dict], windows: list, focus: tuple[str, set[int]] | None = None) -> None:
    """One row per process, one bar per operation, as inline SVG: TIMELINE_OPS operations, the
    first ones, or, when the history has more and the first anomaly's example names lines
    (`focus`: its type and those lines), the ones around the earliest operation it names."""
    order = sorted(ops, key=lambda o: o["start"])
    lo, what = 0, "first"
    if focus is not None and len(order) > TIMELINE_OPS:
        i = next((i for i, o in enumerate(order) if focus[1].intersection(o["lines"])), None)
        if i is not None:
            lo = max(0, min(i - TIMELINE_OPS // 4, len(order) - TIMELINE_OPS))
            what = f"around the first {focus[0]} example (line {order[i]['lines'][0]}):"
    shown = order[lo:lo + TIMELINE_OPS]
    procs = sorted({o["process"] for o in shown}, key=lambda p: (isinstance(p, str), p))
    row = {p: i for i, p in enumerate(procs)}
    t0 = shown[0]["start"] if lo and shown else 0  # the first ones are drawn from the run's start
    t_end = max([(o["end"] or o["start"]) - t0 for o in shown] or [1])
    width, height = 1400, 18 * len(procs) + 30
    sx = (width - 80) / max(t_end, 1)
    # drawn at 1400 units and scaled to the window's width: a fixed 1400 px scrolled sideways
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
             'font-size="10">']
    for a, b, f in windows:
        a, b = max(a * 1e9 - t0, 0), min(b * 1e9 - t0, t_end)
        if b <= 0 or a >= t_end:
            continue  # outside the operations shown
        parts.append(f'<rect x="{80 + a * sx:.1f}" y="0" width="{max(1, (b - a) * sx):.1f}" '
                     f'height="{height}" fill="#868e96" opacity="0.15"><title>{html.escape(f)}</title></rect>')
    for p, i in row.items():
        parts.append(f'<text x="2" y="{20 + 18 * i}">process {html.escape(str(p))}</text>')
    for o in shown:
        x = 80 + (o["start"] - t0) * sx
        w = max(1.0, ((o["end"] or t_end + t0) - o["start"]) * sx)
        tip = html.escape(f"{o['f']} {json.dumps(o['value'])[:300]} → {o['type']}"
                          + (f" ({o['error']})" if o.get("error") else ""))
        parts.append(f'<rect x="{x:.1f}" y="{10 + 18 * row[o["process"]]}" width="{w:.1f}" height="12" '
                     f'fill="{plots.COLORS[o["type"]]}"><title>{tip}</title></rect>')
    parts.append("</svg>")
    page = ("<!doctype html><meta charset='utf-8'><title>timeline</title>"
            "<body style='font-family:sans-serif'><p><a href='index.html'>← report</a> — "
            + (f"first {len(shown)} of {len(ops)} operations" if what == "first" else
               f"{what} operations {lo + 1:,}–{lo + len(shown):,} of {len(ops):,}")
            + "; hover a bar for its value</p>"
            + "".join(parts) + "</body>")
    with open(os.path.join(run_dir, "timeline.html"), "w") as f:
        f.write(page)
