"""Benchmark: `sleuth check --follow` (online) beside offline `sleuth check`, same files.

Histories: simulated list-append of a serializable database (`sleuth sim --db
serializable`: strict serializable, so valid) at each size, and a simulated
register history (the `register` workload), each closed by the end marker
(`{"type": "info", "process": "nemesis", "f": "end"}`), cached in bench/out/.
Each is judged in a fresh process, offline (`sleuth check -w W --json FILE`)
and online (`sleuth check -w W --follow FILE --json`: the file is read as if
being written, each event judged as it arrives, then the final pass, which is
the offline check itself). Printed per row: the online phase alone (wall and
CPU seconds, from the run's own "online" record, and transactions or
operations per CPU second: the figure other load on this shared machine
disturbs least, and the peak memory by then), the whole --follow run (wall,
CPU, peak memory: the final pass's, once the history ends), and the
offline check (wall, CPU, peak memory), with both verdicts.

    .venv/bin/python bench/bench_online.py [--sizes 100000,1000000] [--register-ops 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_check import OUT, measure, uptime  # noqa: E402 - the one way to measure a run

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")


def with_end(path: str) -> str:
    """Append the end marker to a history just written."""
    import orjson

    n = 0
    last = 0
    with open(path, "rb") as fh:
        for line in fh:
            n += 1
            last = orjson.loads(line)["time"]
    with open(path, "ab") as fh:
        fh.write(orjson.dumps({"index": n, "time": last, "type": "info", "process": "nemesis", "f": "end"})
                 + b"\n")
    return path


def list_append_history(n: int) -> str:
    from sleuth.workloads.sim_list_append import write_sim

    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"online-sim-serializable-{n}.jsonl")
    if not os.path.exists(path):
        t = time.perf_counter()
        write_sim(path, "serializable", n, concurrency=10, keys=8, seed=1)
        with_end(path)
        print(f"  generated {path} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


def register_history(n: int) -> str:
    from sleuth.workloads.sim_register import write_sim

    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"online-sim-register-{n}.jsonl")
    if not os.path.exists(path):
        t = time.perf_counter()
        write_sim(path, ops=n, processes=10, keys=max(1, n // 1000), seed=1)
        with_end(path)
        print(f"  generated {path} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


def row(workload: str, path: str, n: int, unit: str) -> None:
    offline = measure(SLEUTH, "check", "-w", workload, "--json", path)
    online = measure(SLEUTH, "check", "-w", workload, "--follow", path, "--json")
    record = json.loads(online["stdout"].splitlines()[-1])
    phase = record.get("online", {})
    cpu = phase.get("cpu-seconds") or float("nan")
    verdicts = (json.loads(offline["stdout"])["valid"], record["valid"])
    print(f"{workload:12} {n:>9,} {unit:4} | online phase {phase.get('seconds', 0):7.2f} s wall "
          f"{cpu:7.2f} s CPU = {n / cpu:>9,.0f} {unit}/s CPU, {n / phase.get('seconds', 1):>9,.0f} {unit}/s wall, "
          f"peak {phase.get('max-rss-mib', 0):5} MiB"
          f" | --follow in all {online['wall']:7.2f} s wall {online['cpu']:7.2f} s CPU "
          f"{online['rss_mb']:7.0f} MB | offline {offline['wall']:7.2f} s wall {offline['cpu']:7.2f} s CPU "
          f"{offline['rss_mb']:7.0f} MB = {n / offline['cpu']:>9,.0f} {unit}/s CPU | valid {verdicts}",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--register-ops", type=int, default=200_000)
    args = ap.parse_args()
    print(uptime())
    for n in map(int, args.sizes.split(",")):
        row("list-append", list_append_history(n), n, "txns")
    if args.register_ops:
        row("register", register_history(args.register_ops), args.register_ops, "ops")
    print(uptime())


if __name__ == "__main__":
    main()
