"""`sleuth run`: start a target, drive it with clients while faults come and go, judge, report.

The steps (docs/architecture.md, "Data flow of one run"):

1. the target comes up and the workload creates its tables;
2. `concurrency` client threads, each one connection through the target's driver (one logical
   process), run operations at the requested rate and record invoke and
   completion in `history.jsonl` with a monotonic clock; a nemesis thread
   injects and heals faults on a seeded schedule;
3. at the time limit clients stop, everything is healed, the target gets
   time to recover, and every key is read once more;
4. the history is judged (`sleuth.checker.judge`, the same function `sleuth check
   RUN_DIR` uses), and the store writes test.json and results.json once, from
   the run record and the results; the report is rendered from the same values.

Outcomes, as Jepsen records them: an error the database guarantees had no
effect (serialization failure, a fenced coordinator, a cas that did not
match, any failed read, a connection that could not be opened, so nothing
was sent) is `fail`; a timeout or a lost connection on a
write is `info`, and that client continues as a fresh process on a new
connection. A watchdog cuts the socket of an operation that hangs (a paused
node), so no client waits forever.

How a run ends (issue 10; docs/exit-status.md): at its time limit; on a first
SIGINT or SIGTERM (what a CI timeout sends), which stops the load, heals the
nemesis, stops every node and judges what was recorded ("interrupted"); on a
second signal, at once, still stopping the nodes; or on an exception in sleuth
itself (a workload bug, a full disk, an unwritable store), which is sleuth's
failure and not an operation of the system under test: the traceback goes to
crash.txt and the exit status is 255.
"""

from __future__ import annotations

import dataclasses
import os
import random
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from sleuth.base import exits
from sleuth.base.interrupts import Interrupted, Signals
from sleuth.checker.judge import Checks, checks_for
from sleuth.history.jsonl import JsonlWriter
from sleuth.history.jsonl import writes as op_writes
from sleuth.records import store
from sleuth.records.run import Results, TestRecord
from sleuth.workloads.clients import Failed, Unexpected

OP_TIMEOUT = 5.0  # seconds before the watchdog gives up on an operation
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class RunConfig:
    """What was asked for, once parsed: a value (Jepsen's test map), never edited afterwards;
    `execute` derives a completed copy (the isolation level the target defaults to)."""

    target: str = "reference"
    runtime: str | None = None
    nodes_file: str | None = None  # --runtime ssh: the hosts
    nodes_count: int | None = None  # --nodes-count: members of a cluster sleuth starts (etcd, a .toml)
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
    shrink_budget: float = 20.0  # seconds to shrink an invalid history (0: never); docs/shrink.md
    drop_tables: bool = False  # a URL target: drop sleuth's own tables left by an earlier run first
    online: bool = False  # judge the history as it is recorded (docs/online.md)
    fail_fast: bool = False  # end the run at the first anomaly found online (implies online)
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RunRecord:
    """What one run was and how it went: written to test.json by the store when the run starts
    (`started_record`: status "running") and, whole, at its end.

    `faults` counts the nemesis start events that took effect, by name (a run whose nemesis
    was asked for but injected nothing says so); `reason` says why a run ended early or was
    not judged ("interrupted", "crashed: …", "no operation completed …"); `status` is the
    run's exit status (sleuth.base.exits)."""

    name: str
    run_dir: str
    config: RunConfig  # its target redacted (sleuth.targets.redact)
    runtime: str | None
    nemesis: tuple[str, ...]
    checks: Checks
    started: float
    finished: float | None  # None while the run has not ended
    faults: dict[str, int]
    nemesis_errors: tuple[str, ...]
    counts: dict[str, int]
    valid: bool | str
    anomaly_types: tuple[str, ...]
    status: int
    reason: str | None = None
    ended: str | None = None  # why the run ended early, as handed to the judge ("interrupted", "crashed: …")
    crash_file: str | None = None
    report: str | None = None
    notes: tuple[str, ...] = ()
    duration: float | None = None  # seconds, sleuth.records.measure.duration of the history; None when not read
    # results.json's content as judged (sleuth.checker.judge.judge): the anomalies' examples, what the
    # model allows but was found ("also-found") and the counts, which the summary and the
    # campaign show; {} until the run is judged
    results: dict[str, Any] = field(default_factory=dict)

    def test_record(self) -> TestRecord:
        """test.json (sleuth.records.run.TestRecord): the configuration as run, then how it went."""
        c = self.config
        return TestRecord(
            name=self.name, workload=c.workload, target=c.target, runtime=self.runtime,
            nemesis=list(self.nemesis), fault=list(c.faults), isolation=c.isolation, model=self.checks.model,
            time_limit=c.time_limit, concurrency=c.concurrency, rate=c.rate, keys=c.keys, seed=c.seed,
            nemesis_interval=c.nemesis_interval, checks=self.checks, started=self.started,
            finished=self.finished, faults_happened=dict(self.faults), nemesis_errors=list(self.nemesis_errors),
            summary=dict(self.counts), status=self.status, reason=self.reason, ended=self.ended,
            crash_file=self.crash_file, notes=list(self.notes), duration_s=self.duration)

    def summary_json(self) -> dict[str, Any]:
        """`sleuth run --json`: the one object on stdout."""
        out = {"valid": self.valid, "anomaly-types": list(self.anomaly_types), "run_dir": self.run_dir,
               "model": self.checks.model, "seed": self.config.seed, "exit": self.status, **self.counts,
               "faults": self.faults}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.notes:  # what the summary's note lines say (a nemesis kind never started, …)
            out["notes"] = list(self.notes)
        if self.nemesis_errors:
            out["nemesis-errors"] = list(self.nemesis_errors)
        return out


