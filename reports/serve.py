"""`sleuth serve`: the store over HTTP on 127.0.0.1, with a root page listing campaigns and runs, newest first."""

from __future__ import annotations

import functools
import html
import json
import os
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer


def runs(store: str) -> list[tuple[str, str]]:
    """(relative run dir, verdict) for every run in the store, newest first."""
    out = []
    for name in os.listdir(store) if os.path.isdir(store) else []:
        d = os.path.join(store, name)
        if name in ("latest", "campaigns") or not os.path.isdir(d):
            continue
        for stamp in os.listdir(d):
            try:
                with open(os.path.join(d, stamp, "results.json")) as f:
                    v = json.load(f).get("valid")
            except (OSError, ValueError):
                v = "unknown"
            out.append((stamp, f"{name}/{stamp}", {True: "valid", False: "INVALID"}.get(v, "unknown")))
    return [(rel, verdict) for _, rel, verdict in sorted(out, reverse=True)]


def campaigns(store: str) -> list[tuple[str, str]]:
    """(relative campaign dir, its outcome counts) for every campaign in the store, newest first:
    the counts its page shows, by Spark's verdicts (durability included) where Spark judged it."""
    from sleuth.campaign import RECORD, label_counts, verdict
    from sleuth.reports.campaign_report import load_table, verdicts

    out = []
    top = os.path.join(store, "campaigns")
    for name in os.listdir(top) if os.path.isdir(top) else []:
        for stamp in os.listdir(os.path.join(top, name)) if os.path.isdir(os.path.join(top, name)) else []:
            cdir = os.path.join(top, name, stamp)
            try:
                with open(os.path.join(cdir, RECORD)) as f:
                    record = json.load(f)
                judged = verdicts(load_table(cdir, record))
                labels = [verdict(r, judged)[0] for r in record["runs"]]
            except (OSError, ValueError, KeyError):
                continue
            counts = ", ".join(f"{n} {k}" for k, n in label_counts(labels).items() if n)
            out.append((stamp, f"campaigns/{name}/{stamp}", f"{len(labels)} runs: {counts}"))
    return [(rel, what) for _, rel, what in sorted(out, reverse=True)]


class Handler(SimpleHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path in ("/", "/index.html"):
            def items(pairs):
                return "".join(f'<li><a href="{html.escape(urllib.parse.quote(r))}/index.html">{html.escape(r)}</a> — {html.escape(v)}</li>'
                               for r, v in pairs)
            body = (f"<!doctype html><meta charset='utf-8'><title>sleuth runs</title>"
                    f"<h1>campaigns</h1><ul>{items(campaigns(self.directory))}</ul>"
                    f"<h1>runs</h1><ul>{items(runs(self.directory))}</ul>")
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        super().do_GET()

    def log_message(self, *args) -> None:
        pass


def make_server(store: str, host: str = "127.0.0.1", port: int = 8080) -> ThreadingHTTPServer:
    return ThreadingHTTPServer((host, port), functools.partial(Handler, directory=store))


def serve(store: str, host: str = "127.0.0.1", port: int = 8080) -> None:
    make_server(store, host, port).serve_forever()
