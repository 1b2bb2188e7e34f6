"""`sleuth run`: start a target, drive it with clients while faults come and go, judge, report.

The steps (DESIGN.md, "Data flow of one run"):

1. the target comes up and the workload creates its tables;
2. `concurrency` client threads, each one psycopg connection (one logical
   process), run operations at the requested rate and record invoke and
   completion in `history.jsonl` with a monotonic clock; a nemesis thread
   injects and heals faults on a seeded schedule;
3. at the time limit clients stop, everything is healed, the target gets
   time to recover, and every key is read once more;
4. the checker judges the history (plus the grey-box timestamp rules where
   the target reports timestamps), `results.json` and the report are
   written, and a one-screen summary ends the run.

Outcomes, as Jepsen records them: an error the database guarantees had no
effect (serialization failure, a fenced coordinator, a cas that did not
match, any failed read, a connection that could not be opened, so nothing
was sent) is `fail`; a timeout or a lost connection on a
write is `info`, and that client continues as a fresh process on a new
connection. A watchdog cuts the socket of an operation that hangs (a paused
node), so no client waits forever.
"""

from __future__ import annotations

import os
import random
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from sleuth.jsonfile import write_json
from sleuth.workloads.clients import WORKLOADS, Failed

OP_TIMEOUT = 5.0  # seconds before the watchdog gives up on an operation
ISOLATION_MODELS = {
    "strict-serializable": "strict-serializable", "serializable": "serializable",
    "strong-session-serializable": "strong-session-serializable",
    "read-committed": "read-committed", "repeatable-read": "snapshot-isolation",
}


@dataclass
class RunConfig:
    target: str = "reference"
    runtime: str | None = None
    nodes_file: str | None = None  # --runtime ssh: the hosts
    workload: str = "register"
    nemesis: str | None = None
    faults: tuple[str, ...] = ()
    isolation: str | None = None
    time_limit: float = 30.0
    concurrency: int = 10
    rate: float = 200.0
    keys: int = 8
    seed: int = 0
    store: str = "store"
    nemesis_interval: float = 5.0
    recover: float = 3.0
    name: str | None = None
    progress: bool = True
    extra: dict = field(default_factory=dict)


class Recorder:
    """history.jsonl, appended in index order, with times from one monotonic clock."""

    def __init__(self, path: str):
        self.f = open(path, "wb")
        self.lock = threading.Lock()
        self.index = 0
        self.t0 = time.monotonic_ns()
        self.counts = {"ok": 0, "fail": 0, "info": 0}

    def event(self, typ: str, process: Any, f: str, value: Any, **extra: Any) -> None:
        with self.lock:
            e = {"index": self.index, "time": time.monotonic_ns() - self.t0, "type": typ,
                 "process": process, "f": f, "value": value}
            e.update({k: v for k, v in extra.items() if v is not None})
            self.f.write(orjson.dumps(e) + b"\n")
            self.index += 1
            if typ in self.counts and process != "nemesis":
                self.counts[typ] += 1

    def close(self) -> None:
        with self.lock:
            self.f.close()


class Client:
    """One worker thread's connection and logical process."""

    def __init__(self, slot: int, cfg: RunConfig, target: Any, workload: Any, rec: Recorder):
        self.slot, self.cfg, self.target, self.wl, self.rec = slot, cfg, target, workload, rec
        self.process = slot
        self.conn = None
        self.node = None
        self.generation = -1
        self.rnd = random.Random(f"{cfg.seed}-{slot}")
        self.conn_rnd = random.Random(f"{cfg.seed}-{slot}-conn")
        self.pace = random.Random(f"{cfg.seed}-{slot}-pace")
        self.deadline = 0.0

    def connect(self) -> None:
        self.close()
        choices = self.target.dsns()
        self.generation = self.target.generation
        self.node, dsn = choices[self.conn_rnd.randrange(len(choices))] if len(choices) > 1 else choices[0]
        self.conn = self.target.connect(dsn, OP_TIMEOUT)  # the target owns its driver
        self.deadline = time.monotonic() + OP_TIMEOUT  # a paused server hangs the session setup
        try:
            for stmt in self.target.session_sql(self.cfg.isolation):
                self.conn.execute(stmt)
        finally:
            self.deadline = 0.0

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None

    def cut(self) -> None:
        """Watchdog: shut the socket of a hung operation so the client sees an error."""
        conn = self.conn
        if conn is None:
            return
        try:
            s = socket.socket(fileno=os.dup(self.target.socket_of(conn)))
            s.shutdown(socket.SHUT_RDWR)
            s.close()
        except Exception:
            pass

    def timestamp(self) -> int | None:
        if not self.target.grey_box:
            return None
        try:
            return int(self.conn.execute("SHOW last_timestamp").fetchone()[0])
        except Exception:
            return None

    def run_op(self, f: str, value: Any) -> None:
        writes = _writes(f, value)
        self.rec.event("invoke", self.process, f, value, node=self.node)
        if self.conn is None or self.generation != self.target.generation:
            try:
                self.connect()
            except Exception as e:  # no statement of this operation was sent: it did not happen
                self.close()
                msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                self.rec.event("fail", self.process, f, value, node=self.node, error=f"not connected: {msg}")
                return
        try:
            self.deadline = time.monotonic() + OP_TIMEOUT
            out = self.wl.perform(self.conn, f, value)
            ts = self.timestamp()
            self.deadline = 0.0
            self.rec.event("ok", self.process, f, out, node=self.node, ts=ts)
        except Failed as e:
            self.deadline = 0.0
            self.rec.event("fail", self.process, f, value, node=self.node, error=str(e))
        except Exception as e:
            self.deadline = 0.0
            # The target knows its driver's errors: a definite failure, or maybe-happened (info).
            outcome, msg, reconnect = (self.target.classify(e, writes)
                                       or ("info", f"{type(e).__name__}: {e}", True))
            self.rec.event(outcome, self.process, f, value, node=self.node, error=msg)
            if reconnect:
                self.close()
            if outcome == "info":
                self.process += self.cfg.concurrency  # a fresh process, as in Jepsen