class Recorder:
    """history.jsonl, appended in index order, with times from one monotonic clock.

    The format is sleuth.history.jsonl's (`JsonlWriter`); this adds the clock, the lock that makes
    the line order the real-time order, and live counts for the progress bar. Events that
    arrive after `close` (a client thread that outlived an interrupted run) are dropped:
    their operations stay open in the history, which docs/history-format.md reads as info."""

    def __init__(self, path: str):
        self.writer = JsonlWriter(path)
        self.lock = threading.Lock()
        self.t0 = time.monotonic_ns()
        self.counts = {"ok": 0, "fail": 0, "info": 0}
        self.observer: Any = None  # called with each event as it is written (`_Online.put`)

    @property
    def index(self) -> int:
        return self.writer.index

    def event(self, typ: str, process: Any, f: str, value: Any, **extra: Any) -> None:
        with self.lock:
            if self.writer.closed:
                return
            e = self.writer.append(time.monotonic_ns() - self.t0, typ, process, f, value, **extra)
            if typ in self.counts and process != "nemesis":
                self.counts[typ] += 1
            if self.observer is not None:
                self.observer(e)

    def close(self) -> None:
        with self.lock:
            self.writer.close()


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
        self.connected = False  # has it connected once (its first node is by slot)
        self.thread: int | None = None  # the thread running its operations (workload.cut)

    def connect(self) -> None:
        self.close()
        choices = self.target.dsns()
        self.generation = self.target.generation
        # the first connection round-robin by slot, so clients are spread evenly over a cluster's
        # nodes (seeded draws gave one of three Galera nodes 1 client of 10); later ones at random
        pick = self.slot if not self.connected else self.conn_rnd.randrange(len(choices))
        self.connected = True
        self.node, dsn = choices[pick % len(choices)]
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
        if self.thread is not None and hasattr(self.wl, "cut"):  # its own connections (upstream)
            self.wl.cut(self.thread)

    def timestamp(self) -> int | None:
        if not self.target.grey_box:
            return None
        try:
            return int(self.conn.execute("SHOW last_timestamp").fetchone()[0])
        except Exception:
            return None

    def run_op(self, f: str, value: Any) -> None:
        writes = op_writes(f, value)
        self.thread = threading.get_ident()
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
            # an operation on another database (the source workload's upstream) ran at no cluster ts
            ts = None if f in getattr(self.wl, "upstream_ops", ()) else self.timestamp()
            self.deadline = 0.0
            self.rec.event("ok", self.process, f, out, node=self.node, ts=ts)
        except Failed as e:
            self.deadline = 0.0
            self.rec.event("fail", self.process, f, value, node=self.node, error=str(e))
        except Unexpected as e:
            self.deadline = 0.0
            self._completed("info", f, value, f"unexpected answer: {e}", reconnect=True)
        except Exception as e:
            self.deadline = 0.0
            # The target knows its driver's errors: a definite failure, or maybe-happened (info).
            # Anything else is sleuth's own bug, not the system's: it stops the run (exit 255).
            outcome_msg = self.target.classify(e, writes)
            if outcome_msg is None:
                raise
            outcome, msg, reconnect = outcome_msg
            self._completed(outcome, f, value, msg, reconnect)

    def _completed(self, outcome: str, f: str, value: Any, msg: str, reconnect: bool) -> None:
        """A failed or indeterminate completion; after `info` the client is a fresh process."""
        self.rec.event(outcome, self.process, f, value, node=self.node, error=msg)
        if reconnect:
            self.close()
        if outcome == "info":
            self.process += self.cfg.concurrency  # a fresh process, as in Jepsen


