"""A standalone Spark cluster on this machine: one master and one worker, from the pyspark installation.

    python -m sleuth.spark.standalone up   [--state DIR] [--port 7077] [--cores N]
    python -m sleuth.spark.standalone down [--state DIR]

(`make spark-up` / `make spark-down`.) pip's pyspark ships `bin/spark-class`
but not the `sbin/start-*.sh` scripts, so the daemons are started as the
scripts would: `spark-class org.apache.spark.deploy.master.Master` and
`...worker.Worker spark://127.0.0.1:PORT`, both on 127.0.0.1. Their pids,
ports and logs live in the state directory (`$SLEUTH_HOME/spark`, default
`~/.sleuth/spark`); `up` is idempotent (a running cluster is reported, not
started twice), `down` stops exactly the pids it recorded. Every wait is
bounded. Executors run this virtualenv's Python (PYSPARK_PYTHON).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def default_state() -> str:
    home = os.environ.get("SLEUTH_HOME") or os.path.join(os.path.expanduser("~"), ".sleuth")
    return os.path.join(home, "spark")


def spark_class() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def _load(state: str) -> dict | None:
    try:
        with open(os.path.join(state, "cluster.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def _master_json(meta: dict) -> dict:
    with urllib.request.urlopen(f"http://{HOST}:{meta['ui_port']}/json/", timeout=2) as r:
        return json.load(r)


class _PortTaken(RuntimeError):
    """A process died before it was ready: the ports chosen for it were taken meanwhile."""


def _wait(what: str, ok, timeout: float, log: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ok():
                return
        except (OSError, ValueError):  # not listening yet, or another server's page on that port
            pass
        if proc is not None and proc.poll() is not None:
            raise _PortTaken(f"spark {what} exited before it was ready (see {log})")
        time.sleep(0.5)
    raise RuntimeError(f"spark {what} not ready after {timeout:.0f} s (see {log})")


def up(state: str | None = None, port: int = 7077, cores: int | None = None,
       timeout: float = 90.0, say=print) -> str:
    """Start master and worker unless they run; return the master URL.

    The web UI ports are free when chosen, but another process may bind one before the JVM
    does (the JVMs take seconds to start). Spark would then move to the next port silently and
    the readiness check would ask someone else's server; so Spark may not move
    (`spark.port.maxRetries=0`), the check asks for this master's own URL, and a process
    that died for a taken port is started again on fresh ones (three tries)."""
    for attempt in range(3):
        try:
            return _up(state, port, cores, timeout, say)
        except _PortTaken:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _up(state: str | None, port: int, cores: int | None, timeout: float, say) -> str:
    state = state or default_state()
    meta = _load(state)
    if meta and all(_alive(p) for p in meta["pids"].values()):
        say(f"spark: already up at {meta['master']} (state {state})")
        return meta["master"]
    if meta:
        down(state, say=lambda m: None)
    os.makedirs(state, exist_ok=True)
    meta = {"master": f"spark://{HOST}:{port}", "port": port, "ui_port": free_port(),
            "worker_ui_port": free_port(), "pids": {}}
    env = {**os.environ, "SPARK_LOCAL_IP": HOST, "PYSPARK_PYTHON": sys.executable,
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
           "SPARK_LOG_DIR": state, "SPARK_WORKER_DIR": os.path.join(state, "work"),
           # no REST submission server: its port is fixed (6066), so with ports that may not move a
           # second master on this machine (another test, another user's) would die at start
           "SPARK_MASTER_OPTS": "-Dspark.port.maxRetries=0 -Dspark.master.rest.enabled=false", "SPARK_WORKER_OPTS": "-Dspark.port.maxRetries=0"}
    argv = {
        "master": [spark_class(), MASTER_CLASS, "--host", HOST, "--port", str(port),
                   "--webui-port", str(meta["ui_port"])],
        "worker": [spark_class(), WORKER_CLASS, meta["master"], "--host", HOST,
                   "--webui-port", str(meta["worker_ui_port"]), "--work-dir", env["SPARK_WORKER_DIR"],
                   *(["--cores", str(cores)] if cores else [])],
    }
    try:
        for role in ("master", "worker"):
            log = os.path.join(state, f"{role}.log")
            with open(log, "ab") as out:
                p = subprocess.Popen(argv[role], stdout=out, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
            meta["pids"][role] = p.pid
            with open(os.path.join(state, "cluster.json"), "w") as f:
                json.dump(meta, f)
            if role == "master":
                _wait("master", lambda: _master_json(meta).get("url") == meta["master"]
                      and _master_json(meta).get("status") == "ALIVE", timeout, log, p)
            else:
                _wait("worker", lambda: len([w for w in _master_json(meta).get("workers", [])
                                              if w.get("state") == "ALIVE"]) > 0, timeout, log, p)
    except BaseException:
        down(state, say=lambda m: None)
        raise
    say(f"spark: up at {meta['master']} (master UI http://{HOST}:{meta['ui_port']}, state {state})")
    return meta["master"]


def down(state: str | None = None, timeout: float = 20.0, say=print) -> None:
    """Stop the recorded master and worker (their process groups); idempotent."""
    state = state or default_state()
    meta = _load(state)
    if not meta:
        say(f"spark: not running (state {state})")
        return
    for role in ("worker", "master"):
        pid = meta["pids"].get(role)
        if pid and _alive(pid):
            try:
                os.killpg(pid, signal.SIGTERM)  # spark-class execs java in its own session
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                _reap(pid)
                time.sleep(0.2)
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
                _reap(pid)
    os.remove(os.path.join(state, "cluster.json"))
    say(f"spark: down (state {state})")


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m sleuth.spark.standalone")
    ap.add_argument("command", choices=("up", "down"))
    ap.add_argument("--state", default=None,
                    help="state directory (default $SLEUTH_HOME/spark, with --docker $SLEUTH_HOME/spark-docker)")
    ap.add_argument("--port", type=int, default=7077)
    ap.add_argument("--cores", type=int, default=None)
    ap.add_argument("--docker", action="store_true",
                    help="a master and two workers in containers (sleuth/spark/cluster_docker.py)")
    ap.add_argument("--share", action="append", default=None, metavar="DIR",
                    help="with --docker: a directory mounted at its own path in every container "
                         "(repeatable; default $SLEUTH_HOME and the current directory)")
    ap.add_argument("--workers", type=int, default=2, help="with --docker: how many workers")
    a = ap.parse_args(argv)
    try:
        if a.docker:
            from sleuth.spark import cluster_docker

            if a.command == "up":
                cluster_docker.up(a.state, a.share, a.workers, a.cores or 1)
            else:
                cluster_docker.down(a.state)
        elif a.command == "up":
            up(a.state, a.port, a.cores)
        else:
            down(a.state)
    except Exception as e:  # RuntimeError, the image's build, the Docker API
        print(f"spark {a.command}: {e}", file=sys.stderr)
        return 255
    return 0


if __name__ == "__main__":
    sys.exit(main())
