"""Job 4, aggregate: the campaign table, one row per run (the campaign page reads these columns).

Counts, latencies, availability, the first-to-last time and the faults come
from the task that consolidated the run (consolidate.py calls `run_stats`);
the run's configuration from its test.json, its own verdict from its
results.json; the Spark verdict from the judge and durability jobs.

- `duration_s` and `throughput`: as `sleuth.records.measure` defines them (the one
  owner: the page without Spark and the JUnit XML use the same), from the span
  the consolidation measured;
- latencies: ok operations, invoke to completion, in milliseconds; the
  `_fault` ones only over operations invoked while a fault was active;
- `availability_fault`: of the operations invoked during a fault, the share
  that were ok (NaN when the run injected no fault).
"""

from __future__ import annotations

from sleuth.checker.models import LOST_WRITE, PHANTOM_WRITE
from sleuth.records.campaign import NOT_AUDITED

COLUMNS = {  # name: pandas dtype, in the order the campaign page expects
    "campaign": "object", "run": "object", "run_dir": "object", "workload": "object",
    "target": "object", "nemesis": "object", "fault": "object", "isolation": "object",
    "model": "object", "seed": "int64", "valid": "object", "anomaly_types": "object",
    "run_valid": "object", "spark_agrees": "bool", "lost_writes": "int64", "phantom_writes": "int64",
    "durability": "object", "ops": "int64", "ok": "int64", "fail": "int64", "info": "int64",
    "duration_s": "float64", "throughput": "float64", "latency_p50_ms": "float64",
    "latency_p99_ms": "float64", "latency_p50_fault_ms": "float64", "latency_p99_fault_ms": "float64",
    "availability_fault": "float64", "fault_events": "int64",
}


STATS_SCHEMA = ("`ops` BIGINT, `ok` BIGINT, `fail` BIGINT, `info` BIGINT, `latency_p50_ms` DOUBLE, "
                "`latency_p99_ms` DOUBLE, `latency_p50_fault_ms` DOUBLE, `latency_p99_fault_ms` DOUBLE, "
                "`availability_fault` DOUBLE")


def run_stats(ops) -> dict:
    """One run's STATS_SCHEMA columns from its operations (pandas: outcome, invoke_time,
    complete_time, fault_active). Computed in the task that consolidates the run, where its
    operations already are: a Spark groupBy with exact percentiles over the operations
    cost more than the rest of the aggregation together. Percentiles interpolate linearly,
    as Spark's `percentile` does."""
    import numpy as np

    ok = (ops["outcome"] == "ok").to_numpy()
    fault = ops["fault_active"].to_numpy(bool)
    lat = ((ops["complete_time"] - ops["invoke_time"]).to_numpy("float64", na_value=np.nan)) / 1e6

    def pct(xs, q):
        return float(np.percentile(xs, q)) if len(xs) else None

    return {"ops": len(ops), "ok": int(ok.sum()), "fail": int((ops["outcome"] == "fail").sum()),
            "info": int((ops["outcome"] == "info").sum()),
            "latency_p50_ms": pct(lat[ok], 50), "latency_p99_ms": pct(lat[ok], 99),
            "latency_p50_fault_ms": pct(lat[ok & fault], 50), "latency_p99_fault_ms": pct(lat[ok & fault], 99),
            "availability_fault": float((ok & fault).sum() / fault.sum()) if fault.any() else None}




def durability_text(lost: int, phantom: int, audited: bool) -> str:
    if not audited:
        return NOT_AUDITED
    return "lost" if lost else "phantom" if phantom else "ok"


def campaign_table(meta, stats, verdicts, anomalies, audited: set[str]):
    """The table (pandas) from per-run pandas frames.

    meta: run, campaign, run_dir, workload, target, nemesis, fault, isolation, model, seed, run_valid,
    run_anomaly_types (list);
    stats: the consolidation's run rows (run_stats, span_ns, fault_events); verdicts: run, valid, anomaly_types (list); anomalies: run, anomaly (per write).
    """
    import numpy as np
    import pandas as pd

    from sleuth.base.exits import verdict_text
    from sleuth.records.measure import seconds, throughput

    stats = stats.assign(duration_s=[seconds(s) for s in stats["span_ns"]])
    stats = stats[[c for c in stats.columns if c in COLUMNS or c == "run"]]
    t = meta.merge(stats, on="run", how="left").merge(verdicts, on="run", how="left")
    counts = anomalies.groupby(["run", "anomaly"]).size().unstack(fill_value=0) if len(anomalies) else None
    lost = [int(counts.at[r, LOST_WRITE]) if counts is not None and LOST_WRITE in counts and r in counts.index
            else 0 for r in t["run"]]
    phantom = [int(counts.at[r, PHANTOM_WRITE]) if counts is not None and PHANTOM_WRITE in counts
               and r in counts.index else 0 for r in t["run"]]
    t["lost_writes"], t["phantom_writes"] = lost, phantom
    types, valid, agrees = [], [], []
    for v, ts, lo, ph, rv, rts in zip(t["valid"], t["anomaly_types"], lost, phantom, t["run_valid"],
                                      t["run_anomaly_types"]):
        found = set(ts if isinstance(ts, list | tuple | np.ndarray) else [])
        v = v if isinstance(v, str) else verdict_text(None)
        # the checkers' verdict is what results.json holds; the audit adds what it could not see
        agrees.append(v == rv and found == set(rts))
        found |= {LOST_WRITE} if lo else set()
        found |= {PHANTOM_WRITE} if ph else set()
        types.append(",".join(sorted(found)))
        valid.append(verdict_text(False) if (lo or ph) else v)
    t["anomaly_types"], t["valid"], t["spark_agrees"] = types, valid, agrees
    t["durability"] = [durability_text(lo, ph, r in audited) for r, lo, ph in zip(t["run"], lost, phantom)]
    t["throughput"] = [throughput(ok, d) for ok, d in zip(t["ok"], t["duration_s"])]
    for c in ("ops", "ok", "fail", "info", "fault_events"):
        t[c] = t[c].fillna(0)
    no_faults = t["fault_events"] == 0
    for c in ("latency_p50_fault_ms", "latency_p99_fault_ms", "availability_fault"):
        t[c] = t[c].astype("float64").where(~no_faults, np.nan)
    t = t[list(COLUMNS)].astype(COLUMNS)
    return pd.DataFrame(t).reset_index(drop=True)