def _worker(client: Client, stop: threading.Event, interval: float, end: float, crashes: list) -> None:
    # Jepsen's stagger: each gap uniform in [0, 2 * interval], so clients meet at random
    # moments (a fixed cadence locks their phases: some seeds would never contend).
    try:
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
    except BaseException as e:  # sleuth's own failure (a workload bug, a full disk): stop the run
        crashes.append(e)
        stop.set()
    finally:
        client.close()


def _watchdog(clients: list[Client], stop: threading.Event) -> None:
    while not stop.wait(0.25):
        now = time.monotonic()
        for c in clients:
            if c.deadline and now > c.deadline:
                c.deadline = 0.0
                c.cut()



@dataclass(frozen=True)
class _Plan:
    cfg: RunConfig
    target: Any
    kinds: tuple[str, ...]
    workload: Any
    checks: Checks
    name: str


def plan(cfg: RunConfig) -> _Plan:
    """Everything decided before anything starts; bad usage raises `Unsupported` (exit 254)."""
    from sleuth.nemesis.faults import parse_mix
    from sleuth.targets import Unsupported, label, make_target, refuse_upstream

    target = make_target(cfg.target, cfg.runtime, cfg.faults, cfg.nodes_file, cfg.nodes_count)
    if target.isolations:
        cfg = dataclasses.replace(cfg, isolation=cfg.isolation or target.default_isolation())
        if cfg.isolation not in target.isolations:
            raise Unsupported(f"--isolation {cfg.isolation!r}: {target.name} offers {', '.join(target.isolations)}")
    kinds = tuple(parse_mix(cfg.nemesis, target))
    workload = target.workload(cfg.workload, cfg.keys)
    refuse_upstream(target, workload)
    if getattr(workload, "upstream_tables", None):  # the source workload: an upstream PostgreSQL
        target.use_upstream(workload)
    name = cfg.name or "-".join([cfg.workload, label(cfg.target),
                                 *(cfg.faults or ()), *(kinds or ["no-nemesis"])])
    return _Plan(cfg, target, kinds, workload, checks_for(workload, target, cfg.isolation), name)


class _Online(threading.Thread):
    """Judges the history as the recorder writes it (`sleuth run --online`): each event goes,
    in the recorder's order, through a queue to this thread, which feeds the checker's online
    engine (`sleuth.checker.online`); each anomaly it confirms is said at once, and with
    `fail_fast` sets `stop`, which ends the load. The engine sees each value as the history
    file holds it (a JSON round trip), so it judges what the final check will read."""

    def __init__(self, checks: Checks, source: str, say, stop: threading.Event | None):
        super().__init__(daemon=True, name="sleuth-online")
        import queue

        from sleuth.checker.online import Feed, engine_for
        from sleuth.history.jsonl import History

        self.queue: Any = queue.SimpleQueue()
        self.say, self.stop = say, stop
        self.found: list[Any] = []
        self.error: str | None = None
        self.history = History([], source)
        self.engine = engine_for(checks.checker, self.history, checks.model, self._found, checks.options,
                                 timestamps=checks.timestamps)
        self.feed = Feed(self.history, self.engine) if self.engine is not None else None

    def put(self, e: Any) -> None:
        self.queue.put(e)

    def close(self) -> None:
        if self.is_alive():
            self.queue.put(None)
            self.join(10)

    def run(self) -> None:
        import queue

        import orjson

        loads, dumps = orjson.loads, orjson.dumps
        while True:
            try:
                e = self.queue.get(timeout=0.2)
            except queue.Empty:
                if self.feed is not None and self.error is None:
                    self.engine.tick()
                continue
            if e is None:
                return
            if self.feed is None or self.error is not None:
                continue
            try:
                self.feed.event(e.type, e.process, e.f, loads(dumps(e.value)), e.time, e.node, e.error, e.ts)
            except Exception as x:  # noqa: BLE001 - online judging is a help; the final check decides
                self.error = f"online checking stopped at line {self.feed.pos}: {_one_line(x)}"

    def _found(self, f: Any) -> None:
        self.found.append(f)
        first = f.explanation.splitlines()[0] if f.explanation else ""
        self.say(f"sleuth run: found {f.name} online at line {f.line}: {first}")
        if self.stop is not None and not self.stop.is_set():
            self.say("sleuth run: --fail-fast: stopping the load")
            self.stop.set()


