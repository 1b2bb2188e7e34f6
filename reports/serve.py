"""`sleuth serve`: the store over HTTP on 127.0.0.1, with a root page listing campaigns and runs, newest first."""

from __future__ import annotations

import functools
import os
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer


def runs(store: str) -> list[tuple[str, str]]:
    """(relative run dir, verdict word) for every run in the store, newest first."""
    from sleuth.base.exits import verdict_word
    from sleuth.records.run import RecordError, Results
    from sleuth.records.store import results_path

    out = []
    for name in os.listdir(store) if os.path.isdir(store) else []:
        d = os.path.join(store, name)
        if name in ("latest", "campaigns") or not os.path.isdir(d):
            continue
        for stamp in os.listdir(d):
            try:
                v = Results.read(results_path(os.path.join(d, stamp))).valid
            except RecordError:  # a run still going, or a file that is not a verdict: listed, unknown
                v = "unknown"
            out.append((stamp, f"{name}/{stamp}", verdict_word(v)))
    return [(rel, verdict) for _, rel, verdict in sorted(out, reverse=True)]


def campaigns(store: str) -> list[tuple[str, dict[str, int]]]:
    """(relative campaign dir, its outcome counts) for every campaign in the store, newest first:
    the counts its page shows, by Spark's verdicts (durability included) where Spark judged it."""
    from sleuth.records.campaign import label_counts, load_record, verdict
    from sleuth.records.run import RecordError
    from sleuth.reports.campaign_report import load_table, verdicts

    out = []
    top = os.path.join(store, "campaigns")
    for name in os.listdir(top) if os.path.isdir(top) else []:
        for stamp in os.listdir(os.path.join(top, name)) if os.path.isdir(os.path.join(top, name)) else []:
            cdir = os.path.join(top, name, stamp)
            try:
                record = load_record(cdir)
                judged = verdicts(load_table(cdir, record))
                labels = [verdict(r, judged)[0] for r in record["runs"]]
            except (OSError, ValueError, KeyError, RecordError):
                continue
            out.append((stamp, f"campaigns/{name}/{stamp}", label_counts(labels)))
    return [(rel, counts) for _, rel, counts in sorted(out, reverse=True)]


def index_page(store: str) -> str:
    """The root page: the campaigns and the runs of the store, styled as the run pages, with the
    verdict words of sleuth.base.exits and the outcome labels of sleuth.campaign.matrix; no empty section."""
    import jinja2

    from sleuth.base.words import noun

    def link(rel: str) -> str:
        return urllib.parse.quote(rel) + "/index.html"

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates")),
                             autoescape=True)
    env.filters["plural"] = lambda word, n: noun(n, word)
    return env.get_template("serve.html.j2").render(
        store=os.path.abspath(store),
        campaigns=[{"href": link(rel), "name": rel.removeprefix("campaigns/"), "n": sum(counts.values()),
                    "counts": counts} for rel, counts in campaigns(store)],
        runs=[{"href": link(rel), "name": rel, "word": word} for rel, word in runs(store)])


class Handler(SimpleHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path in ("/", "/index.html"):
            body = index_page(self.directory)
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
