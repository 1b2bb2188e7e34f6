"""Benchmark: `sleuth check` beside adya on list-append histories, and start-up.

For each simulated database (`sleuth sim --db`) and size (10k, 100k, 1M
transactions; histories cached in bench/out/), both checkers judge the same
file as a user would run them, each in a fresh process: `sleuth check
--workload list-append --json FILE` (strict-serializable, start-up included)
and `adya check FILE --json` (the Rust checker: `cargo install adya
--no-default-features`; found on PATH or in ~/.cargo/bin, and said so when
absent: it is the measuring stick, never a dependency). Printed per row:
wall seconds, CPU seconds (user + system of the child, from getrusage: the
figure that other load on the machine disturbs least), peak memory, the
verdict and the anomaly types, and sleuth's share of adya's time. Each row is
the median of `--repeat` runs (1M rows: `--repeat-large`), the two checkers
taking turns, and the share is the median of each turn's ratio: this
machine's speed drifts by 10-20% between minutes, which a ratio of two
medians taken minutes apart would show as a change. `uptime`'s load is
printed before and after: on a shared machine, compare CPU seconds.

Start-up: `sleuth check` on a 50-transaction history, median of 11 runs,
beside the bare interpreter (`python -c pass`) and adya on the same file.
Also times one `sleuth check` call on 1,000 small histories.

    .venv/bin/python bench/bench_check.py [--sizes 10000,100000,1000000]
        [--dbs serializable,snapshot-isolation,read-committed,stale-reads] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
PY = sys.executable
SLEUTH = os.path.join(os.path.dirname(PY), "sleuth")

# Runs a command in a fresh process and reports its wall time, CPU time and
# peak memory (the wrapper has no other children, so RUSAGE_CHILDREN is the
# command's own) and its stdout.
MEASURE = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "user": ru.ru_utime,
                  "sys": ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024, "exit": p.returncode,
                  "stdout": p.stdout}))
"""


def adya_binary() -> str | None:
    found = shutil.which("adya") or os.path.expanduser("~/.cargo/bin/adya")
    return found if os.path.exists(found) else None


