"""The campaign page: `render(campaign_dir, table, record)` writes index.html and trend PNGs beside it.

Inputs are the campaign's record (`campaign.json`: the matrix, what each run
was expected to be, where its run directory is) and the campaign table, one
row per run, whose columns the Spark jobs own (`sleuth.spark.jobs.
judge_runs`, issue 12): verdicts with the durability audit, latencies,
throughput. Without Spark (`--no-spark`) the table comes from the runs' own
files and carries only what they say; the page shows "—" for the rest.

Trends (as Jepsen's nightly dashboards do) read the tables of the earlier
campaigns of the same name in the same store: anomalies, throughput and p99
latency per night, drawn with matplotlib. Links are relative, so the store
can be moved or served (`sleuth serve`).
"""

from __future__ import annotations

import math
import os
from typing import Any

import jinja2
from markupsafe import Markup, escape

from sleuth.base.exits import valid_of_text, verdict_text
from sleuth.base.words import noun
from sleuth.records import store
from sleuth.records.campaign import NOT_AUDITED, label_counts, load_record, run_key, verdict
from sleuth.records.measure import (
    DEFINITION,
    DURATION_HEADER,
    THROUGHPUT_HEADER,
    run_duration,
    throughput,
)
from sleuth.records.run import RecordError, TestRecord

TRENDS = (("trend-anomalies.png", "runs with anomalies (unexpected, expected)"),
          ("trend-throughput.png", f"median throughput, {THROUGHPUT_HEADER}"),
          ("trend-p99.png", "median p99 latency, ms"))


def load_table(campaign_dir: str, record: dict | None = None):
    """The campaign table: Spark's Parquet, else its CSV, else one made from the runs' own files."""
    import pandas as pd

    parquet, csv = (os.path.join(campaign_dir, f"campaign.{x}") for x in ("parquet", "csv"))
    if os.path.exists(parquet):
        return pd.read_parquet(parquet)
    if os.path.exists(csv):
        return pd.read_csv(csv, dtype={"valid": str, "run_valid": str, "anomaly_types": str,
                                       "nemesis": str, "fault": str}, keep_default_na=False,
                           na_values={c: [""] for c in ("latency_p50_ms", "latency_p99_ms", "throughput",
                                                        "latency_p50_fault_ms", "latency_p99_fault_ms",
                                                        "availability_fault", "duration_s")})
    return table_from_runs(record or load_record(campaign_dir))


def table_from_runs(record: dict):
    """Without Spark: what each finished run's own files say (no durability audit, no latencies);
    duration and throughput as Spark's table defines them (sleuth.records.measure)."""
    import pandas as pd

    rows = []
    for r in record["runs"]:
        if r.get("status") != "done" or not r.get("run_dir"):
            continue
        run, path = r["run"], store.test_path(r["run_dir"])
        model = TestRecord.read(path).model if os.path.exists(path) else None  # a pruned run: its model unsaid
        duration = run_duration(r["run_dir"])  # as Spark's table has it: one owner, sleuth.records.measure
        word = verdict_text(r.get("valid"))
        rows.append({"campaign": record["name"], "run": run["id"], "run_dir": r["run_dir"],
                     "workload": run["workload"], "target": run["target"], "nemesis": run["nemesis"],
                     "fault": run["fault"], "isolation": run["isolation"] or "", "model": model or "",
                     "seed": run["seed"], "valid": word, "anomaly_types": ",".join(sorted(r["anomaly-types"])),
                     "run_valid": word, "ops": r["ops"], "ok": r["ok"], "fail": r["fail"], "info": r["info"],
                     "duration_s": math.nan if duration is None else duration,
                     "throughput": _nan(throughput(r["ok"], duration))})
    return pd.DataFrame(rows)


def _nan(v: float | None) -> float:
    return math.nan if v is None else v


def verdicts(table) -> dict[str, dict]:
    """run_key(run_dir) -> {"valid": True/False/"unknown", "anomaly_types": [...], "row"}, from a campaign table."""
    out = {}
    for row in table.to_dict("records"):
        out[run_key(row["run_dir"])] = {
            "valid": valid_of_text(row.get("valid")),
            "anomaly_types": [a for a in str(row.get("anomaly_types") or "").split(",") if a],
            "row": row}
    return out


def render(campaign_dir: str, table=None, record: dict | None = None) -> str:
    import numpy as np

    record = record or load_record(campaign_dir)
    table = load_table(campaign_dir, record) if table is None else table
    by_dir = verdicts(table)
    runs = []
    for r in record["runs"]:
        label, status = verdict(r, by_dir)
        v = by_dir.get(run_key(r["run_dir"])) if r.get("run_dir") else None
        row = v["row"] if v else {}
        report = os.path.join(r["run_dir"], "index.html") if r.get("run_dir") else None
        runs.append({"id": r["run"]["id"], "id_html": _breakable(r["run"]["id"]), "run": r["run"],
                     "label": label, "status": status,
                     "anomalies": v["anomaly_types"] if v else r.get("anomaly-types", []),
                     "href": os.path.relpath(report, campaign_dir) if report and os.path.exists(report) else None,
                     "row": {k: _show(row.get(k)) for k in (
                         "durability", "lost_writes", "phantom_writes", "spark_agrees", "ops", "throughput",
                         "latency_p50_ms", "latency_p99_ms", "latency_p99_fault_ms", "availability_fault",
                         "duration_s")}})
        shown = runs[-1]["row"]
        if row.get("durability") == NOT_AUDITED:  # nothing was counted: no count of 0 either
            shown["lost_writes"] = shown["phantom_writes"] = NOT_AUDITED
        if isinstance(row.get("spark_agrees"), bool | np.bool_):  # a word, not Python's True
            shown["spark_agrees"] = "yes" if row["spark_agrees"] else "no"
    counts = label_counts([r["label"] for r in runs])
    anomaly_runs: dict[str, list[str]] = {}
    for r in runs:
        for a in r["anomalies"]:
            anomaly_runs.setdefault(a, []).append(r["id"])
    _trends(campaign_dir, record["name"])
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates")),
                             autoescape=True)
    env.filters["plural"] = lambda word, n: noun(n, word)
    page = env.get_template("campaign.html.j2").render(
        record=record, runs=runs, matrix=_matrix(runs), counts=counts, anomaly_runs=sorted(anomaly_runs.items()),
        spark="spark_agrees" in table.columns, trends=TRENDS, summary=_summary(table),
        heads={"duration": DURATION_HEADER, "throughput": THROUGHPUT_HEADER, "definition": DEFINITION},
        stamp=os.path.basename(os.path.normpath(campaign_dir)))
    path = os.path.join(campaign_dir, "index.html")
    with open(path, "w") as f:
        f.write(page)
    return os.path.abspath(path)