class _Live:
    """The live part of a run: target up, load and nemesis, heal, final reads; and teardown,
    which must leave nothing running whatever happened before it."""

    def __init__(self, p: _Plan, rec: Recorder, signals: Signals, say) -> None:
        self.p, self.cfg, self.target, self.rec, self.signals, self.say = p, p.cfg, p.target, rec, signals, say
        self.stop = threading.Event()
        self.dog_stop = threading.Event()
        self.crashes: list[BaseException] = []
        self.threads: list[threading.Thread] = []
        self.schedule: Any = None
        self.notes: list[str] = []
        self.created: list[str] = []  # the tables this run created in the user's database
        self.online: _Online | None = None

    def run(self) -> str | None:
        """Drive the run to its end; the reason it ended early, or None."""
        self.target.up(progress=self.say)
        if self.signals.fired:
            return INTERRUPTED
        self._setup()
        if self.cfg.online or self.cfg.fail_fast:
            self.online = _Online(self.p.checks, self.rec.writer.path, self.say,
                                  self.stop if self.cfg.fail_fast else None)
            if self.online.engine is None:
                self.notes.append(f"no online checking for {self.p.checks.checker} yet: judged at the end")
            self.rec.observer = self.online.put
            self.online.start()
        self._start_load()
        _progress(self.cfg, self.rec, time.monotonic() + self.cfg.time_limit, self.stop, self.signals,
                  self.online)
        self._stop_load()
        if self.crashes:
            raise self.crashes[0]
        if self.signals.fired:
            return INTERRUPTED
        if self.cfg.fail_fast and self.online is not None and self.online.found:
            f = self.online.found[0]
            return f"fail-fast: {f.name} found online at line {f.line}"
        self._recover()
        return INTERRUPTED if self.signals.fired else None

    def _setup(self) -> None:
        """The workload's tables. In the user's own database (a URL target) sleuth creates them
        only where no table of that name exists (`--drop-tables` first drops sleuth's own, left by
        an earlier run), and drops those it created when the run ends (`_drop_created`). A driver
        error there, from connecting on, is the user's target failing: `TargetFailed`."""
        from sleuth.targets import TargetFailed, redact

        target, workload = self.target, self.p.workload
        shown = f"--target {redact(self.cfg.target)}"
        step = "could not be reached"
        try:
            with target.connect(target.dsns()[-1][1], OP_TIMEOUT) as conn:
                if target.users:
                    step = "refused sleuth's setup"
                    existing = target.existing_tables(conn, workload.tables)
                    if existing and not self.cfg.drop_tables:
                        raise TargetFailed(
                            f"{shown} already has table{'s' if len(existing) > 1 else ''} {', '.join(existing)}: "
                            "sleuth creates only tables that are not there, and touches no other; if "
                            "it is sleuth's own, left by an earlier run, --drop-tables drops it first")
                    for table in existing:
                        conn.execute(f"DROP TABLE {table}")
                workload.setup(conn)
                self.created = list(workload.tables) if target.users else []
        except TargetFailed:
            raise
        except Exception as e:
            described = target.classify(e, True) if target.users else None
            if described is None:
                raise  # sleuth's own failure, or a server sleuth started: 255 with the traceback
            raise TargetFailed(f"{shown} {step}: {_masked(described[1], self.cfg.target)}") from None

    def _drop_created(self) -> None:
        """Drop the tables this run created in the user's database (and only those); if that
        fails, a note says which are left and how the next run clears them."""
        if not self.created:
            return
        try:
            with self.target.connect(self.target.dsns()[-1][1], OP_TIMEOUT) as conn:
                for table in self.created:
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
            self.created = []
        except Exception as e:
            self.notes.append(f"the tables this run created ({', '.join(self.created)}) could not be dropped "
                              f"({_masked(_one_line(e), self.cfg.target)}): the next run refuses until "
                              "--drop-tables drops them")

    def _start_load(self) -> None:
        from sleuth.nemesis.faults import Schedule

        cfg, rec = self.cfg, self.rec
        clients = [Client(i, cfg, self.target, self.p.workload, rec) for i in range(cfg.concurrency)]
        self.final = Client(cfg.concurrency * 1000, cfg, self.target, self.p.workload, rec)
        interval = cfg.concurrency / cfg.rate if cfg.rate > 0 else 0.0
        end = time.monotonic() + cfg.time_limit
        self.threads = [threading.Thread(target=_worker, args=(c, self.stop, interval, end, self.crashes),
                                         daemon=True) for c in clients]
        threading.Thread(target=_watchdog, args=(clients + [self.final], self.dog_stop), daemon=True).start()
        for t in self.threads:
            t.start()
        if self.p.kinds:
            self.schedule = Schedule(self.target, list(self.p.kinds), cfg.nemesis_interval, cfg.seed,
                                     lambda f, v: rec.event("info", "nemesis", f, v), end=end)
            self.schedule.start()

    def _stop_load(self) -> None:
        """Clients stop (each finishes its operation, the watchdog bounds it), faults heal.
        After a second signal nobody waits: clients are abandoned (the history is closed
        under them), the nemesis gets a second to let go before it heals."""
        self.stop.set()
        hurry = self.signals.again
        deadline = time.monotonic() + (1.0 if hurry else OP_TIMEOUT * 3)
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self.threads = []
        if self.schedule is not None:
            self.schedule.finish(wait=1.0 if hurry else 120.0)

    def _recover(self) -> None:
        """Heal time, then every key read once more (a final read that fails is retried)."""
        time.sleep(self.cfg.recover)
        try:
            self.target.wait_healthy(60)
        except Exception as e:
            self.notes.append(f"the target did not recover: {e}")
        for f, value in self.p.workload.final_reads():
            for attempt in range(5):
                if self.signals.fired:
                    return
                before = self.rec.counts["ok"]
                self.final.run_op(f, value)
                if self.rec.counts["ok"] > before:
                    break
                time.sleep(1)
        self.final.close()

    def teardown(self, run_dir: str) -> None:
        """Stop the load and heal the nemesis if still on, close the history, keep the logs,
        stop every node. Each step runs even if one before it failed; the first failure is raised."""
        errors: list[BaseException] = []
        for step in (self._stop_load, self.dog_stop.set, self.rec.close,
                     lambda: self.online.close() if self.online is not None else None, self._drop_created,
                     lambda: self.target.collect_logs(store.nodes_dir(run_dir)), self.target.down):
            try:
                step()
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]

    @property
    def faults(self) -> dict[str, int]:
        return dict(self.schedule.happened) if self.schedule is not None else {}

    def nemesis_notes(self) -> list[str]:
        """The kinds of the mix whose turn never came (the run was too short), once the load is over."""
        missing = self.schedule.missing() if self.schedule is not None else []
        if not missing:
            return []
        started = sum(self.schedule.tried.values())
        return [f"--nemesis {', '.join(missing)} never started: this run had room for {started} "
                f"fault{'' if started == 1 else 's'} (one every {2 * self.cfg.nemesis_interval:g} s, the fault then "
                f"its heal, within --time-limit {self.cfg.time_limit:g} s); raise --time-limit or lower "
                "--nemesis-interval"]

    @property
    def nemesis_errors(self) -> tuple[str, ...]:
        return tuple(self.schedule.errors) if self.schedule is not None else ()