def measure(*cmd: str) -> dict:
    out = subprocess.run([PY, "-c", MEASURE, *cmd], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def verdict(stdout: str, exit_code: int) -> tuple[str, list[str]]:
    """(valid / invalid / unknown, anomaly types) from either checker's JSON."""
    try:
        d = json.loads(stdout)
    except ValueError:
        return f"exit {exit_code}", []
    valid = d.get("valid")
    types = d.get("anomaly-types", d.get("anomaly_types", [])) or []
    word = {True: "valid", False: "invalid"}.get(valid, str(valid))
    return word, sorted(types)


def summary(runs: list[dict]) -> dict:
    out = {k: statistics.median(r[k] for r in runs) for k in ("wall", "cpu", "user", "sys", "rss_mb")}
    out["verdict"], out["types"] = verdict(runs[0]["stdout"], runs[0]["exit"])
    out["runs"] = len(runs)
    return out


def median_run(cmd: list[str], repeat: int) -> dict:
    return summary([measure(*cmd) for _ in range(repeat)])


def paired_runs(a: list[str], b: list[str], repeat: int) -> tuple[dict, dict, float, float]:
    """`a` and `b` run by turns, `repeat` times each: on a machine whose speed drifts (a
    shared virtual machine: 10-20% between minutes here) each pair sees the same weather.
    Returns both summaries and the medians of the per-pair ratios a/b of CPU and of wall."""
    pairs = [(measure(*a), measure(*b)) for _ in range(repeat)]
    cpu = statistics.median(x["cpu"] / y["cpu"] for x, y in pairs)
    wall = statistics.median(x["wall"] / y["wall"] for x, y in pairs)
    return summary([x for x, _ in pairs]), summary([y for _, y in pairs]), cpu, wall


def uptime() -> str:
    with open("/proc/loadavg") as fh:
        return "load average " + " ".join(fh.read().split()[:3])


def history(db: str, n: int, seed: int = 1) -> str:
    from sleuth.workloads.sim_list_append import write_sim

    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"sim-{db}-{n}.jsonl")
    if not os.path.exists(path):
        t = time.perf_counter()
        write_sim(path, db, n, concurrency=10, keys=8, seed=seed)
        print(f"  generated {path} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


def side_by_side(dbs: list[str], sizes: list[int], repeat: int, repeat_large: int) -> None:
    adya = adya_binary()
    print("\nlist-append, strict-serializable: sleuth check beside adya, same file, fresh processes")
    print("(wall and CPU seconds, peak MiB, medians of the runs shown; the two checkers run by turns, "
          "and cpu% and wall% are the medians of each turn's sleuth/adya ratio)")
    if adya is None:
        print("adya is not installed (cargo install adya --no-default-features): sleuth alone")
    print(f"  [{uptime()}]")
    head = f"{'db':<19} {'txns':>9} {'runs':>4} | {'wall':>6} {'cpu':>6} {'MiB':>5} {'verdict':<8}"
    if adya:
        head += f" | {'adya wall':>9} {'cpu':>6} {'MiB':>5} {'verdict':<8} | {'cpu%':>5} {'wall%':>5}"
    print(head)
    for db in dbs:
        for n in sizes:
            path = history(db, n)
            r = repeat if n < 1_000_000 else repeat_large
            mine = [SLEUTH, "check", "--workload", "list-append", "--json", path]
            a = None
            if adya:
                s, a, cpu, wall = paired_runs(mine, [adya, "check", path, "--json"], r)
            else:
                s = median_run(mine, r)
            line = (f"{db:<19} {n:>9} {r:>4} | {s['wall']:>6.2f} {s['cpu']:>6.2f} {s['rss_mb']:>5.0f} "
                    f"{s['verdict']:<8}")
            if a is not None:
                line += (f" | {a['wall']:>9.2f} {a['cpu']:>6.2f} {a['rss_mb']:>5.0f} {a['verdict']:<8} | "
                         f"{100 * cpu:>4.0f}% {100 * wall:>4.0f}%")
            print(line, flush=True)
            if s["types"]:
                print(f"{'':>20} sleuth: {', '.join(s['types'])}")
            if a is not None and a["types"]:
                print(f"{'':>20} adya:   {', '.join(a['types'])}")
    print(f"  [{uptime()}]")


def startup(runs: int = 11) -> None:
    from sleuth.workloads.sim_list_append import write_sim

    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "small-startup.jsonl")
    if not os.path.exists(path):
        write_sim(path, "serializable", 50, concurrency=5, keys=4, seed=1)
    rows = [("python -c pass (floor)", [PY, "-c", "pass"]),
            ("sleuth check, 50 txns", [SLEUTH, "check", "--workload", "list-append", path])]
    adya = adya_binary()
    if adya:
        rows.append(("adya check, 50 txns", [adya, "check", path]))
    print(f"\nstart-up: median of {runs} runs  [{uptime()}]")
    for name, cmd in rows:
        m = median_run(cmd, runs)
        print(f"  {name:<24} wall {m['wall']:.3f} s  cpu {m['cpu']:.3f} s  {m['rss_mb']:.0f} MiB")


def bench_many_small(count: int = 1000) -> None:
    from sleuth.workloads.sim_list_append import write_sim

    d = os.path.join(OUT, "small")
    os.makedirs(d, exist_ok=True)
    paths = []
    for i in range(count):
        p = os.path.join(d, f"h{i:04d}.jsonl")
        if not os.path.exists(p):
            write_sim(p, ["serializable", "read-committed"][i % 2], 50, concurrency=5, keys=4, seed=i)
        paths.append(p)
    t = time.perf_counter()
    proc = subprocess.run([SLEUTH, "check", "--workload", "list-append", "--json", *paths],
                          capture_output=True, text=True)
    dt = time.perf_counter() - t
    lines = proc.stdout.strip().splitlines()
    invalid = sum(1 for line in lines if json.loads(line)["valid"] is not True)
    print(f"\nsleuth check on {count} small list-append histories (50 txns each), one call: "
          f"{dt:.2f} s ({invalid} invalid, exit {proc.returncode})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--dbs", default="serializable,snapshot-isolation,read-committed,stale-reads")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row below 1M transactions")
    ap.add_argument("--repeat-large", type=int, default=1, help="runs per 1M-transaction row")
    ap.add_argument("--small", type=int, default=1000)
    a = ap.parse_args()
    startup()
    side_by_side(a.dbs.split(","), [int(s) for s in a.sizes.split(",")], a.repeat, a.repeat_large)
    if a.small:
        bench_many_small(a.small)


if __name__ == "__main__":
    main()