def _matrix(runs: list[dict]) -> dict:
    """Rows (workload, target, isolation, fault) × columns (nemesis); each cell the runs over seeds."""
    cols = sorted({r["run"]["nemesis"] or "none" for r in runs})
    rows: dict[tuple, dict[str, list]] = {}
    for r in runs:
        run = r["run"]
        key = (run["workload"], run["target"], run["isolation"] or "", run["fault"] or "none")
        rows.setdefault(key, {}).setdefault(run["nemesis"] or "none", []).append(r)
    return {"cols": cols, "rows": sorted(rows.items())}


def _summary(table) -> dict:
    """Medians over the campaign (NaN-free), for the one-line latency and throughput summary."""
    out = {}
    for col in ("throughput", "latency_p50_ms", "latency_p99_ms", "latency_p99_fault_ms", "availability_fault"):
        if col in table.columns:
            s = table[col].astype(float).dropna()
            out[col] = _show(float(s.median())) if len(s) else "—"
        else:
            out[col] = "—"
    audited = (table["durability"] != NOT_AUDITED) if "durability" in table.columns else None
    out["audited"] = int(audited.sum()) if audited is not None else 0
    out["not_audited"] = len(table) - out["audited"]
    for col in ("lost_writes", "phantom_writes"):  # the durability audit, over the runs it audited
        out[col] = (str(int(table[col][audited].fillna(0).astype(int).sum()))
                    if col in table.columns and out["audited"] else NOT_AUDITED)
    out["durability_bad"] = ([r for r, d in zip(table["run"], table["durability"]) if d in ("lost", "phantom")]
                             if "durability" in table.columns else [])
    return out


def _breakable(run_id: str) -> Markup:
    """A run id with a line-break opportunity after each dot (`<wbr>`: nothing is added to
    the text a reader copies), so the runs table fits the page at a laptop's width."""
    return Markup(".<wbr>").join(escape(part) for part in run_id.split("."))


def _show(v: Any) -> str:
    if v is None or isinstance(v, float) and math.isnan(v):
        return "—"
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.2f}"
    return str(v)


def history(campaign_dir: str, name: str) -> list[tuple[str, Any]]:
    """(start time, table) of every campaign of this name in the store, oldest first, this one included."""
    parent = os.path.dirname(os.path.normpath(campaign_dir))
    out = []
    for stamp in sorted(os.listdir(parent)):
        d = os.path.join(parent, stamp)
        try:
            rec = load_record(d)
        except RecordError:  # no campaign.json (a directory of runs), or not one: no night of this trend
            continue
        if rec["name"] != name:
            continue
        try:
            out.append((stamp, load_table(d, rec), rec))
        except (OSError, ValueError, KeyError, RecordError):
            continue  # an unreadable earlier night is left out of the trend, not fatal
    return out


def _trends(campaign_dir: str, name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt

    nights = history(campaign_dir, name)
    labels = [s[4:8] + " " + s[9:13] if len(s) >= 13 else s for s, _, _ in nights]
    unexpected, expected, tput, p99 = [], [], [], []
    for _, table, rec in nights:
        expect = {run_key(r["run_dir"]): r["run"]["expect"] for r in rec["runs"] if r.get("run_dir")}
        bad = [valid_of_text(v) is False for v in table.get("valid", [])]
        kinds = [expect.get(run_key(d), "valid") for d in table.get("run_dir", [])]
        unexpected.append(sum(1 for b, k in zip(bad, kinds) if b and k == "valid"))
        expected.append(sum(1 for b, k in zip(bad, kinds) if b and k == "invalid"))
        tput.append(_median(table, "throughput"))
        p99.append(_median(table, "latency_p99_ms"))
    x = list(range(len(nights)))
    for (fname, title), series in zip(TRENDS, ([unexpected, expected], [tput], [p99])):
        fig, ax = plt.subplots(figsize=(8, 2.6), dpi=90)
        for ys, style, label in zip(series, ("o-", "s--"), ("unexpected", "expected (fault switch on)")):
            ax.plot(x, ys, style, label=label)
        if len(series) > 1:
            ax.legend(fontsize=7, loc="upper left")
        ax.set_xticks(x, labels, rotation=30, fontsize=7)
        ax.set_title(f"{name}: {title}", fontsize=9)
        ax.set_ylim(bottom=0)
        fig.tight_layout()
        fig.savefig(os.path.join(campaign_dir, fname))
        plt.close(fig)


def _median(table, col: str) -> float:
    if col not in table.columns:
        return math.nan
    s = table[col].astype(float).dropna()
    return float(s.median()) if len(s) else math.nan