def _masked(text: str, spec: str) -> str:
    """`text` (a driver's message) with the password of the target URL `spec` masked, should
    the driver have quoted it."""
    from urllib.parse import urlsplit

    try:
        password = urlsplit(spec).password if "://" in spec else None
    except ValueError:
        password = None
    return text.replace(password, "***") if password else text


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def execute(cfg: RunConfig, say=print) -> RunRecord:
    """One whole run, to its record. Raises `Unsupported` for bad usage and `StoreError` when
    no run directory can be made (nothing has started then); every later failure ends in
    the record (status 255, crash.txt), with the nodes stopped."""
    from sleuth.targets import TargetFailed, redact

    p = plan(cfg)
    cfg = p.cfg
    run_dir = store.new_run_dir(cfg.store, p.name)
    runtime = p.target.runtime_name
    say(f"sleuth run: {cfg.workload} on {redact(cfg.target)}" + (f" ({runtime})" if runtime else "")
        + (f", faults {','.join(cfg.faults)}" if cfg.faults else "")
        + (f", nemesis {','.join(p.kinds)}" if p.kinds else "") + f" → {run_dir}")
    signals = Signals()
    signals.install()
    started = time.time()
    crash: tuple[BaseException, str] | None = None
    reason = None
    live = None
    failed = None  # the user's target failed before the first operation (TargetFailed)
    try:
        try:
            store.write_record(run_dir, started_record(p, run_dir, started).test_record())
            live = _Live(p, Recorder(store.history_path(run_dir)), signals, say)
            reason = live.run()
        except Interrupted:
            reason = INTERRUPTED
        except TargetFailed as e:
            failed = str(e)
        except BaseException as e:
            crash = (e, traceback.format_exc())
        finally:
            signals.shield()
            if live is not None:
                try:
                    live.teardown(run_dir)
                except BaseException as e:
                    crash = crash or (e, traceback.format_exc())
        if failed is not None and crash is None:
            return _target_failed(p, run_dir, started, failed)
        return _conclude(p, run_dir, live, started, reason, crash, signals, say)
    finally:
        signals.restore()


