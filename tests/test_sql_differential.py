"""The reference cluster's SQL against a real PostgreSQL, statement by statement.

A seeded generator writes statements of the subset docs/cluster.md promises (types,
arithmetic, comparisons, NULLs, CASE/COALESCE/casts, WHERE/ORDER BY/LIMIT, whole-table
aggregates, INSERT/UPDATE/DELETE, transactions, errors). Each runs on a real reference
cluster (local runtime) and on a real PostgreSQL, both over pgwire with psycopg; the
answers must agree: the rows (in order only where ORDER BY fixes it), each column's kind
(integer, number, text, boolean) and value (floats to 1e-9), the row counts of writes,
and for an error its SQLSTATE class. Statements outside the subset (joins, GROUP BY,
functions, a write after a read in one transaction, …) must be refused by the cluster:
an error, never an answer.

Where the subset differs from PostgreSQL on purpose, the generator stays inside what the
docs promise: integer literals are small (PostgreSQL types them as 32-bit `integer`, the
cluster as `bigint`), columns are `bigint`/`double precision`, text is lowercase
letters and digits (PostgreSQL's collation and code-point order agree there), and
transactions are read-only or write-only.
"""

from __future__ import annotations

import math
import os
import random
import re
import time
import uuid
from decimal import Decimal

import psycopg
import pytest

from sleuth.cluster.control import Cluster
from sleuth.targets.postgres_server import PostgresServer

pytestmark = pytest.mark.cluster

SEEDS = range(int(os.environ.get("SLEUTH_SQL_FIRST_SEED", "0")),
               int(os.environ.get("SLEUTH_SQL_FIRST_SEED", "0")) + int(os.environ.get("SLEUTH_SQL_SEEDS", "20")))
KIND = {20: "int", 21: "int", 23: "int", 700: "num", 701: "num", 1700: "num",
        25: "text", 1043: "text", 19: "text", 705: "text", 16: "bool"}


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    old = os.environ.get("SLEUTH_HOME")
    os.environ["SLEUTH_HOME"] = str(tmp_path_factory.mktemp("home"))
    c = Cluster(f"q{uuid.uuid4().hex[:7]}")
    pg = PostgresServer()
    try:
        c.up("local", progress=lambda m: None)
        pg.start()
        with psycopg.connect(c.dsn(), autocommit=True, connect_timeout=5) as ref, \
                psycopg.connect(pg.url, autocommit=True, connect_timeout=5) as real:
            yield ref, real
    finally:
        pg.stop()
        if c.exists:
            c.down()
        if old is None:
            os.environ.pop("SLEUTH_HOME", None)
        else:
            os.environ["SLEUTH_HOME"] = old


# -- running and comparing ---------------------------------------------------------------


def answer(conn, text):
    """("ok", kinds, rows, rowcount) or ("error", SQLSTATE)."""
    try:
        cur = conn.execute(text)
    except psycopg.Error as e:
        return ("error", e.sqlstate or "?")
    if cur.description is None:
        return ("ok", None, None, cur.rowcount if cur.rowcount is not None else -1)
    kinds = [KIND.get(d.type_code, str(d.type_code)) for d in cur.description]
    return ("ok", kinds, cur.fetchall(), None)


def _value(v):
    return float(v) if isinstance(v, Decimal) else v