def _writes(f: str, value: Any) -> bool:
    if f == "txn":
        return any(m[0] != "r" for m in value)
    return f not in ("read",)


def _worker(client: Client, stop: threading.Event, interval: float, end: float) -> None:
    # Jepsen's stagger: each gap uniform in [0, 2 * interval], so clients meet at random
    # moments (a fixed cadence locks their phases: some seeds would never contend).
    nxt = time.monotonic() + client.pace.random() * interval
    while not stop.is_set():
        now = time.monotonic()
        if now >= end:
            break
        if nxt > now:
            if stop.wait(nxt - now):
                break
        nxt = max(nxt + client.pace.uniform(0, 2 * interval), time.monotonic() - interval)
        f, value = client.wl.generate(client.rnd, client.slot)
        client.run_op(f, value)
    client.close()


def _watchdog(clients: list[Client], stop: threading.Event) -> None:
    while not stop.wait(0.25):
        now = time.monotonic()
        for c in clients:
            if c.deadline and now > c.deadline:
                c.deadline = 0.0
                c.cut()


def new_run_dir(store: str, name: str) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    d = os.path.join(store, name, stamp)
    k = 1
    while os.path.exists(d):
        k += 1
        d = os.path.join(store, name, f"{stamp}-{k}")
    os.makedirs(os.path.join(d, "nodes"))
    latest = os.path.join(store, "latest")
    try:
        if os.path.islink(latest):
            os.remove(latest)
        os.symlink(os.path.relpath(d, store), latest)
    except OSError:
        pass
    return d


def execute(cfg: RunConfig, say=print) -> dict:
    """One whole run. Returns the summary dict (valid, anomaly-types, run_dir, counts)."""
    from sleuth.nemesis.faults import Schedule, parse_mix
    from sleuth.targets import make_target

    target = make_target(cfg.target, cfg.runtime, cfg.faults, cfg.nodes_file)
    cfg.isolation = cfg.isolation or target.isolations[0] if target.isolations else cfg.isolation
    if target.isolations and cfg.isolation not in target.isolations:
        from sleuth.targets import Unsupported
        raise Unsupported(f"--isolation {cfg.isolation!r}: {target.name} offers {', '.join(target.isolations)}")
    kinds = parse_mix(cfg.nemesis, target)
    workload = WORKLOADS[cfg.workload](cfg.keys, target.family)
    name = cfg.name or "-".join([cfg.workload, cfg.target if "://" not in cfg.target else "url",
                                 *(cfg.faults or ()), *(kinds or ["no-nemesis"])])
    run_dir = new_run_dir(cfg.store, name)
    test = {"name": name, "workload": cfg.workload, "target": cfg.target, "runtime": getattr(target, "runtime_name", None),
            "nemesis": kinds, "fault": list(cfg.faults), "isolation": cfg.isolation,
            "model": target.models.get(cfg.isolation, ISOLATION_MODELS.get(cfg.isolation)), "time_limit": cfg.time_limit,
            "concurrency": cfg.concurrency, "rate": cfg.rate, "keys": cfg.keys, "seed": cfg.seed,
            "nemesis_interval": cfg.nemesis_interval, "started": time.time()}
    write_json(os.path.join(run_dir, "test.json"), test)
    say(f"sleuth run: {cfg.workload} on {cfg.target}"
        + (f" ({test['runtime']})" if test["runtime"] else "")
        + (f", faults {','.join(cfg.faults)}" if cfg.faults else "")
        + (f", nemesis {','.join(kinds)}" if kinds else "") + f" → {run_dir}")
    rec = Recorder(os.path.join(run_dir, "history.jsonl"))
    crashed = None
    try:
        target.up(progress=lambda m: say(m))
        with target.connect(target.dsns()[-1][1], OP_TIMEOUT) as conn:
            workload.setup(conn)
        clients = [Client(i, cfg, target, workload, rec) for i in range(cfg.concurrency)]
        stop = threading.Event()
        schedule = Schedule(target, kinds, cfg.nemesis_interval, cfg.seed,
                            lambda f, v: rec.event("info", "nemesis", f, v)) if kinds else None
        interval = cfg.concurrency / cfg.rate if cfg.rate > 0 else 0.0
        end = time.monotonic() + cfg.time_limit
        threads = [threading.Thread(target=_worker, args=(c, stop, interval, end), daemon=True)
                   for c in clients]
        dog_stop = threading.Event()
        final = Client(cfg.concurrency * 1000, cfg, target, workload, rec)
        dog = threading.Thread(target=_watchdog, args=(clients + [final], dog_stop), daemon=True)
        dog.start()
        for t in threads:
            t.start()
        if schedule:
            schedule.start()
        _progress(cfg, rec, end, say)
        stop.set()
        for t in threads:
            t.join(OP_TIMEOUT * 3)
        if schedule:
            schedule.finish()
            test["nemesis_errors"] = schedule.errors
        time.sleep(cfg.recover)
        try:
            target.wait_healthy(60)
        except Exception as e:
            test["recovery_error"] = str(e)
        for f, value in workload.final_reads():
            for attempt in range(5):  # a final read that fails is retried; it changes nothing
                before = rec.counts["ok"]
                final.run_op(f, value)
                if rec.counts["ok"] > before:
                    break
                time.sleep(1)
        final.close()
        dog_stop.set()
    except Exception as e:
        crashed = f"{type(e).__name__}: {e}"
    finally:
        rec.close()
        try:
            target.collect_logs(os.path.join(run_dir, "nodes"))
        except Exception:
            pass
        try:
            target.down()
        except Exception as e:
            crashed = crashed or f"teardown: {e}"
    test["finished"] = time.time()
    summary = judge(run_dir, cfg, test, workload, target, crashed)
    return summary


