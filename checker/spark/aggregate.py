"""Job 4, aggregate: the campaign table, one row per run (the campaign page reads these columns).

Counts, latencies and availability come from the consolidated operations in
Spark; the run's configuration from its test.json, its own verdict from its
results.json; the Spark verdict from the judge and durability jobs.

- `duration_s`: from the run's first to its last history event (what the
  clients measured; cluster start and judging are not in it);
- `throughput`: ok operations per second of that;
- latencies: ok operations, invoke to completion, in milliseconds; the
  `_fault` ones only over operations invoked while a fault was active;
- `availability_fault`: of the operations invoked during a fault, the share
  that were ok (NaN when the run injected no fault).
"""

from __future__ import annotations

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


def op_stats(ops, events):
    """Per run: ops, ok, fail, info, duration_s, latencies, availability_fault, fault_events."""
    from pyspark.sql import functions as F

    from sleuth.checker.spark.consolidate import fault_events

    ok = F.col("outcome") == "ok"
    lat = F.when(ok, (F.col("complete_time") - F.col("invoke_time")) / 1e6)
    lat_fault = F.when(ok & F.col("fault_active"), (F.col("complete_time") - F.col("invoke_time")) / 1e6)
    per_run = ops.groupBy("run").agg(
        F.count("*").alias("ops"), F.sum(ok.cast("long")).alias("ok"),
        F.sum((F.col("outcome") == "fail").cast("long")).alias("fail"),
        F.sum((F.col("outcome") == "info").cast("long")).alias("info"),
        F.percentile(lat, F.lit(0.5)).alias("latency_p50_ms"),
        F.percentile(lat, F.lit(0.99)).alias("latency_p99_ms"),
        F.percentile(lat_fault, F.lit(0.5)).alias("latency_p50_fault_ms"),
        F.percentile(lat_fault, F.lit(0.99)).alias("latency_p99_fault_ms"),
        F.try_divide(F.sum((ok & F.col("fault_active")).cast("long")),
                     F.sum(F.col("fault_active").cast("long"))).alias("availability_fault"))
    span = events.groupBy("run").agg(((F.max("time") - F.min("time")) / 1e9).alias("duration_s"))
    return per_run.join(span, "run").join(fault_events(events), "run")


def durability_text(lost: int, phantom: int, audited: bool) -> str:
    if not audited:
        return "n/a"
    return "lost" if lost else "phantom" if phantom else "ok"


def campaign_table(meta, stats, verdicts, anomalies, audited: set[str]):
    """The table (pandas) from per-run pandas frames.

    meta: run, campaign, run_dir, workload, target, nemesis, fault, isolation, model, seed, run_valid,
    run_anomaly_types (list);
    stats: op_stats; verdicts: run, valid, anomaly_types (list); anomalies: run, anomaly (per write).
    """
    import numpy as np
    import pandas as pd

    from sleuth.checker.spark.judge import verdict_text

    t = meta.merge(stats, on="run", how="left").merge(verdicts, on="run", how="left")
    counts = anomalies.groupby(["run", "anomaly"]).size().unstack(fill_value=0) if len(anomalies) else None
    lost = [int(counts.at[r, "lost-write"]) if counts is not None and "lost-write" in counts and r in counts.index
            else 0 for r in t["run"]]
    phantom = [int(counts.at[r, "phantom-write"]) if counts is not None and "phantom-write" in counts
               and r in counts.index else 0 for r in t["run"]]
    t["lost_writes"], t["phantom_writes"] = lost, phantom
    types, valid, agrees = [], [], []
    for v, ts, lo, ph, rv, rts in zip(t["valid"], t["anomaly_types"], lost, phantom, t["run_valid"],
                                      t["run_anomaly_types"]):
        found = set(ts if isinstance(ts, list | tuple | np.ndarray) else [])
        v = v if isinstance(v, str) else "unknown"
        # the checkers' verdict is what results.json holds; the audit adds what it could not see
        agrees.append(v == rv and found == set(rts))
        found |= {"lost-write"} if lo else set()
        found |= {"phantom-write"} if ph else set()
        types.append(",".join(sorted(found)))
        valid.append(verdict_text(False) if (lo or ph) else v)
    t["anomaly_types"], t["valid"], t["spark_agrees"] = types, valid, agrees
    t["durability"] = [durability_text(lo, ph, r in audited) for r, lo, ph in zip(t["run"], lost, phantom)]
    t["throughput"] = t["ok"] / t["duration_s"].where(t["duration_s"] > 0)
    for c in ("ops", "ok", "fail", "info", "fault_events"):
        t[c] = t[c].fillna(0)
    no_faults = t["fault_events"] == 0
    for c in ("latency_p50_fault_ms", "latency_p99_fault_ms", "availability_fault"):
        t[c] = t[c].astype("float64").where(~no_faults, np.nan)
    t = t[list(COLUMNS)].astype(COLUMNS)
    return pd.DataFrame(t).reset_index(drop=True)
