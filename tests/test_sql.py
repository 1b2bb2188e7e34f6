"""The coordinator's SQL subset (cluster/sql.py) and pgwire parameter handling, in process."""

from __future__ import annotations

import pytest

from sleuth.cluster import sql
from sleuth.cluster.pgwire import SQLError, count_params, decode_param, substitute

CAT = {"t": [("k", sql.INT8), ("v", sql.TEXT)]}
ROWS = [(1, "a"), (2, None), (3, "c")]


def select(q, rows=ROWS):
    (p,) = sql.parse(q)
    return p.run({"t": rows}, CAT)


def test_select_where_order_limit_and_aggregates():
    assert select("SELECT k FROM t WHERE k >= 2 ORDER BY k DESC LIMIT 1")[1] == [(3,)]
    assert select("SELECT k FROM t WHERE v IS NULL")[1] == [(2,)]
    assert select("SELECT k FROM t WHERE v = 'a' OR k = 3 ORDER BY k")[1] == [(1,), (3,)]
    assert select("SELECT k FROM t WHERE NOT (k IN (1, 2))")[1] == [(3,)]
    assert select("SELECT k FROM t WHERE k BETWEEN 2 AND 3 ORDER BY k")[1] == [(2,), (3,)]
    cols, rows = select("SELECT count(*), sum(k), max(v), count(v) FROM t")
    assert rows == [(3, 6, "c", 2)] and cols[0] == ("count", sql.INT8)
    assert select("SELECT v || '!' FROM t WHERE k = 1")[1] == [("a!",)]
    # NULL compares to nothing: WHERE v <> 'a' skips the NULL row, as in PostgreSQL
    assert select("SELECT k FROM t WHERE v <> 'a' ORDER BY k")[1] == [(3,)]
    assert select("SELECT CASE WHEN k = 1 THEN -5 ELSE 5 END FROM t")[1] == [(-5,), (5,), (5,)]
    assert select("SELECT coalesce(v, 'z') FROM t ORDER BY k")[1] == [("a",), ("z",), ("c",)]
    assert select("SELECT 7 / 2, 7 % 2, CAST('4' AS bigint) + 1")[1] == [(3, 1, 5)]


def test_update_delete_insert_diffs():
    (u,) = sql.parse("UPDATE t SET k = k + 10, v = 'x' WHERE k = 2")
    assert sql.mutate_diffs(u, CAT["t"], ROWS) == [((2, None), -1), ((12, "x"), 1)]
    (d,) = sql.parse("DELETE FROM t WHERE v IS NOT NULL")
    assert sql.mutate_diffs(d, CAT["t"], ROWS) == [((1, "a"), -1), ((3, "c"), -1)]
    (i,) = sql.parse("INSERT INTO t (v, k) VALUES ('q', '7'), (NULL, 8)")
    assert sql.insert_rows(i, CAT["t"], []) == [(7, "q"), (8, None)]


def test_control_statements_and_splitting():
    stmts = sql.parse("BEGIN; SELECT 'a;b' -- c;\n; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; "
                      "SHOW transaction_isolation; COMMIT")
    assert [type(s).__name__ for s in stmts] == ["Control", "Select", "Control", "Control", "Control"]
    assert stmts[2].value == "serializable" and stmts[3].name == "transaction_isolation"
    assert sql.parse("set transaction_isolation to 'strict serializable'")[0].value == "strict serializable"


@pytest.mark.parametrize("q, code", [
    ("SELEC 1", "42601"), ("SELECT nope FROM t", "42703"), ("SELECT * FROM u", "42P01"),
    ("SELECT k, count(*) FROM t", "42803"), ("SELECT k FROM t GROUP BY k", "0A000"),
    ("SELECT 1 / 0", "22012"),
])
def test_errors_carry_sqlstate(q, code):
    with pytest.raises(SQLError) as e:
        select(q)
    assert e.value.code == code


def test_parameter_substitution_skips_quotes_and_comments():
    q = "SELECT $1, '$1', \"$2\", $2 -- $1\n, $10 /* $1 */"
    params = [5, "it's", None, None, None, None, None, None, None, True]
    assert substitute(q, params) == "SELECT 5, '$1', \"$2\", 'it''s' -- $1\n, TRUE /* $1 */"
    assert count_params("SELECT $1 + $3, '$9'") == 3
    with pytest.raises(SQLError):
        substitute("SELECT $2", [1])
    assert decode_param((258).to_bytes(8, "big", signed=True), 20, 1) == 258
    assert decode_param(b"-3", 23, 0) == -3 and decode_param(b"x", 25, 1) == "x"


@pytest.mark.parametrize("q, want", [
    ("SELECT 7/2", 3), ("SELECT 7 / 2", 3), ("SELECT -7/2", -3), ("SELECT 7/-2", -3),
    ("SELECT 7.0/2", 3.5), ("SELECT 7 % 3", 1), ("SELECT -7 % 2", -1), ("SELECT 2*3-1", 5),
])
def test_arithmetic_has_postgres_semantics(q, want):
    """Integer division truncates toward zero and % takes the dividend's sign (PostgreSQL's
    int8div/int8mod); `7/2` without spaces once failed in the tokenizer and answered XX000."""
    assert select(q)[1] == [(want,)]