def _progress(cfg: RunConfig, rec: Recorder, end: float, say) -> None:
    bar = None
    if cfg.progress:
        from tqdm import tqdm
        bar = tqdm(total=int(cfg.time_limit), unit="s", file=sys.stderr, leave=False,
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt}s {postfix}")
    last = time.monotonic()
    start = end - cfg.time_limit
    while (now := time.monotonic()) < end:
        time.sleep(min(0.5, end - now))
        if bar is not None:
            bar.n = int(min(cfg.time_limit, time.monotonic() - start))
            c = rec.counts
            bar.set_postfix_str(f"ok {c['ok']} fail {c['fail']} info {c['info']}")
            bar.refresh()
        last = now
    del last
    if bar is not None:
        bar.close()


def judge(run_dir: str, cfg: RunConfig, test: dict, workload: Any, target: Any, crashed: str | None) -> dict:
    from sleuth.checker import checker_for
    from sleuth.checker.result import merge_valid
    from sleuth.history import HistoryError, read_jsonl

    results: dict[str, Any]
    try:
        history = read_jsonl(os.path.join(run_dir, "history.jsonl"))
        model = test.get("model") if workload.checker in ("list-append", "rw-register") else None
        kwargs: dict[str, Any] = {"model": model} if model else {}
        if workload.checker == "bank":
            kwargs["total"] = workload.total()
        if workload.checker in ("register",):
            kwargs["model"] = "linearizable"
        if workload.checker == "rw-register" and target.linearizable_keys(test.get("isolation")):
            kwargs["linearizable_keys"] = test["linearizable_keys"] = True
        result = checker_for(workload.checker)(history, **kwargs)
        results = result.to_json()
        if target.grey_box and test.get("isolation") == "strict-serializable":
            from sleuth.checker import timestamps
            ts = timestamps.check(history, workload.checker)
            results["timestamps"] = ts.to_json()
            results["valid"] = merge_valid(result.valid, ts.valid)
            results["anomaly-types"] = sorted(set(result.anomaly_types) | set(ts.anomaly_types))
            for k, v in ts.anomalies.items():
                results["anomalies"].setdefault(k, v)
    except HistoryError as e:
        results = {"valid": "unknown", "anomaly-types": [], "anomalies": {}, "notes": [str(e)]}
    if crashed:
        results["valid"] = "unknown" if results.get("valid") is True else results.get("valid")
        results.setdefault("notes", []).append(f"the run crashed: {crashed}")
        test["crashed"] = crashed
    counts = {"ops": 0, "ok": 0, "fail": 0, "info": 0}
    with open(os.path.join(run_dir, "history.jsonl"), "rb") as f:
        for line in f:
            e = orjson.loads(line)
            if e["process"] != "nemesis" and e["type"] != "invoke":
                counts["ops"] += 1
                counts[e["type"]] += 1
    test["summary"] = counts
    write_json(os.path.join(run_dir, "test.json"), test)
    write_json(os.path.join(run_dir, "results.json"), results)
    report = None
    try:
        from sleuth.reports.run_report import render
        report = render(run_dir)
    except Exception as e:
        test.setdefault("report_error", f"{type(e).__name__}: {e}")
        write_json(os.path.join(run_dir, "test.json"), test)
    return {"valid": results.get("valid"), "anomaly-types": results.get("anomaly-types", []),
            "run_dir": run_dir, **counts, "report": report, "results": results, "test": test}