def same_value(a, b):
    a, b = _value(a), _value(b)
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a is b or (a == b and type(a) is type(b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, str) and isinstance(b, str) and a != b:  # a double's text, computed from
        try:                                                     # a decimal literal: numeric there
            return "." in a and "." in b and math.isclose(float(a), float(b), rel_tol=1e-9)
        except ValueError:
            return False
    return type(a) is type(b) and a == b


def same_kind(ref, real):
    """Integer, number, text, boolean. PostgreSQL's numeric (a literal 1.5, sum of bigint)
    and the cluster's float8/bigint are all numbers; an integer must stay an integer."""
    return ref == real or (ref in ("int", "num") and real == "num")


def _ties(rows):
    """Ordered rows (sort key first, k second) with each run of keys equal to 1e-9 put in
    k's order, as the statement's tie-breaker would order exactly equal keys."""
    out, run = [], []
    for r in rows:
        if run and not same_value(run[0][0], r[0]):
            out += sorted(run, key=lambda x: x[1])
            run = []
        run.append(r)
    return out + sorted(run, key=lambda x: x[1])


def differ(ref, real, ordered):
    """Why the two answers differ, or None."""
    if ref[0] != real[0]:
        return f"cluster {ref}, PostgreSQL {real}"
    if ref[0] == "error":
        return None if ref[1][:2] == real[1][:2] else f"SQLSTATE {ref[1]} vs {real[1]}"
    if ref[1] is None or real[1] is None:
        if ref[1] != real[1] or ref[3] != real[3]:
            return f"cluster {ref}, PostgreSQL {real}"
        return None
    if len(ref[1]) != len(real[1]) or not all(map(same_kind, ref[1], real[1])):
        return f"column kinds {ref[1]} vs {real[1]}"
    a, b = ref[2], real[2]
    if ordered:  # keys equal but for float rounding (1.5 is numeric in PostgreSQL) tie on k
        a, b = _ties(a), _ties(b)
    else:
        key = lambda r: [(v is None, str(type(_value(v)) is str), str(_value(v))) for v in r]  # noqa: E731
        a, b = sorted(a, key=key), sorted(b, key=key)
    if len(a) != len(b):
        return f"{len(a)} rows vs {len(b)}: {a[:4]!r} vs {b[:4]!r}"
    wrong = [(x, y) for x, y in zip(a, b) if len(x) != len(y) or not all(map(same_value, x, y))]
    if wrong:
        return f"{len(wrong)} rows differ, e.g. (cluster, PostgreSQL) {wrong[:3]!r}"
    return None


# -- the generator -----------------------------------------------------------------------

COLS = {"i": "int", "f": "float", "s": "text", "b": "bool"}  # and k: bigint NOT NULL, unique


class Gen:
    def __init__(self, rnd: random.Random, table: str | None):
        self.r, self.t = rnd, table

    def choice(self, xs):
        return self.r.choice(xs)

    def lit(self, kind):
        r = self.r
        if r.random() < 0.08:
            return "NULL"
        if kind == "int":
            return str(r.randint(-20, 20))
        if kind == "float":
            return self.choice(["0.5", "1.5", "2.25", "3.0", "0.1", "10.75", "7.0"])
        if kind == "text":
            return "'" + "".join(r.choice("abcxyz019") for _ in range(r.randint(0, 4))) + "'"
        return self.choice(["TRUE", "FALSE"])

    def divisor(self, kind):
        """Never 0 (k is at least 1): a division by zero that only some rows reach is raised
        or not by the order a server evaluates in (docs/cluster.md); the ERRORS divide by 0."""
        r = self.r
        if self.t is not None and r.random() < 0.4:
            return self.choice(["k", "(k + 1)", "CASE WHEN b THEN k ELSE 3 END", "-(k)"])
        return self.choice([str(r.randint(1, 20)), str(-r.randint(1, 20)), "NULL", "(3)"]
                           + ["2.5", "CAST(4 AS double precision)"] * (kind == "float"))

    def col(self, kind):
        if self.t is None:
            return None
        return {"int": ["i", "k"], "float": ["f"], "text": ["s"], "bool": ["b"]}[kind]

    def expr(self, kind, depth=0):
        r = self.r
        cols = self.col(kind)
        if depth >= 3 or r.random() < 0.3:
            return self.choice(cols) if cols and r.random() < 0.6 else self.lit(kind)
        d = depth + 1
        def simple_case():
            k = self.choice(["int", "text"])
            arms = " ".join(f"WHEN {self.expr(k, d)} THEN {self.expr(kind, d)}" for _ in range(r.randint(1, 2)))
            return f"CASE {self.expr(k, d)} {arms} ELSE {self.expr(kind, d)} END"
        common = [lambda: f"CASE WHEN {self.expr('bool', d)} THEN {self.expr(kind, d)} ELSE {self.expr(kind, d)} END",
                  simple_case,
                  lambda: f"COALESCE({self.expr(kind, d)}, {self.expr(kind, d)})",
                  lambda: f"({self.expr(kind, d)})"]
        if kind == "int":
            leaf = lambda: self.choice(cols) if cols and r.random() < 0.5 else self.lit("int")  # noqa: E731
            opts = [lambda: f"({self.expr('int', d)} {self.choice(['+', '-'])} {self.expr('int', d)})",
                    lambda: f"({leaf()} * {leaf()})",
                    lambda: f"({self.expr('int', d)} {self.choice(['/', '%'])} {self.divisor('int')})",
                    lambda: f"-({leaf()})",
                    lambda: f"CAST({self.lit('text') if r.random() < 0.2 else repr(str(r.randint(-9, 99)))} AS bigint)",
                    # float8 columns only: a literal 2.5 is numeric in PostgreSQL, whose cast
                    # rounds halves away from zero; the cluster's decimals are float8 (docs)
                    lambda: f"CAST(f {self.choice(['+', '*', '-'])} {self.expr('int', d)} AS bigint)"
                    if self.t else "CAST(CAST(2.5 AS double precision) AS bigint)"]
        elif kind == "float":
            opts = [lambda: f"({self.expr('float', d)} {self.choice(['+', '-', '*'])} {self.expr(self.choice(['float', 'int']), d)})",
                    lambda: f"({self.expr('float', d)} / {self.divisor('float')})",
                    lambda: f"CAST({self.expr('int', d)} AS double precision)"]
        elif kind == "text":
            opts = [lambda: f"({self.expr('text', d)} || {self.expr(self.choice(['text', 'text', 'int', 'bool']), d)})",
                    lambda: f"CAST({self.expr(self.choice(['int', 'bool', 'text']), d)} AS text)",
                    # a double's text (float8out: 3, not 3.0); not of a decimal literal, numeric there
                    lambda: f"CAST({'f' if self.t else 'CAST(3 AS double precision)'} AS text)",
                    lambda: f"({self.expr('text', d)} || {'f' if self.t else 'CAST(-2 AS double precision)'})"]
        else:
            def cmp():
                k = self.choice(["int", "int", "float", "text", "bool"])
                return f"({self.expr(k, d)} {self.choice(['=', '<>', '<', '<=', '>', '>='])} {self.expr(k, d)})"

            def inlist():
                k = self.choice(["int", "text"])
                items = ", ".join(self.expr(k, d) for _ in range(r.randint(1, 3)))
                return f"({self.expr(k, d)} IN ({items}))"
            opts = [cmp, cmp, inlist,
                    lambda: f"({self.expr('bool', d)} {self.choice(['AND', 'OR'])} {self.expr('bool', d)})",
                    lambda: f"NOT {self.expr('bool', d)}",
                    lambda: f"({self.expr(self.choice(list(COLS.values())), d)} IS {self.choice(['', 'NOT '])}NULL)",
                    lambda: f"({self.expr('int', d)} BETWEEN {self.expr('int', d)} AND {self.expr('int', d)})",
                    lambda: f"NOT ({self.expr('int', d)} BETWEEN {self.expr('int', d)} AND {self.expr('int', d)})",
                    lambda: f"CAST({self.choice(['true', 'false', 't', 'f', 'yes', 'no', 'on', 'off', '1', '0'])!r} AS boolean)"]
        return self.choice(opts + common)()

    def anykind(self):
        return self.choice(["int", "int", "float", "text", "bool"])

    def row(self, k):
        vals = [str(k)] + [self.lit(kind) for kind in COLS.values()]
        return "(" + ", ".join(vals) + ")"


def script(seed: int, table: str):
    """(statement, mode) pairs: mode "same" (both must agree), "ordered" (rows in order),
    "refused" (the cluster must fail it)."""
    r = random.Random(seed)
    g, g0 = Gen(r, table), Gen(r, None)
    t = table
    out = [(f"CREATE TABLE {t} (k bigint NOT NULL, i bigint, f double precision, s text, b boolean)", "same")]
    nk = 0

    def rows(n):
        nonlocal nk
        vals = []
        for _ in range(n):
            nk += 1
            vals.append(g.row(nk))
        return ", ".join(vals)

    out.append((f"INSERT INTO {t} VALUES {rows(8)}", "same"))
    check = (f"SELECT k, i, f, s, b FROM {t} ORDER BY k", "ordered")
    for _ in range(110):
        x = r.random()
        if x < 0.30:
            n = r.randint(1, 3)
            out.append(("SELECT " + ", ".join(g0.expr(g0.anykind()) for _ in range(n)), "same"))
        elif x < 0.50:
            items = ", ".join(g.expr(g.anykind()) for _ in range(r.randint(1, 3)))
            where = f" WHERE {g.expr('bool')}" if r.random() < 0.7 else ""
            if r.random() < 0.5:
                ok = g.choice(["int", "float", "text", "bool"])
                desc = g.choice(["", " DESC", " ASC"])
                nulls = g.choice(["", "", " NULLS FIRST", " NULLS LAST"])
                key = g.expr(ok)
                bare = re.fullmatch(r"[-( ]*(\d+(\.\d+)?|'\w*'|NULL|TRUE|FALSE)[) ]*", key) is not None
                if key.strip("()") in COLS or key.strip("()") == "k":  # a bare name would match an
                    key = f"{t}.{key.strip('()')}"                          # output column's name
                limit = f" LIMIT {r.randint(0, 5)}" if r.random() < 0.3 else ""
                out.append((f"SELECT {key}, k, {items} FROM {t}{where} ORDER BY {key}{desc}{nulls}, {t}.k{limit}",
                            "refused" if bare else "ordered"))
            else:
                out.append((f"SELECT {items} FROM {t}{where}", "same"))
        elif x < 0.62:
            aggs = []
            for _ in range(r.randint(1, 3)):
                a = g.choice(["count(*)", "count", "sum", "min", "max"])
                kind = "int" if a == "sum" else g.choice(["int", "float", "text"])
                aggs.append(a if a == "count(*)" else f"{a}({g.expr(kind)})")
            where = f" WHERE {g.expr('bool')}" if r.random() < 0.6 else ""
            out.append((f"SELECT {', '.join(aggs)} FROM {t}{where}", "same"))
        elif x < 0.72:
            if r.random() < 0.3:
                out.append((f"UPDATE {t} SET i = {g.expr('int')}, s = {g.expr('text')} WHERE {g.expr('bool')}",
                            "same"))
            elif r.random() < 0.5:
                out.append((f"UPDATE {t} SET {g.choice(['f', 'b'])} = "
                            f"{g.expr('float') if r.random() < 0.5 else g.expr('bool')} WHERE {g.expr('bool')}",
                            "same"))
            else:
                out.append((f"DELETE FROM {t} WHERE {g.expr('bool')}", "same"))
            out.append(check)
        elif x < 0.80:
            if r.random() < 0.5:
                out.append((f"INSERT INTO {t} VALUES {rows(r.randint(1, 3))}", "same"))
            else:
                out.append((f"INSERT INTO {t} (k, i, s) SELECT k + {nk}, {g.expr('int')}, {g.expr('text')} "
                            f"FROM {t} WHERE {g.expr('bool')}", "same"))
                nk *= 2  # every k at most nk: k stays unique
            out.append(check)
        elif x < 0.86:  # a transaction: write-only or read-only, committed or rolled back
            out.append(("BEGIN", "same"))
            if r.random() < 0.5:
                for _ in range(r.randint(1, 3)):
                    out.append((f"INSERT INTO {t} VALUES {rows(1)}", "same"))
                if r.random() < 0.3:  # Materialize's rule: no read after a write (25000)
                    out.append((f"SELECT count(*) FROM {t}", "refused"))
            else:
                for _ in range(r.randint(1, 3)):
                    out.append((f"SELECT count(*), sum(i / {g.lit('int')}) FROM {t}", "same"))
                if r.random() < 0.3:  # no write after a read (25006), and UPDATE/DELETE only outside
                    out.append((g.choice([f"INSERT INTO {t} VALUES {rows(1)}", f"UPDATE {t} SET i = 1",
                                          f"DELETE FROM {t} WHERE k = 1"]), "refused"))
            if r.random() < 0.25 and out[-1][1] != "refused":  # a failure aborts it on both (25P02 after)
                fail = "SELECT 1 / 0" if out[-1][0].startswith("SELECT") else f"INSERT INTO {t} (k) VALUES (1 / 0)"
                out += [(fail, "same"), (f"SELECT count(*) FROM {t}", "same")]
            # after a refused write PostgreSQL (which did not run it) would commit what the
            # cluster's aborted transaction did not: end those with ROLLBACK
            out.append(("ROLLBACK" if out[-1][1] == "refused" else g.choice(["COMMIT", "ROLLBACK"]), "same"))
            out.append(check)
        elif x < 0.93:
            out.append((g.choice(ERRORS).format(t=t, e=g.expr("int")), "same"))
        else:
            out.append((g.choice(REFUSED).format(t=t, e=g.expr("int")), "refused"))
    out.append((f"DROP TABLE {t}", "same"))
    return out


# statements of the subset that fail, on both
ERRORS = [
    "SELECT {e} / 0", "SELECT k % 0 FROM {t}", "SELECT nope FROM {t}", "SELECT * FROM nowhere_{t}",
    "SELEC 1", "SELECT 1 +", "SELECT k, count(*) FROM {t}", "INSERT INTO {t} (k) VALUES (NULL)",
    "INSERT INTO {t} (i) VALUES (1)", "UPDATE {t} SET k = NULL WHERE i > 0", "UPDATE {t} SET nope = 1",
    "CREATE TABLE {t} (k bigint)", "DROP TABLE nowhere_{t}", "SELECT i * 9223372036854775807 FROM {t}",
    "SELECT 9223372036854775807 + {e}", "INSERT INTO {t} (k, nope) VALUES (1, 2)",
    "INSERT INTO {t} (k, i) VALUES (1, 2, 3)", "SELECT CAST('abc' AS bigint)", "INSERT INTO {t} (k, i) VALUES (1, 'x')",
    "SELECT 1.5 / 0", "SELECT count(*) FROM {t} LIMIT 0",  # (the last is no error: LIMIT on an aggregate)
]
# statements outside the subset: the cluster must refuse them
REFUSED = [
    "SELECT i, count(*) FROM {t} GROUP BY i", "SELECT DISTINCT i FROM {t}", "SELECT k FROM {t} OFFSET 1",
    "SELECT a.k FROM {t} a JOIN {t} b ON a.k = b.k", "SELECT k FROM {t} UNION SELECT i FROM {t}",
    "SELECT k FROM {t} WHERE i IN (SELECT i FROM {t})", "WITH x AS (SELECT 1) SELECT * FROM x",
    "SELECT avg(i) FROM {t}", "SELECT abs({e})", "SELECT upper(s) FROM {t}", "SELECT s FROM {t} WHERE s LIKE 'a%'",
    "SELECT k FROM {t} FOR UPDATE", "CREATE INDEX ON {t} (k)", "ALTER TABLE {t} ADD COLUMN z bigint",
    "CREATE TABLE p_{t} (k bigint PRIMARY KEY)", "CREATE TABLE p_{t} (k bigint DEFAULT 1)",
    "SELECT count(DISTINCT i) FROM {t}", "SELECT count(*) + 1 FROM {t}", "TRUNCATE {t}",
    "SELECT i, sum(i) OVER () FROM {t}", "SELECT now()", "COPY {t} TO STDOUT",
    "SELECT count(*) FROM {t} ORDER BY count(*)", "SELECT k FROM {t} ORDER BY 1", "SELECT *, k FROM {t}",
    "SELECT k FROM {t} WHERE k BETWEEN SYMMETRIC 3 AND 1",
]


# -- the tests ---------------------------------------------------------------------------


def run_script(ref, real, statements):
    diffs, n, last = [], 0, ""
    for text, mode in statements:
        n += 1
        a = answer(ref, text)
        if mode == "refused":
            if a[0] != "error":
                diffs.append(f"{text}\n    cluster answered {a} (outside the subset: must be refused)")
            continue
        b = answer(real, text)
        why = differ(a, b, ordered=mode == "ordered")
        if why:
            diffs.append(f"{text}\n    {why}")
            if text.startswith("SELECT k, i, f, s, b FROM"):  # the tables differ: all after would too
                diffs.append(f"  after {last}")
                break
        last = text
        # a failed statement leaves either side's transaction aborted: end both the same way
    return diffs, n


@pytest.mark.parametrize("seed", SEEDS)
def test_the_cluster_answers_as_postgresql(engines, seed):
    ref, real = engines
    t0 = time.monotonic()
    diffs, n = run_script(ref, real, script(seed, f"d{seed}_{uuid.uuid4().hex[:4]}"))
    assert not diffs, f"{len(diffs)} of {n} statements differ (seed {seed}, {time.monotonic() - t0:.1f} s):\n" \
                      + "\n".join(diffs[:15])


def test_psycopgs_statement_cache_evicting_with_deallocate(engines):
    """psycopg prepares a statement run often (5 times by default) and DEALLOCATEs the oldest
    once it holds 100: the cluster refused DEALLOCATE (0A000), failing whatever statement came
    next. Here with a cache of 2, every statement prepared at once, against both servers."""
    ref, real = engines
    for conn in (ref, real):
        with psycopg.connect(conn.info.dsn, autocommit=True, prepare_threshold=0, connect_timeout=5) as c:
            c.prepared_max = 2
            for n in range(6):
                assert c.execute(f"SELECT {n} + 1, 'x'").fetchone() == (n + 1, "x")
            assert [answer(c, q) for q in ("DEALLOCATE ALL", "DEALLOCATE nope_i49b")] == \
                [("ok", None, None, -1), ("error", "26000")]
