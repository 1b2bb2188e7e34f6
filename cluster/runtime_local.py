"""The `local` runtime: every node a process on this machine, on its own 127.x.y.z address.

Each node's process runs in its own session (so SIGKILL/SIGSTOP reach exactly
it), writes its log to `<state>/nodes/<name>/node.log` and keeps its data in
`<state>/nodes/<name>/data`, which survives kills and restarts. The pids and
command lines live in `<state>/local.json`, so a later `sleuth cluster`
command (another process) can kill, pause or stop them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from sleuth.base.jsonfile import write_json
from sleuth.cluster import procs


class LocalRuntime:
    name = "local"

    def __init__(self, state_dir: str, python: str | None = None):
        self.dir = state_dir
        self.python = python or sys.executable
        self.file = os.path.join(state_dir, "local.json")
        self.procs: dict[str, dict] = {}
        self.rules: list[list[str]] = []  # iptables rules this runtime added (partitions)
        if os.path.exists(self.file):
            with open(self.file) as f:
                self.procs = json.load(f)

    @staticmethod
    def available() -> bool:
        return True

    def _save(self) -> None:
        write_json(self.file, self.procs)

    def node_dir(self, name: str) -> str:
        return os.path.join(self.dir, "nodes", name)

    def data_path(self, name: str) -> str:
        return os.path.join(self.node_dir(name), "data")

    def log_path(self, name: str) -> str:
        return os.path.join(self.node_dir(name), "node.log")

    def up_network(self, progress=print) -> None:
        pass  # 127.0.0.0/8 is all on the loopback interface already

    def start(self, name: str, argv: list[str], ip: str, env: dict | None = None) -> None:
        os.makedirs(self.data_path(name), exist_ok=True)
        self.procs[name] = {"argv": argv, "ip": ip, "env": env or {}, "pid": None}
        self._spawn(name)

    def _spawn(self, name: str) -> None:
        p = self.procs[name]
        log = open(self.log_path(name), "ab")
        env = {**os.environ, **p["env"]}
        # cwd: its own directory, so `python -m` never imports a sleuth from the caller's cwd
        proc = subprocess.Popen(p["argv"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, cwd=self.node_dir(name))
        log.close()
        p["pid"] = proc.pid
        self._save()

    def _signal(self, name: str, sig: int) -> bool:
        pid = self.procs.get(name, {}).get("pid")
        if not pid:
            return False
        try:
            os.kill(pid, sig)
            return True
        except ProcessLookupError:
            return False

    def alive(self, name: str) -> bool:
        pid = self.procs.get(name, {}).get("pid")
        if not pid:
            return False
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)  # reap if it is our child
            if done == pid:
                return False
        except ChildProcessError:
            pass
        return procs.running(pid)

    def state(self, name: str) -> str:
        if not self.alive(name):
            return "down"
        return "paused" if procs.state(self.procs[name]["pid"]) == "T" else "running"

    def kill(self, name: str) -> None:
        self._signal(name, signal.SIGCONT)
        self._signal(name, signal.SIGKILL)
        self._wait_dead(name)

    def _wait_dead(self, name: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self.alive(name) and time.monotonic() < deadline:
            time.sleep(0.02)

    def restart(self, name: str) -> None:
        if self.alive(name):
            self.kill(name)
        self._spawn(name)

    def stop(self, name: str) -> None:
        self._signal(name, signal.SIGCONT)
        if self._signal(name, signal.SIGTERM):
            deadline = time.monotonic() + 5
            while self.alive(name) and time.monotonic() < deadline:
                time.sleep(0.02)
        if self.alive(name):
            self.kill(name)

    def pause(self, name: str) -> None:
        self._signal(name, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self._signal(name, signal.SIGCONT)

    def logs(self, name: str) -> str:
        try:
            with open(self.log_path(name), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def exec(self, name: str, argv: list[str]) -> tuple[int, str]:
        p = subprocess.run(argv, capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr

    def cut(self, a: str, ip_a: str, b: str, ip_b: str) -> None:
        """Drop traffic between two nodes' addresses, both ways (iptables on the loopback).

        Works because every node connects from its own address (cluster/rpc.py binds it)."""
        for src, dst in ((ip_a, ip_b), (ip_b, ip_a)):
            rule = ["INPUT", "-s", src, "-d", dst, "-j", "DROP"]
            subprocess.run(["iptables", "-I", *rule], check=True, capture_output=True)
            self.rules.append(rule)

    def heal_cuts(self) -> None:
        for rule in self.rules:
            subprocess.run(["iptables", "-D", *rule], capture_output=True)
        self.rules = []

    def nodes(self) -> list[dict]:
        return [{"name": n, "ip": p["ip"], "state": self.state(n)} for n, p in self.procs.items()]

    def remove_all(self) -> None:
        self.heal_cuts()
        for name in list(self.procs):
            self.stop(name)
        shutil.rmtree(os.path.join(self.dir, "nodes"), ignore_errors=True)
        self.procs = {}
        if os.path.exists(self.file):
            os.remove(self.file)
