"""PostgreSQL as a target: a local server sleuth starts, or any PostgreSQL-wire URL."""

from __future__ import annotations

from typing import Any

from sleuth.targets import OneServer, Target, Unsupported, redact


class PostgresTarget(OneServer, Target):
    """A real PostgreSQL server sleuth starts from Debian's packages in a temp dir."""
    name = "postgres"
    log_name = "postgres.log"
    isolations = ("read-committed", "repeatable-read", "serializable")
    roles = ("postgres",)

    def __init__(self) -> None:
        super().__init__()
        from sleuth.targets.postgres_server import required_bin

        required_bin("--target postgres", Unsupported)  # refused before anything starts, a campaign's file too
        self.server: Any = None

    def linearizable_keys(self, isolation: str | None) -> bool:
        return True  # one server: each read and write takes effect at one instant inside its transaction

    def up(self, progress=print) -> None:
        from sleuth.targets.postgres_server import PostgresServer
        self.server = PostgresServer()
        self.server.start()

    def dsns(self) -> list[tuple[str, str]]:
        return [("postgres", self.server.url + "?connect_timeout=3")]

    def session_sql(self, isolation: str) -> list[str]:
        return [f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {isolation.replace('-', ' ').upper()}"]


class UrlTarget(Target):
    """Any PostgreSQL-wire database at a URL: sleuth cannot reach its nodes."""
    isolations = ("read-committed", "repeatable-read", "serializable")
    users = True

    def __init__(self, url: str):
        super().__init__()
        self.url = url  # only ever handed to the driver; printed and stored as `redact(url)`
        self.name = redact(url).split("@")[-1]

    def dsns(self) -> list[tuple[str, str]]:
        return [(self.name, self.url)]

    def session_sql(self, isolation: str) -> list[str]:
        return [f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {isolation.replace('-', ' ').upper()}"]
