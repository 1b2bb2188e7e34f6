"""Benchmark: `sleuth check --follow` (online) beside offline `sleuth check`, and the goals of issue 47.

Histories (generated once, cached in `--cache`, /tmp/sleuth-bench-online by default:
the 10M file is 3.2 GB and takes some 450 CPU seconds to write, and bench/out/ is in
the worktree), each closed by the end marker (docs/history-format.md: an ordinary
event, with its `index`):

- list-append of a serializable database (`sleuth sim --db serializable`: strict
  serializable, so valid) at each of `--sizes` (1M and 10M transactions);
- a register history (the `register` workload, `--register-ops` operations).

Each is judged in a fresh process, once (the register history, which takes seconds, five
times, and its row is the median run; the machine is shared: CPU seconds,
from getrusage, are the figures other load disturbs least; wall seconds are
printed beside them). Online: `sleuth check -w W --follow FILE --json`, the
file read as if being written, each event judged as it arrives; when it ends,
the *final pass* is `none` when the engine certified its verdict (valid, no
anomaly of any type: checker/online/list_append.py, "Certified verdicts") and
`offline` when the offline checker judged the whole file again. Printed per
row: the online phase (CPU and wall seconds, transactions or operations per
CPU second, its peak memory, from the run's own "online" record), the final
pass (and, when offline, the engine's gaps that asked for it; a final pass
that grows past `--final-pass-cap-mib`, 4 GiB, is stopped with Ctrl-C, which
leaves the online phase's record whole), the whole run's peak memory, and
the offline check beside it (CPU,
wall, peak memory, verdict). Offline is run at the sizes up to
`--offline-max` (1M by default): offline holds the whole history (1.6 GB at
1M), so at 10M it would need some 16 GiB of a machine whose 24 GiB are shared
with other work; `--offline-max 10000000` asks for it.

Latency: a read skew spliced into a serializable sim of `--latency-txns`
transactions (its second transaction also reads stale: it began after the
first was acknowledged and misses its append), streamed through a pipe into
`--follow -` at `--latency-rate` lines a second; the figure is the time from
writing the stale read's completing line to the anomaly's line on stdout.
Whether the read skew itself is reported online is printed too.

Last, the goals (issue 47): at least 20,000 list-append transactions a CPU
second at the largest size, registers at least 100,000 operations a CPU
second, peak memory at the largest size at most 1.5 times that at 1M and
under 1 GiB, an anomaly reported within 2 s of its line; each said met or not.

    .venv/bin/python bench/bench_online.py [--sizes 1000000,10000000] [--register-ops 200000] [--register-runs 5]
        [--offline-max 1000000] [--latency-txns 50000] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_check import measure, uptime  # noqa: E402 - the one way to measure a run

SLEUTH = os.path.join(os.path.dirname(sys.executable), "sleuth")
CACHE = "/tmp/sleuth-bench-online"
GOAL_TXNS, GOAL_OPS, GOAL_GROWTH, GOAL_MIB, GOAL_LATENCY = 20_000, 100_000, 1.5, 1024, 2.0


def end_marker(index: int, time_: int) -> bytes:
    import orjson

    return orjson.dumps({"index": index, "time": time_, "type": "info", "process": "nemesis", "f": "end"}) + b"\n"


def with_end(path: str) -> None:
    """Append the end marker to a history just written (its index is the number of lines)."""
    import orjson

    n, last = 0, b""
    with open(path, "rb") as fh:
        for last in fh:
            n += 1
    with open(path, "ab") as fh:
        fh.write(end_marker(n, orjson.loads(last)["time"] if n else 0))


def cached(cache: str, name: str, write) -> str:
    """The history `name` in `cache`, written by `write(path)` if absent (whole or not at all)."""
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, name)
    if not os.path.exists(path):
        # Written by a child, so this process stays small: a child's peak memory as the kernel
        # reports it to `wait4` (ru_maxrss) includes its parent's size when it was started.
        import multiprocessing

        t = time.perf_counter()
        part = path + ".part"
        child = multiprocessing.get_context("fork").Process(target=write, args=(part,))
        child.start()
        child.join()
        if child.exitcode:
            sys.exit(f"bench_online: writing {path} failed (exit {child.exitcode})")
        with_end(part)
        os.replace(part, path)
        print(f"  generated {path} in {time.perf_counter() - t:.0f} s", flush=True)
    return path


def list_append_history(cache: str, n: int) -> str:
    from sleuth.workloads.sim_list_append import write_sim

    return cached(cache, f"online-sim-serializable-{n}.jsonl",
                  lambda p: write_sim(p, "serializable", n, concurrency=10, keys=8, seed=1))


def register_history(cache: str, n: int) -> str:
    from sleuth.workloads.sim_register import write_sim

    return cached(cache, f"online-sim-register-{n}.jsonl",
                  lambda p: write_sim(p, ops=n, processes=10, keys=max(1, n // 1000), seed=1))


def follow(path: str, workload: str, cap_mib: int) -> dict:
    """`sleuth check -w W --follow PATH --json` in a fresh process, as `measure` reports a run
    (wall, CPU, peak memory, exit, stdout), stopped with Ctrl-C if it grows past `cap_mib`:
    the online phase stays far below it, so only an offline final pass of a long history
    (some 1.6 GiB a million transactions) reaches it. The record then says the final pass
    was interrupted and still carries the online phase's figures."""
    proc = subprocess.Popen([SLEUTH, "check", "-w", workload, "--follow", path, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
    reader.start()
    t, stopped = time.perf_counter(), None
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if stopped is None and rss_mib(proc.pid) > cap_mib:
            stopped = cap_mib
            proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(60)
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024,
            "exit": proc.returncode, "stdout": "".join(out), "stopped": stopped}


def rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def row(workload: str, path: str, n: int, unit: str, offline: bool, cap_mib: int, runs: int = 1) -> dict:
    """Judge `path` online (and offline, if asked); print the row; return the figures. With
    `runs` > 1 the online check runs that many times and the row is the run of median online
    CPU (each run's figure printed beside it): one run's CPU seconds move by 10-20% here."""
    tries = []
    for _ in range(runs):
        online = follow(path, workload, cap_mib)
        record = json.loads(online["stdout"].splitlines()[-1])
        tries.append((record.get("online", {}).get("cpu-seconds") or float("nan"), online, record))
    tries.sort(key=lambda t: t[0])
    _, online, record = tries[len(tries) // 2]
    phase = record.get("online", {})
    cpu = phase.get("cpu-seconds") or float("nan")
    wall = phase.get("seconds") or float("nan")
    out = {"n": n, "rate": n / cpu, "peak": phase.get("max-rss-mib", 0), "final": phase.get("final-pass"),
           "valid": record.get("valid")}
    line = (f"{workload:11} {n:>10,} {unit:4} | online {cpu:7.1f} s CPU = {n / cpu:>7,.0f} {unit}/s "
            f"({wall:7.1f} s wall), peak {out['peak']:5} MiB | final pass {out['final']:7} | "
            f"whole --follow {online['cpu']:7.1f} s CPU {online['rss_mb']:6.0f} MiB, valid {out['valid']}")
    if runs > 1:
        line += f" (median of {runs} runs: " + ", ".join(f"{n / t[0]:,.0f}" for t in tries) + f" {unit}/s)"
    if online["stopped"]:
        line += f" (final pass stopped at {online['stopped']} MiB: --final-pass-cap-mib)"
    if phase.get("final-pass-because"):
        line += f", final pass because of: {', '.join(phase['final-pass-because'])}"
    if offline:
        off = measure(SLEUTH, "check", "-w", workload, "--json", path)
        valid = json.loads(off["stdout"]).get("valid") if off["stdout"].strip() else f"exit {off['exit']}"
        line += (f" | offline {off['cpu']:7.1f} s CPU = {n / off['cpu']:>7,.0f} {unit}/s "
                 f"({off['wall']:7.1f} s wall), peak {off['rss_mb']:6.0f} MiB, valid {valid}")
    else:
        line += " | offline not run (--offline-max)"
    print(line, flush=True)
    return out


def read_skew(t: int, key: int, process: int) -> list[dict]:
    """Adya's read skew on fresh keys x, y: T1 appends to both; T2 (after T1) sees T1's x but
    not its y (also a stale read: G-single-realtime at T2's completion); T3 reads y with it
    (G-single at its completion, the last of these six events)."""
    x, y = key, key + 1
    ops = [(process, [["append", x, 1], ["append", y, 1]], [["append", x, 1], ["append", y, 1]]),
           (process + 1, [["r", x, None], ["r", y, None]], [["r", x, [1]], ["r", y, []]]),
           (process + 2, [["r", y, None]], [["r", y, [1]]])]
    out = []
    for p, invoke, ok in ops:
        out.append({"time": t, "type": "invoke", "process": p, "f": "txn", "value": invoke})
        out.append({"time": t, "type": "ok", "process": p, "f": "txn", "value": ok})
    return out


def latency(txns: int, rate: float) -> float | None:
    """The worst delay between writing the line that completes a planted anomaly and its report."""
    import tempfile

    import orjson

    from sleuth.workloads.sim_list_append import write_sim

    with tempfile.TemporaryDirectory(prefix="sleuth-bench-latency-") as d:
        path = os.path.join(d, "sim.jsonl")
        write_sim(path, "serializable", txns, seed=47)
        with open(path, "rb") as fh:
            events = [orjson.loads(x) for x in fh]
    at = len(events) // 2
    events = events[:at] + read_skew(events[at - 1]["time"], 10**9, 10**6) + events[at:]
    lines = [orjson.dumps({**e, "index": i}) + b"\n" for i, e in enumerate(events)]
    lines.append(end_marker(len(lines), events[-1]["time"]))
    # line numbers (1-based) of T2's completion (the stale read: the planted anomaly the goal
    # is measured on) and T3's (the read skew, reported online when no gap hides it)
    completing: dict[int, float | None] = {at + 4: None, at + 6: None}
    proc = subprocess.Popen([SLEUTH, "check", "-w", "list-append", "--follow", "-", "--json"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    seen: dict[int, float] = {}

    def read() -> None:
        for raw in proc.stdout:
            d = json.loads(raw)
            if d.get("event") == "anomaly":
                seen.setdefault(d["line"], time.monotonic())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    chunk = 100
    try:
        t0 = time.monotonic()
        for i in range(0, len(lines), chunk):
            wait = t0 + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            proc.stdin.write(b"".join(lines[i:i + chunk]))
            proc.stdin.flush()
            for ln in completing:
                if i < ln <= i + chunk:
                    completing[ln] = time.monotonic()
        proc.stdin.close()
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    stale = at + 4
    print(f"latency     a read skew spliced at line {at + 1:,} of {len(lines):,}, written at {rate:,.0f} lines/s: "
          + "; ".join(f"{what} (line {ln}) " + (f"reported after {seen[ln] - completing[ln]:.3f} s"
                                                 if ln in seen else "not reported online")
                      for ln, what in ((stale, "stale read"), (at + 6, "read skew")))
          + f"; exit {proc.returncode}", flush=True)
    t = completing[stale]
    return seen[stale] - t if stale in seen and t is not None else None


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--register-ops", type=int, default=200_000)
    ap.add_argument("--register-runs", type=int, default=5,
                    help="online runs of the register history; its row is the median (a run takes seconds)")
    ap.add_argument("--offline-max", type=int, default=1_000_000,
                    help="run offline sleuth check only up to this size (10M needs ~16 GiB)")
    ap.add_argument("--latency-txns", type=int, default=50_000)
    ap.add_argument("--latency-rate", type=float, default=10_000.0, help="lines a second")
    ap.add_argument("--final-pass-cap-mib", type=int, default=4096,
                    help="stop a --follow whose (offline) final pass grows past this (Ctrl-C)")
    ap.add_argument("--cache", default=CACHE)
    args = ap.parse_args()
    print(uptime(), flush=True)
    rows = []
    for n in (int(s) for s in args.sizes.split(",") if s.strip()):  # --sizes "": registers alone
        rows.append(row("list-append", list_append_history(args.cache, n), n, "txns", n <= args.offline_max,
                        args.final_pass_cap_mib))
    reg = None
    if args.register_ops:
        reg = row("register", register_history(args.cache, args.register_ops), args.register_ops, "ops",
                  args.register_ops <= args.offline_max, args.final_pass_cap_mib, args.register_runs)
    worst = latency(args.latency_txns, args.latency_rate) if args.latency_txns else None
    print(uptime(), flush=True)
    print("goals (issue 47):")
    if rows:
        big = rows[-1]
        print(f"  list-append >= {GOAL_TXNS:,} txns/CPU s at {big['n']:,}: {big['rate']:,.0f}: "
              f"{verdict(big['rate'] >= GOAL_TXNS)}")
        base = next((r for r in rows if r["n"] == 1_000_000), None)
        if base is not None and big is not base:
            growth = big["peak"] / base["peak"]
            print(f"  peak at {big['n']:,} <= {GOAL_GROWTH}x that at 1,000,000: {big['peak']} / {base['peak']} MiB "
                  f"= {growth:.2f}x: {verdict(growth <= GOAL_GROWTH)}")
        print(f"  peak at {big['n']:,} < 1 GiB: {big['peak']} MiB: {verdict(big['peak'] < GOAL_MIB)}")
        print("  final pass: " + ", ".join(f"{r['n']:,}: {r['final']}" for r in rows))
    if reg is not None:
        print(f"  register >= {GOAL_OPS:,} ops/CPU s: {reg['rate']:,.0f}: {verdict(reg['rate'] >= GOAL_OPS)}")
    if args.latency_txns:
        shown = "not reported" if worst is None else f"{worst:.3f} s"
        print(f"  anomaly reported within {GOAL_LATENCY} s of its line: {shown}: "
              f"{verdict(worst is not None and worst <= GOAL_LATENCY)}")


if __name__ == "__main__":
    main()