RUNNING = "running: the run had not ended when this was written (a run killed outright stops here)"


def started_record(p: _Plan, run_dir: str, started: float) -> RunRecord:
    """The record of a run that has only started: what test.json holds until the run ends."""
    from sleuth.targets import redact

    return RunRecord(
        name=p.name, run_dir=run_dir, config=dataclasses.replace(p.cfg, target=redact(p.cfg.target)),
        runtime=p.target.runtime_name, nemesis=p.kinds, checks=p.checks,
        started=started, finished=None, faults={}, nemesis_errors=(), counts={},
        valid="unknown", anomaly_types=(), status=exits.UNKNOWN, reason=RUNNING)


def _target_failed(p: _Plan, run_dir: str, started: float, reason: str) -> RunRecord:
    """The record of a run whose target (the user's database) failed before its first
    operation: status 254 and why; nothing judged, nothing else kept (its history is empty)."""
    from sleuth.targets import redact

    for path in (store.history_path(run_dir), store.nodes_dir(run_dir)):
        try:
            if os.path.isdir(path):
                os.rmdir(path)  # only if empty
            elif os.path.getsize(path) == 0:
                os.remove(path)
        except OSError:
            pass
    rec = RunRecord(
        name=p.name, run_dir=run_dir, config=dataclasses.replace(p.cfg, target=redact(p.cfg.target)),
        runtime=p.target.runtime_name, nemesis=p.kinds, checks=p.checks,
        started=started, finished=time.time(), faults={}, nemesis_errors=(),
        counts={"ops": 0, "ok": 0, "fail": 0, "info": 0}, valid="unknown", anomaly_types=(),
        status=exits.BAD_INPUT, reason=reason, ended=reason)
    store.write_record(run_dir, rec.test_record())
    return rec