@pytest.mark.parametrize("q, code", [
    ("SELECT 7/0", "22012"), ("SELECT 7.0/0", "22012"), ("SELECT 7 % 0", "22012"),
    ("SELECT k FROM t WHERE k/0 = 1", "22012"), ("SELECT 9223372036854775807 + 1", "22003"),
])
def test_arithmetic_errors_carry_sqlstate(q, code):
    with pytest.raises(SQLError) as e:
        select(q)
    assert e.value.code == code


@pytest.mark.parametrize("ddl", [
    "CREATE TABLE x (k bigint PRIMARY KEY, v text)", "CREATE TABLE x (k bigint, v text UNIQUE)",
    "CREATE TABLE x (k bigint, PRIMARY KEY (k))",
    "CREATE TABLE x (k bigint, UNIQUE (k))", "CREATE TABLE x (k bigint DEFAULT 0)",
    "CREATE TABLE x (k bigint CHECK (k > 0))",
])
def test_constraints_are_refused_not_ignored(ddl):
    with pytest.raises(SQLError) as e:
        sql.parse(ddl)
    assert e.value.code == "0A000" and "not supported" in e.value.message


def test_plain_columns_and_explicit_null_are_accepted():
    (c,) = sql.parse("CREATE TABLE x (k bigint NULL, v text)")
    assert c.columns == [("k", sql.INT8), ("v", sql.TEXT)] and c.not_null == []


def test_not_null_is_enforced():
    (c,) = sql.parse("CREATE TABLE t (k bigint NOT NULL, v text)")
    assert c.not_null == ["k"]
    sql.check_not_null("t", CAT["t"], c.not_null, [(1, None)])  # v may be NULL
    for q in ("INSERT INTO t VALUES (NULL, 'a')", "INSERT INTO t (v) VALUES ('a')"):
        (i,) = sql.parse(q)
        with pytest.raises(SQLError) as e:
            sql.check_not_null("t", CAT["t"], c.not_null, sql.insert_rows(i, CAT["t"], []))
        assert e.value.code == "23502" and '"k"' in e.value.message


@pytest.mark.parametrize("q, code", [
    ("SELECT 1 +", "42601"), ("SELECT (", "42601"), ("SELEC 1", "42601"), ("SELECT $1/$", "42601"),
    ("WITH x AS (SELECT 1) SELECT * FROM x", "0A000"), ("SELECT DISTINCT k FROM t", "0A000"),
    ("SELECT k FROM t LIMIT 1 OFFSET 1", "0A000"), ("SELECT 1 UNION SELECT 2", "0A000"),
])
def test_unsupported_syntax_is_a_short_error_not_a_parser_dump(q, code):
    with pytest.raises(SQLError) as e:
        select(q)
    assert e.value.code == code
    assert "sqlglot" not in e.value.message and "<class" not in e.value.message
    assert "\n" not in e.value.message and len(e.value.message) < 200


def test_isolation_levels_are_honoured_or_refused():
    assert sql.isolation("strict serializable") == "strict serializable"
    assert sql.isolation("STRONG_SESSION_SERIALIZABLE") == "strong session serializable"
    assert sql.isolation("read committed") == "serializable"  # stronger than asked, as Materialize
    with pytest.raises(SQLError) as e:
        sql.isolation("snapshot")
    assert e.value.code == "22023"
    (b,) = sql.parse("BEGIN ISOLATION LEVEL SERIALIZABLE, READ ONLY")
    assert b.value == {"isolation": "serializable", "read_only": True}
    (b,) = sql.parse("START TRANSACTION READ ONLY ISOLATION LEVEL STRICT SERIALIZABLE NOT DEFERRABLE")
    assert b.value == {"isolation": "strict serializable", "read_only": True}
    for bad in ("BEGIN ISOLATION LEVEL SNAPSHOT", "SET TRANSACTION ISOLATION LEVEL LINEARIZABLE",
                "BEGIN FOO"):
        with pytest.raises(SQLError) as e:
            sql.parse(bad)
        assert e.value.code == "42601", bad


def test_and_or_follow_sqls_three_valued_truth_table():
    """Kleene's logic, as PostgreSQL's documentation tabulates it: NULL is unknown."""
    values = {"TRUE": True, "FALSE": False, "NULL": None}

    def kleene_and(x, y):
        return False if False in (x, y) else (None if None in (x, y) else True)

    def kleene_or(x, y):
        return True if True in (x, y) else (None if None in (x, y) else False)

    for a, x in values.items():
        for b, y in values.items():
            (row,) = select(f"SELECT ({a} AND {b}), ({a} OR {b}) FROM t LIMIT 1")[1]
            assert row == (kleene_and(x, y), kleene_or(x, y)), (a, b, row)
