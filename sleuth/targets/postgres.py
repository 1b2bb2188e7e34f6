"""PostgreSQL as a target: a local server sleuth starts, or any PostgreSQL-wire URL."""

from __future__ import annotations

import os
import shutil
from typing import Any

from sleuth.targets import Target, redact


class PostgresTarget(Target):
    """A real PostgreSQL server sleuth starts from Debian's packages in a temp dir."""
    name = "postgres"
    isolations = ("read-committed", "repeatable-read", "serializable")
    roles = ("postgres",)

    def __init__(self) -> None:
        super().__init__()
        self.server: Any = None

    def linearizable_keys(self, isolation: str | None) -> bool:
        return True  # one server: each read and write takes effect at one instant inside its transaction

    def up(self, progress=print) -> None:
        from sleuth.targets.postgres_server import PostgresServer
        self.server = PostgresServer()
        self.server.start()

    def down(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def dsns(self) -> list[tuple[str, str]]:
        return [("postgres", self.server.url + "?connect_timeout=3")]

    def session_sql(self, isolation: str) -> list[str]:
        return [f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {isolation.replace('-', ' ').upper()}"]

    def nodes(self, role: str) -> list[str]:
        return ["postgres"]

    def kill(self, node: str) -> None:
        self.server.kill()

    def restart(self, node: str) -> None:
        self.server.restart()

    def pause(self, node: str) -> None:
        self.server.pause()

    def resume(self, node: str) -> None:
        self.server.resume()

    def collect_logs(self, into: str) -> None:
        if self.server is not None and os.path.exists(self.server.log_path):
            os.makedirs(os.path.join(into, "postgres"), exist_ok=True)
            shutil.copy(self.server.log_path, os.path.join(into, "postgres", "postgres.log"))


class UrlTarget(Target):
    """Any PostgreSQL-wire database at a URL: sleuth cannot reach its nodes."""
    isolations = ("read-committed", "repeatable-read", "serializable")

    def __init__(self, url: str):
        super().__init__()
        self.url = url  # only ever handed to the driver; printed and stored as `redact(url)`
        self.name = redact(url).split("@")[-1]

    def dsns(self) -> list[tuple[str, str]]:
        return [(self.name, self.url)]

    def session_sql(self, isolation: str) -> list[str]:
        return [f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {isolation.replace('-', ' ').upper()}"]
