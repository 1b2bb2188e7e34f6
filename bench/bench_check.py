"""Benchmark: list-append strict-serializable checking at 10k, 100k, 1M txns.

For each size: generate a `sleuth sim --db serializable` history (cached in
bench/out/), then in a fresh process time (a) merely parsing the file with
Python's json module and (b) the whole `sleuth check` path (load + analyze),
and report seconds, transactions per second, peak memory and the ratio
check / json-parse. Also times one `sleuth check` call on 1,000 small
histories.

If `adya` (the Rust checker: `cargo install adya --no-default-features`) is
on PATH or in ~/.cargo/bin, the same history is checked by `adya check
--json` too, side by side: its seconds, peak memory and verdict. Both search
cycles per strongly connected component with a time limit per component
(adya 1 s by default, sleuth 10 s), so a cut-short search shows as unknown.

`--db read-committed` gives histories full of cycles: the cycle search's
own cost (sleuth's `cycle-seconds` is printed beside the total).

    .venv/bin/python bench/bench_check.py [--sizes 10000,100000,1000000] [--db read-committed]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
PY = sys.executable

PARSE = """
import json, resource, sys, time
t = time.perf_counter()
with open(sys.argv[1], 'rb') as fh:
    n = sum(1 for line in fh if json.loads(line) is not None)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "lines": n,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

CHECK = """
import json, resource, sys, time
t = time.perf_counter()
from sleuth.history import read_jsonl
from sleuth.checker import list_append
t_import = time.perf_counter() - t
t = time.perf_counter()
h = read_jsonl(sys.argv[1], events=False)  # what `sleuth check` does for JSON Lines
t_load = time.perf_counter() - t
r = list_append.check(h, model=sys.argv[2])
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": dt, "load_seconds": t_load, "import_seconds": t_import,
                  "cycle_seconds": r.stats["cycle-seconds"],
                  "user": ru.ru_utime, "sys": ru.ru_stime, "valid": r.valid,
                  "anomalies": r.anomaly_types, "txns": r.stats["txns"],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

ADYA = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run([sys.argv[1], "check", sys.argv[2], "--json"], capture_output=True, text=True)
dt = time.perf_counter() - t
try:
    valid = json.loads(p.stdout)["valid"]
except ValueError:
    valid = f"exit {p.returncode}"
print(json.dumps({"seconds": dt, "valid": valid,
                  "rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def adya_binary() -> str | None:
    found = shutil.which("adya") or os.path.expanduser("~/.cargo/bin/adya")
    return found if os.path.exists(found) else None


def run(code: str, *args: str) -> dict:
    out = subprocess.run([PY, "-c", code, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def history(db: str, n: int, seed: int = 1) -> str:
    from sleuth.workloads.sim_list_append import write_sim

    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, f"sim-{db}-{n}.jsonl")
    if not os.path.exists(path):
        t = time.perf_counter()
        write_sim(path, db, n, concurrency=10, keys=8, seed=seed)
        print(f"  generated {path} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


def bench_sizes(sizes: list[int], db: str) -> None:
    print(f"\nlist-append, strict-serializable, sim --db {db}")
    print("(json s: a bare json.loads pass over the lines; check s: load + analysis, after the\n"
          " one-time imports (numpy, scipy), which are shown apart, as json's own import is)")
    adya = adya_binary()
    print(f"{'txns':>9} {'MB':>7} {'json s':>8} {'check s':>8} {'load s':>7} {'cycle s':>7} {'import s':>8} "
          f"{'txn/s':>9} {'peak MiB':>9} {'user s':>7} {'sys s':>6} {'check/json':>10}"
          + (f" {'adya s':>7} {'adya MiB':>8} {'adya':>7}" if adya else "") + "  verdict")
    for n in sizes:
        path = history(db, n)
        mb = os.path.getsize(path) / 1e6
        p = run(PARSE, path)
        c = run(CHECK, path, "strict-serializable")
        verdict = "valid" if c["valid"] is True else f"{c['valid']} {','.join(c['anomalies'])}"
        side = ""
        if adya:
            a = run(ADYA, adya, path)
            side = f" {a['seconds']:>7.2f} {a['rss_mb']:>8.0f} {str(a['valid']):>7}"
        print(f"{n:>9} {mb:>7.1f} {p['seconds']:>8.2f} {c['seconds']:>8.2f} "
              f"{c['load_seconds']:>7.2f} {c['cycle_seconds']:>7.2f} {c['import_seconds']:>8.2f} "
              f"{n / c['seconds']:>9.0f} {c['rss_mb']:>9.0f} "
              f"{c['user']:>7.2f} {c['sys']:>6.2f} {c['seconds'] / p['seconds']:>10.2f}{side}  "
              f"{verdict}", flush=True)


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
    proc = subprocess.run([os.path.join(os.path.dirname(PY), "sleuth"), "check", "--workload",
                           "list-append", "--json", *paths], capture_output=True, text=True)
    dt = time.perf_counter() - t
    lines = proc.stdout.strip().splitlines()
    invalid = sum(1 for line in lines if json.loads(line)["valid"] is not True)
    print(f"\nsleuth check on {count} small list-append histories (50 txns each), one call: "
          f"{dt:.2f} s ({invalid} invalid, exit {proc.returncode})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--db", default="serializable")
    ap.add_argument("--small", type=int, default=1000)
    a = ap.parse_args()
    bench_sizes([int(s) for s in a.sizes.split(",")], a.db)
    if a.small:
        bench_many_small(a.small)


if __name__ == "__main__":
    main()