def _conclude(p: _Plan, run_dir: str, live: _Live | None, started: float, reason: str | None,
              crash: tuple[BaseException, str] | None, signals: Signals, say) -> RunRecord:
    """Judge what was recorded, render the report, and write the record once. A second
    signal before this (`signals.again`) means no judging and no plots; one during it
    ends the shrinking early (what it found is kept), and the rest goes on, shielded."""
    from sleuth.checker.judge import judge, not_judged
    from sleuth.history.jsonl import HistoryError, read_jsonl
    from sleuth.records.measure import duration
    from sleuth.targets import redact

    finished = time.time()
    hurried = signals.again
    notes = [] if live is None else [*live.notes, *([] if signals.fired else live.nemesis_notes())]
    history = None
    if crash is not None:
        reason = f"crashed: {_one_line(crash[0])}"
    ended = reason
    if hurried:
        reason = f"{reason or INTERRUPTED}: stopped at once by a second signal, not judged"
        results: dict[str, Any] = not_judged(reason)
    else:
        try:
            history = read_jsonl(store.history_path(run_dir))
            results = judge(history, p.checks, reason)
        except HistoryError as e:
            reason = reason or f"the history could not be read: {e}"
            results = not_judged(reason)
        except Exception as e:
            crash = crash or (e, traceback.format_exc())
            reason = f"crashed: {_one_line(crash[0])}"
            results = not_judged(reason)
    reason = results.get("reason", reason)
    results["reason"] = reason
    if live is not None and live.online is not None:
        from sleuth.checker.online.when import timeline

        found_json = [f.to_json() for f in live.online.found]
        results["online"] = {"found": found_json, "fail-fast": p.cfg.fail_fast,
                             # each anomaly type: when it happened and when it was found (online or at the end)
                             "anomalies": timeline(results, history, found_json, time.time())}
        if live.online.error:
            notes.append(live.online.error)
        for f in live.online.found[:5]:  # the report and the summary show notes
            notes.append(f"found online: {f.name} at line {f.line}, which happened "
                         f"{(f.time or 0) / 1e9:.3f} s into the run; found {f.found_at - started:.2f} s "
                         "after the run started")
    if history is not None and results.get("valid") is False and p.cfg.shrink_budget > 0 and not signals.again:
        try:  # the smallest history that still fails, shown first in the report
            from sleuth.checker import counterexample
            counterexample.for_run(run_dir, history, p.checks, p.cfg.shrink_budget, say,
                                   stop=lambda: signals.again)
        except Exception as e:  # noqa: BLE001 - a counterexample is a help, never the verdict
            notes.append(f"shrinking the history failed: {_one_line(e)}")
    if "counts" not in results:
        from sleuth.checker.judge import op_counts
        results["counts"] = op_counts(history) if history is not None else _counts_of(live)

    def record(crash_file: str | None = None, report: str | None = None) -> RunRecord:
        return RunRecord(
            name=p.name, run_dir=run_dir, config=dataclasses.replace(p.cfg, target=redact(p.cfg.target)),
            runtime=p.target.runtime_name, nemesis=p.kinds, checks=p.checks,
            started=started, finished=finished, faults=live.faults if live else {},
            nemesis_errors=live.nemesis_errors if live else (), counts=results["counts"],
            valid=results.get("valid"), anomaly_types=tuple(results.get("anomaly-types", [])),
            status=exits.CRASHED if crash else exits.of_valid(results.get("valid")), reason=reason,
            ended=ended, crash_file=crash_file, report=report, notes=tuple(notes),
            duration=None if history is None else duration(history), results=results)

    report = None
    if not hurried:  # a second signal asked to stop at once: no plots
        try:
            from sleuth.reports.run_report import render
            report = render(run_dir, history=history, test=record().test_record(), results=results)
        except Exception as e:
            if crash is None:
                crash = (e, traceback.format_exc())
                reason = results["reason"] = f"crashed: {_one_line(e)}"
    crash_file = store.write_crash(run_dir, crash[1]) if crash else None
    rec = record(crash_file, report)
    try:
        store.write_record(run_dir, rec.test_record(), Results.of(results))
    except store.StoreError as e:
        rec = dataclasses.replace(rec, status=exits.CRASHED, reason=f"crashed: {e}")
    return rec


def _counts_of(live: _Live | None) -> dict[str, int]:
    c = dict(live.rec.counts) if live is not None else {"ok": 0, "fail": 0, "info": 0}
    return {"ops": sum(c.values()), **c}


def _progress(cfg: RunConfig, rec: Recorder, end: float, stop: threading.Event, signals: Signals,
              online: _Online | None = None) -> None:
    """Wait out the load (a tqdm bar on a terminal), until its end, a stop or a signal."""
    bar = None
    if cfg.progress:
        from tqdm import tqdm
        bar = tqdm(total=int(cfg.time_limit), unit="s", file=sys.stderr, leave=False,
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt}s {postfix}")
    start = end - cfg.time_limit
    try:
        while (now := time.monotonic()) < end and not stop.is_set() and not signals.fired:
            time.sleep(min(0.25, end - now))
            if bar is not None:
                bar.n = int(min(cfg.time_limit, time.monotonic() - start))
                c = rec.counts
                found = "" if online is None else f" anomalies {len(online.found)}"
                bar.set_postfix_str(f"ok {c['ok']} fail {c['fail']} info {c['info']}{found}")
                bar.refresh()
    finally:
        if bar is not None:
            bar.close()
