"""The coordinator's SQL subset: parsing (sqlglot) and evaluation over row lists.

`parse(text)` splits a query string into statements and turns each into a
small plan object. Control statements (BEGIN, COMMIT, SET, SHOW, …) are
matched directly; everything else goes through sqlglot's PostgreSQL dialect.
Expressions compile to Python closures over a row tuple, once per statement.

Supported: CREATE TABLE (NOT NULL enforced; other constraints refused),
DROP TABLE, INSERT … VALUES / INSERT … SELECT, SELECT with WHERE, ORDER BY,
LIMIT and whole-table aggregates (count, sum, min, max), UPDATE … SET col =
expr WHERE …, DELETE … WHERE …; expressions with arithmetic (PostgreSQL's:
integer division truncates, 22012 on division by zero, 22003 past 64 bits),
`||`, comparisons, AND/OR/NOT, IN, IS [NOT] NULL, BETWEEN, CASE, COALESCE,
casts, typed and type-checked as PostgreSQL does before any row is read
(`type_of`). Anything else is refused with SQLSTATE 0A000 (or 42601 for a syntax
error, in PostgreSQL's short form), never guessed at or ignored. The isolation
levels a session may ask for are named here too (`ISOLATION`). User guide:
docs/cluster.md.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from sleuth.cluster.pgwire import SQLError

INT8, TEXT, BOOL, FLOAT8 = 20, 25, 16, 701
TYPES = {"int": INT8, "integer": INT8, "bigint": INT8, "smallint": INT8, "int2": INT8,
         "int4": INT8, "int8": INT8, "serial": INT8, "text": TEXT, "varchar": TEXT,
         "char": TEXT, "string": TEXT, "bool": BOOL, "boolean": BOOL, "float": FLOAT8,
         "double": FLOAT8, "double precision": FLOAT8, "float8": FLOAT8, "real": FLOAT8,
         "numeric": FLOAT8, "decimal": FLOAT8}


# -- plans ----------------------------------------------------------------------


@dataclass
class Control:
    """BEGIN / COMMIT / ROLLBACK / SET / SHOW."""
    kind: str
    name: str = ""
    value: Any = None


@dataclass
class CreateTable:
    table: str
    columns: list[tuple[str, int]]
    if_not_exists: bool = False
    not_null: list[str] = field(default_factory=list)  # enforced on every row written


@dataclass
class DropTable:
    table: str
    if_exists: bool = False


@dataclass
class Select:
    tables: list[str]  # read (empty for SELECT without FROM)
    run: Callable[[dict[str, list[tuple]], dict], tuple[list[tuple[str, int]], list[tuple]]]


@dataclass
class Insert:
    table: str
    columns: list[str] | None
    values: list[list[exp.Expression]] | None = None  # INSERT … VALUES (constant rows)
    select: Select | None = None  # INSERT … SELECT (a read-then-write)


@dataclass
class Mutate:
    """UPDATE or DELETE: a read-then-write over one table."""
    kind: str
    table: str
    where: exp.Expression | None
    assignments: list[tuple[str, exp.Expression]] = field(default_factory=list)


# -- isolation levels ------------------------------------------------------------------

# The levels a session may ask for, by every name a client may use, and the level it gets.
# PostgreSQL's weaker levels run as serializable, as Materialize maps them: a stronger
# guarantee honours a weaker request, and `SHOW transaction_isolation` says what runs.
ISOLATION = {"strict serializable": "strict serializable",
             "serializable": "serializable",
             "strong session serializable": "strong session serializable",
             "read committed": "serializable", "repeatable read": "serializable",
             "read uncommitted": "serializable"}


def isolation(value: Any, code: str = "22023") -> str:
    """The level a requested isolation runs at; anything else is an error (never ignored)."""
    level = ISOLATION.get(" ".join(str(value).lower().replace("_", " ").replace("-", " ").split()))
    if level is None:
        raise SQLError(code, f'invalid value for parameter "transaction_isolation": "{value}"; '
                             f"supported: {', '.join(sorted(set(ISOLATION.values())))}")
    return level


_LEVEL = r"strict\s+serializable|strong\s+session\s+serializable|serializable|repeatable\s+read|read\s+committed|read\s+uncommitted|\S+?"
_BEGIN_MODE = re.compile(rf"(?is)(isolation\s+level\s+(?P<level>{_LEVEL})|(?P<ro>read\s+only)|read\s+write"
                         r"|(not\s+)?deferrable)(\s*,\s*|\s+|$)")


def begin_options(rest: str) -> dict:
    """BEGIN's transaction modes (PostgreSQL's grammar): isolation level, READ ONLY/WRITE, DEFERRABLE."""
    out: dict = {"isolation": None, "read_only": False}
    rest = rest.strip()
    while rest:
        m = _BEGIN_MODE.match(rest)
        if m is None or not m.group(0):
            raise SQLError("42601", f'syntax error at or near "{rest.split()[0]}"')
        if m.group("level"):
            out["isolation"] = isolation(m.group("level"), "42601")
        out["read_only"] = out["read_only"] or bool(m.group("ro"))
        rest = rest[m.end():]
    return out


# -- statement splitting and control statements -------------------------------------


def split(text: str) -> list[str]:
    """Split on semicolons outside quotes and comments."""
    out, start, i, n = [], 0, 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            j = text.find(c, i + 1)
            while j != -1 and j + 1 < n and text[j + 1] == c:  # doubled quote
                j = text.find(c, j + 2)
            i = n if j == -1 else j + 1
            continue
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j == -1 else j + 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j == -1 else j + 2
            continue
        if c == ";":
            out.append(text[start:i])
            start = i + 1
        i += 1
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


_CONTROL = [
    (re.compile(r"(?is)^(begin|start\s+transaction)(\s+(work|transaction))?(?P<rest>.*)$"), "begin"),
    (re.compile(r"(?is)^(commit|end)(\s+(work|transaction))?$"), "commit"),
    (re.compile(r"(?is)^(rollback|abort)(\s+(work|transaction))?$"), "rollback"),
    (re.compile(r"(?is)^set\s+(session\s+characteristics\s+as\s+)?transaction\s+isolation\s+level\s+"
                r"(?P<value>.+)$"), "set-isolation"),
    (re.compile(r"(?is)^set\s+(session\s+|local\s+)?(?P<name>[a-z_][a-z0-9_.]*)\s*(=|\s+to\s+)\s*"
                r"(?P<value>.+)$"), "set"),
    (re.compile(r"(?is)^show\s+(?P<name>[a-z_][a-z0-9_. ]*)$"), "show"),
]


def _unquote(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        v = v[1:-1]
    return v


def _control(text: str) -> Control | None:
    for rx, kind in _CONTROL:
        m = rx.match(text)
        if not m:
            continue
        if kind == "begin":
            return Control("begin", value=begin_options(m.group("rest")))
        if kind == "set-isolation":
            return Control("set", "transaction_isolation", isolation(_unquote(m.group("value")), "42601"))
        if kind == "set":
            return Control("set", m.group("name").lower(), _unquote(m.group("value")))
        if kind == "show":
            return Control("show", " ".join(m.group("name").lower().split()))
        return Control(kind)
    return None


def parse(text: str) -> list[Any]:
    """Every statement of a query string, planned."""
    return [parse_one(s) for s in split(text)]


_LITERAL = re.compile(r"'(?:[^']|'')*'|(?<![\w$.])\d+(?:\.\d+)?(?![\w.])")


@functools.lru_cache(maxsize=2048)
def _template(text: str) -> exp.Expression:
    try:
        tree = sqlglot.parse_one(text, read="postgres")
    except sqlglot.errors.SqlglotError as e:
        raise syntax_error(e) from None
    if tree is None:
        raise SQLError("42601", "syntax error: empty statement")
    return tree


def syntax_error(e: Exception) -> SQLError:
    """PostgreSQL's short form ('syntax error at or near "x"'), not the parser's internals."""
    where = next((d for d in getattr(e, "errors", ()) if d.get("highlight")), None)
    if where is None:
        return SQLError("42601", "syntax error")
    return SQLError("42601", f'syntax error at or near "{where["highlight"]}" '
                             f'(line {where.get("line", 1)}, column {where.get("col", 0)})')


def _tree(text: str) -> exp.Expression:
    """Parse, reusing the tree of a statement that differed only in its literals.

    Literals become $n parameters, the template is parsed once (sqlglot is the
    costly part of a statement) and the literals are put back into a copy.
    """
    if "$" in text or "--" in text or "/*" in text or '"' in text:
        return _template(text)
    values: list[str] = []

    def mark(m: re.Match) -> str:
        values.append(m.group(0))
        return f"${len(values)}"

    template = _LITERAL.sub(mark, text)
    if not values:
        return _template(text)
    try:
        tree = _template(template)
    except SQLError:
        return _template(text)
    if not isinstance(tree, (exp.Select, exp.Insert, exp.Update, exp.Delete)):
        return _template(text)  # only plain DML is worth the detour
    tree = tree.copy()

    def put_back(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Parameter):
            v = values[int(node.name) - 1]
            return exp.Literal.string(v[1:-1].replace("''", "'")) if v.startswith("'") else exp.Literal.number(v)
        return node

    return tree.transform(put_back, copy=False)


def parse_one(text: str) -> Any:
    ctl = _control(text)
    if ctl is not None:
        return ctl
    try:
        return _plan(text, _tree(text))
    except sqlglot.errors.SqlglotError as e:
        raise syntax_error(e) from None


def _plan(text: str, tree: exp.Expression) -> Any:
    if isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "TABLE":
        schema = tree.this
        if not isinstance(schema, exp.Schema):
            raise SQLError("0A000", "CREATE TABLE needs a column list")
        cols, not_null = [], []
        for cd in schema.expressions:
            if not isinstance(cd, exp.ColumnDef):
                raise SQLError("0A000", f"table constraint {_constraint_name(cd)} is not supported: "
                                        f"{REFUSED_CONSTRAINT}")
            for c in cd.args.get("constraints") or ():
                kind = c.args.get("kind")
                if isinstance(kind, exp.NotNullColumnConstraint):
                    if not kind.args.get("allow_null"):  # NOT NULL (a bare NULL: what all are)
                        not_null.append(cd.name.lower())
                    continue
                raise SQLError("0A000", f"column constraint {_constraint_name(kind)} is not supported: "
                                        f"{REFUSED_CONSTRAINT}")
            kind = cd.args.get("kind")
            tname = kind.this.name.lower() if kind is not None else "text"
            tname = {"bigint": "bigint", "int": "int", "text": "text", "varchar": "varchar",
                     "boolean": "boolean", "double": "double"}.get(tname, tname)
            oid = TYPES.get(tname) or TYPES.get(kind.sql(dialect="postgres").split("(")[0].lower()
                                                 if kind is not None else "text")
            if oid is None:
                raise SQLError("0A000", f"column type {kind.sql()} is not supported")
            cols.append((cd.name.lower(), oid))
        return CreateTable(_table_name(schema.this), cols, bool(tree.args.get("exists")), not_null)
    if isinstance(tree, exp.Drop) and str(tree.args.get("kind", "")).upper() == "TABLE":
        tables = tree.args.get("tables") or [tree.this]
        return DropTable(_table_name(tables[0]), bool(tree.args.get("exists")))
    if isinstance(tree, exp.Select):
        return plan_select(tree)
    if isinstance(tree, exp.Insert):
        target = tree.this
        columns = None
        if isinstance(target, exp.Schema):
            columns = [c.name.lower() for c in target.expressions]
            target = target.this
        src = tree.expression
        if isinstance(src, exp.Values):
            rows = [list(t.expressions) if isinstance(t, exp.Tuple) else [t] for t in src.expressions]
            return Insert(_table_name(target), columns, values=rows)
        if isinstance(src, exp.Select):
            return Insert(_table_name(target), columns, select=plan_select(src))
        raise SQLError("0A000", "INSERT supports VALUES and SELECT only")
    if isinstance(tree, exp.Update):
        assigns = []
        for a in tree.expressions:
            if not isinstance(a, exp.EQ) or not isinstance(a.this, exp.Column):
                raise SQLError("0A000", f"unsupported assignment {a.sql()}")
            assigns.append((a.this.name.lower(), a.expression))
        if tree.args.get("from") or tree.args.get("from_"):
            raise SQLError("0A000", "UPDATE … FROM is not supported")
        return Mutate("update", _table_name(tree.this), _where(tree), assigns)
    if isinstance(tree, exp.Delete):
        return Mutate("delete", _table_name(tree.this), _where(tree))
    if isinstance(tree, exp.SetOperation):
        raise SQLError("0A000", f"{type(tree).__name__.upper()} is not supported")
    raise SQLError("0A000", f"statement not supported: {text.split()[0].upper()}")


# NOT NULL is enforced (every row written is checked, `check_not_null`); the other
# constraints are refused rather than accepted and ignored: a schema that says PRIMARY KEY
# promises the client that a duplicate insert fails, and checking that under optimistic
# concurrency (every insert a read-then-write of the whole table) is work this cluster does
# not do. The workloads need none of them.
REFUSED_CONSTRAINT = "the reference cluster enforces only NOT NULL and refuses the others " \
                     "(PRIMARY KEY, UNIQUE, CHECK, REFERENCES, DEFAULT) rather than ignore them"


def _constraint_name(c: exp.Expression | None) -> str:
    if c is None:
        return "?"
    return c.sql(dialect="postgres").split("(")[0].strip().upper() or type(c).__name__


def _table_name(t: exp.Expression) -> str:
    if not isinstance(t, exp.Table):
        raise SQLError("0A000", f"expected a table name, got {t.sql()}")
    return t.name.lower()


def _where(tree: exp.Expression) -> exp.Expression | None:
    w = tree.args.get("where")
    return w.this if w is not None else None


# -- expressions --------------------------------------------------------------------


class Scope:
    """Column name -> position in the row tuples of one table."""

    def __init__(self, columns: list[tuple[str, int]]):
        self.columns = columns
        self.index = {name: i for i, (name, _) in enumerate(columns)}


def _num(v: Any) -> Any:
    """A number from an operand; text (an untyped literal such as '7') is read as PostgreSQL
    reads it (22P02 when it is no number), and a boolean is no number (42883)."""
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            try:
                return float(v)
            except ValueError:
                raise SQLError("22P02", f'invalid input syntax for type numeric: "{v}"') from None
    if isinstance(v, bool):
        raise SQLError("42883", "operator does not exist: boolean and a number")
    return v


INT8_MIN, INT8_MAX = -(1 << 63), (1 << 63) - 1


def _arith(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def f(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        v = op(_num(a), _num(b))
        if isinstance(v, int) and not isinstance(v, bool) and not INT8_MIN <= v <= INT8_MAX:
            raise SQLError("22003", "bigint out of range")
        return v
    return f


def _int_div(a: int, b: int) -> int:
    """PostgreSQL's integer division truncates toward zero (-7 / 2 = -3), unlike Python's //."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _div(a: Any, b: Any) -> Any:
    if b == 0:
        raise SQLError("22012", "division by zero")
    return _int_div(a, b) if isinstance(a, int) and isinstance(b, int) else a / b


def _mod(a: Any, b: Any) -> Any:
    """The remainder takes the dividend's sign, as in PostgreSQL (-7 % 2 = -1)."""
    if b == 0:
        raise SQLError("22012", "division by zero")
    if isinstance(a, int) and isinstance(b, int):
        return a - b * _int_div(a, b)
    return math.fmod(a, b)


def _cmp(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    def f(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        if isinstance(a, bool) != isinstance(b, bool):
            if isinstance(a, str) or isinstance(b, str):  # an untyped literal meets a boolean
                a, b = to_bool(a), to_bool(b)
            else:
                raise SQLError("42883", "operator does not exist: boolean compared with a non-boolean")
        if isinstance(a, str) != isinstance(b, str):
            a, b = (_num(a), _num(b))
        return op(a, b)
    return f


BINARY = {
    exp.Add: _arith(lambda a, b: a + b), exp.Sub: _arith(lambda a, b: a - b),
    exp.Mul: _arith(lambda a, b: a * b), exp.Div: _arith(_div), exp.Mod: _arith(_mod),
    exp.EQ: _cmp(lambda a, b: a == b), exp.NEQ: _cmp(lambda a, b: a != b),
    exp.GT: _cmp(lambda a, b: a > b), exp.GTE: _cmp(lambda a, b: a >= b),
    exp.LT: _cmp(lambda a, b: a < b), exp.LTE: _cmp(lambda a, b: a <= b),
    exp.DPipe: lambda a, b: None if a is None or b is None else _text(a) + _text(b),
}


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return float_text(v)
    return str(v)


def float_text(v: float) -> str:
    """float8's text as PostgreSQL writes it: the shortest exact digits, `3` not `3.0`."""
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if math.isnan(v):
        return "NaN"
    r = repr(v)
    return r[:-2] if r.endswith(".0") else r


def to_int8(v: Any) -> int:
    """A value as bigint, by PostgreSQL's casts: a float rounds to the nearest (halves to
    even, as float8's rint), text must spell an integer, a boolean is no bigint."""
    if isinstance(v, bool):
        raise SQLError("42846", "cannot cast type boolean to bigint")
    if isinstance(v, str):
        try:
            v = int(v.strip())
        except ValueError:
            raise SQLError("22P02", f'invalid input syntax for type bigint: "{v}"') from None
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise SQLError("22003", "bigint out of range")
        v = round(v)
    if not INT8_MIN <= v <= INT8_MAX:
        raise SQLError("22003", "bigint out of range")
    return v


def to_float8(v: Any) -> float:
    if isinstance(v, bool):
        raise SQLError("42846", "cannot cast type boolean to double precision")
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            raise SQLError("22P02", f'invalid input syntax for type double precision: "{v}"') from None
    return float(v)


_BOOL_TEXT = {"t": True, "true": True, "y": True, "yes": True, "on": True, "1": True,
              "f": False, "false": False, "n": False, "no": False, "off": False, "0": False}


def to_bool(v: Any) -> bool:
    """PostgreSQL's boolean input ('yes', 'on', 'f', …; 22P02 for anything else); an integer
    casts as non-zero, a float does not cast (42846)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        b = _BOOL_TEXT.get(v.strip().lower())
        if b is None:
            raise SQLError("22P02", f'invalid input syntax for type boolean: "{v}"')
        return b
    if isinstance(v, int):
        return v != 0
    raise SQLError("42846", "cannot cast type double precision to boolean")


_STRICT = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT,
           exp.LTE, exp.DPipe, exp.Neg, exp.Cast, exp.TryCast)


def null_constant(e: exp.Expression) -> bool:
    """Is e NULL whatever the row: NULL itself, or a strict operator over one (`x / (NULL * k)`)?
    PostgreSQL folds these to NULL when it plans, and never evaluates their other operands."""
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.Null):
        return True
    if isinstance(e, _STRICT):
        return any(null_constant(x) for x in (e.this, e.args.get("expression")) if x is not None)
    if isinstance(e, exp.Between):
        return null_constant(e.this)
    return False


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """WHERE's top-level AND terms, a BETWEEN as its two comparisons (as PostgreSQL plans it)."""
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    if isinstance(e, exp.Between) and not e.args.get("symmetric"):
        return [exp.GTE(this=e.this, expression=e.args["low"]), exp.LTE(this=e.this, expression=e.args["high"])]
    return [e]


def compile_where(where: exp.Expression, scope: Scope | None) -> Callable[[tuple], Any]:
    """WHERE's predicate, true or not. A term that is constant (no column, or NULL by
    `null_constant`) is evaluated once, first, as PostgreSQL's one-time filter: when it is not
    true, no row is read and nothing else in WHERE is evaluated (`WHERE x / 0 = 1 AND NULL`
    is no error)."""
    terms = _conjuncts(where)
    for term in terms:
        if null_constant(term) or _constant(term):
            if compile_expr(term, scope)(()) is not True:
                return lambda row: False
    # a row is out at its first term that is not true (PostgreSQL's qual list: NULL stops it too)
    preds = [compile_expr(t, scope) for t in terms]
    return lambda row: all(p(row) is True for p in preds)


def _constant(e: exp.Expression) -> bool:
    """Is e the same for every row, once PostgreSQL's planner has dropped what cannot run
    (a CASE arm behind a constant condition, COALESCE's arguments after a constant)?"""
    if isinstance(e, (exp.Column, exp.AggFunc, exp.Star)):
        return False
    if isinstance(e, exp.Case) and e.this is None:
        for i in e.args["ifs"]:
            if not _constant(i.this):
                return False
            if compile_expr(i.this, None)(()) is True:
                return _constant(i.args["true"])
        return e.args.get("default") is None or _constant(e.args["default"])
    if isinstance(e, exp.Coalesce):
        for x in (e.this, *e.expressions):
            if not _constant(x):
                return False
            if compile_expr(x, None)(()) is not None:
                return True
        return True
    if isinstance(e, (exp.And, exp.Or)) and _constant(e.this) and \
            compile_expr(e.this, None)(()) is isinstance(e, exp.Or):
        return True
    return all(_constant(x) for x in e.iter_expressions())


def compile_expr(e: exp.Expression, scope: Scope | None) -> Callable[[tuple], Any]:
    """A closure computing e over a row tuple of `scope`'s table.

    As PostgreSQL's planner does, a subexpression over no column is computed once, now,
    whatever the rows (`SELECT 7.0 / 0 FROM t` fails on an empty table too); a strict
    operator with a NULL operand is NULL without computing the other; and a constant that
    decides AND, OR, COALESCE or a CASE arm leaves the rest uncompiled (PostgreSQL drops it).
    """
    f = _compile(e, scope)
    if not isinstance(e, (exp.Literal, exp.Null, exp.Boolean)) and _constant(e):
        v = f(())
        return lambda row: v
    return f


def _compile(e: exp.Expression, scope: Scope | None) -> Callable[[tuple], Any]:
    if isinstance(e, exp.Paren):
        return compile_expr(e.this, scope)
    if isinstance(e, exp.Literal):
        v = e.this if e.is_string else (int(e.this) if re.fullmatch(r"-?\d+", e.this) else float(e.this))
        return lambda row: v
    if isinstance(e, exp.Null):
        return lambda row: None
    if isinstance(e, exp.Boolean):
        b = bool(e.this)
        return lambda row: b
    if isinstance(e, exp.Column):
        name = e.name.lower()
        if scope is None or name not in scope.index:
            raise SQLError("42703", f'column "{name}" does not exist')
        i = scope.index[name]
        return lambda row: row[i]
    if type(e) in BINARY:
        op, a, b = BINARY[type(e)], compile_expr(e.this, scope), compile_expr(e.expression, scope)
        if null_constant(e):
            return lambda row: None
        return lambda row: op(a(row), b(row))
    if isinstance(e, exp.Neg):
        a = compile_expr(e.this, scope)
        neg = _arith(lambda x, y: -x)
        return lambda row: neg(a(row), 0)
    if isinstance(e, (exp.And, exp.Or)):
        # SQL's three-valued AND and OR are duals: one side equal to `decisive` (False for
        # AND, True for OR) decides alone; otherwise NULL if either side is NULL
        decisive = isinstance(e, exp.Or)
        a = compile_expr(e.this, scope)
        if _constant(e.this) and a(()) is decisive:
            return lambda row: decisive
        b = compile_expr(e.expression, scope)

        def junction(row: tuple) -> Any:
            x = a(row)
            if x is decisive:
                return decisive
            y = b(row)
            return decisive if y is decisive else (None if x is None or y is None else not decisive)
        return junction
    if isinstance(e, exp.Not):
        a = compile_expr(e.this, scope)
        return lambda row: None if (v := a(row)) is None else not v
    if isinstance(e, exp.Is):
        a = compile_expr(e.this, scope)
        neg = bool(e.args.get("negate"))
        if isinstance(e.expression, exp.Null):
            return lambda row: (a(row) is None) != neg
        b = compile_expr(e.expression, scope)
        return lambda row: (a(row) == b(row)) != neg
    if isinstance(e, exp.In):
        if e.args.get("negate"):
            raise SQLError("0A000", "NOT IN written as negate is not supported; use NOT (x IN …)")
        if e.args.get("query") is not None:
            raise SQLError("0A000", "IN (subquery) is not supported")
        a = compile_expr(e.this, scope)
        items = [compile_expr(x, scope) for x in e.expressions]
        eq = BINARY[exp.EQ]

        def within(row: tuple) -> Any:  # x IN (a, b) is x = a OR x = b: NULL if none matched and one was NULL
            v = a(row)
            if v is None:
                return None
            seen_null = False
            for f in items:
                m = eq(v, f(row))
                if m is True:
                    return True
                seen_null = seen_null or m is None
            return None if seen_null else False
        return within
    if isinstance(e, exp.Between):
        a, lo, hi = (compile_expr(e.this, scope), compile_expr(e.args["low"], scope),
                     compile_expr(e.args["high"], scope))
        if e.args.get("symmetric"):
            raise SQLError("0A000", "BETWEEN SYMMETRIC is not supported")
        ge, le = BINARY[exp.GTE], BINARY[exp.LTE]

        if null_constant(e):
            return lambda row: None

        def between(row: tuple) -> Any:  # x >= lo AND x <= hi, three-valued
            v = a(row)
            x = ge(v, lo(row))
            if x is False:
                return False
            y = le(v, hi(row))
            return False if y is False else (None if x is None or y is None else True)
        return between
    if isinstance(e, exp.Case):
        subject = compile_expr(e.this, scope) if e.this is not None else None
        ifs, last = [], e.args.get("default")
        for i in e.args["ifs"]:
            cond = compile_expr(i.this, scope)
            if subject is None and _constant(i.this):  # PostgreSQL drops an arm that cannot be
                if cond(()) is True:                     # taken, and all after one that must be
                    last = i.args["true"]
                    break
                continue
            ifs.append((cond, compile_expr(i.args["true"], scope)))
        default = compile_expr(last, scope) if last is not None else (lambda row: None)

        def case(row: tuple) -> Any:
            s = subject(row) if subject else None
            for cond, val in ifs:
                c = cond(row)
                if (s is not None and BINARY[exp.EQ](s, c) is True) if subject else c is True:
                    return val(row)
            return default(row)
        return case
    if isinstance(e, exp.Coalesce):
        parts = []
        for x in (e.this, *e.expressions):
            parts.append(compile_expr(x, scope))
            if _constant(x) and parts[-1](()) is not None:
                break  # PostgreSQL drops the arguments after a constant that is not NULL
        return lambda row: next((v for f in parts if (v := f(row)) is not None), None)
    if isinstance(e, (exp.Cast, exp.TryCast)):
        a = compile_expr(e.this, scope)
        to = TYPES.get(e.to.this.name.lower() if hasattr(e.to.this, "name") else "", None) \
            or TYPES.get(e.to.sql(dialect="postgres").split("(")[0].lower())
        conv = {INT8: to_int8, TEXT: _text, BOOL: to_bool, FLOAT8: to_float8}.get(to)
        if conv is None:
            raise SQLError("0A000", f"cast to {e.to.sql()} is not supported")
        return lambda row: None if (v := a(row)) is None else conv(v)
    raise SQLError("0A000", f"expression not supported: {e.sql(dialect='postgres')}")


UNKNOWN = 0  # a NULL or a quoted literal: takes its type from what it meets (text if nothing)


_NAMES = {INT8: "bigint", FLOAT8: "double precision", TEXT: "text", BOOL: "boolean"}
_NUMBERS = (INT8, FLOAT8)
_COMPARE = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def _read_literal(e: exp.Expression, t: int) -> None:
    """A quoted literal meeting a typed value is read as that type when the statement is
    planned (PostgreSQL's rule): '' against a boolean is 22P02 even if never compared."""
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.Literal) and e.is_string and t in (INT8, FLOAT8, BOOL):
        {INT8: to_int8, FLOAT8: to_float8, BOOL: to_bool}[t](e.this)


def _comparable(a: int, b: int) -> bool:
    return UNKNOWN in (a, b) or a == b or (a in _NUMBERS and b in _NUMBERS)


def _boolean(t: int, what: str) -> None:
    if t not in (BOOL, UNKNOWN):
        raise SQLError("42804", f"argument of {what} must be type boolean, not type {_NAMES[t]}")


def _common(types: list[int], what: str) -> int:
    """The one type of CASE's or COALESCE's branches (bigint with double is double)."""
    kinds = set(types) - {UNKNOWN}
    if kinds and kinds <= set(_NUMBERS):
        return FLOAT8 if FLOAT8 in kinds else INT8
    if len(kinds) > 1:
        raise SQLError("42804", f"{what} types {' and '.join(_NAMES[k] for k in sorted(kinds))} cannot be matched")
    return kinds.pop() if kinds else TEXT  # all NULL or quoted: text, as PostgreSQL resolves them


def type_of(e: exp.Expression, scope: Scope | None) -> int:
    """The type of e's result, known before any row is read (as PostgreSQL describes a
    result: a column of NULLs or of no rows still has its type), raising PostgreSQL's type
    errors (42883 no such operator, 42804 mismatched types, 42846 no such cast) before a
    row is read, as PostgreSQL does: a mistyped statement fails even on an empty table."""
    if isinstance(e, (exp.Paren, exp.Alias)):
        return type_of(e.this, scope)
    if isinstance(e, exp.Literal):
        if e.is_string:
            return UNKNOWN
        return INT8 if re.fullmatch(r"-?\d+", e.this) else FLOAT8
    if isinstance(e, exp.Null):
        return UNKNOWN
    if isinstance(e, exp.Boolean):
        return BOOL
    if isinstance(e, exp.Column):
        if scope is None or e.name.lower() not in scope.index:
            raise SQLError("42703", f'column "{e.name.lower()}" does not exist')
        return scope.columns[scope.index[e.name.lower()]][1]
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        a, b = type_of(e.this, scope), type_of(e.expression, scope)
        if a == b == UNKNOWN:  # NULL * NULL: PostgreSQL cannot choose the operator
            raise SQLError("42725", "operator is not unique: unknown and unknown")
        if {a, b} & {TEXT, BOOL} or (isinstance(e, exp.Mod) and FLOAT8 in (a, b)):  # no float8 %
            raise SQLError("42883", f"operator does not exist: {_NAMES.get(a, 'unknown')} "
                                    f"{type(e).__name__.lower()} {_NAMES.get(b, 'unknown')}")
        return FLOAT8 if FLOAT8 in (a, b) else INT8
    if isinstance(e, exp.Neg):
        a = type_of(e.this, scope)
        if a in (TEXT, BOOL):
            raise SQLError("42883", f"operator does not exist: - {_NAMES[a]}")
        if a == UNKNOWN:
            raise SQLError("42725", "operator is not unique: - unknown")
        return a
    if isinstance(e, exp.DPipe):
        a, b = type_of(e.this, scope), type_of(e.expression, scope)
        if not {a, b} & {TEXT, UNKNOWN}:
            raise SQLError("42883", f"operator does not exist: {_NAMES[a]} || {_NAMES[b]}")
        return TEXT
    if isinstance(e, (exp.Cast, exp.TryCast)):
        a = type_of(e.this, scope)
        to = TYPES.get(e.to.sql(dialect="postgres").split("(")[0].lower(), UNKNOWN)
        _read_literal(e.this, to)
        if (a, to) in ((BOOL, INT8), (BOOL, FLOAT8), (FLOAT8, BOOL)):
            raise SQLError("42846", f"cannot cast type {_NAMES[a]} to {_NAMES[to]}")
        return to
    if isinstance(e, exp.Case):
        subject = type_of(e.this, scope) if e.this is not None else None
        if subject == UNKNOWN:  # CASE NULL WHEN …: PostgreSQL takes an untyped subject as text
            subject = TEXT
        for i in e.args["ifs"]:
            c = type_of(i.this, scope)
            if subject is None:
                _boolean(c, "CASE/WHEN")
            elif not _comparable(subject, c):
                raise SQLError("42883", f"operator does not exist: {_NAMES[subject]} = {_NAMES[c]}")
            else:
                _read_literal(i.this, subject)
        parts = [i.args["true"] for i in e.args["ifs"]] + ([e.args["default"]] if e.args.get("default") else [])
        return _common([type_of(x, scope) for x in parts], "CASE")
    if isinstance(e, exp.Coalesce):
        return _common([type_of(x, scope) for x in (e.this, *e.expressions)], "COALESCE")
    if isinstance(e, exp.Count):
        if not isinstance(e.this, exp.Star):
            type_of(e.this, scope)
        return INT8
    if isinstance(e, (exp.Sum, exp.Min, exp.Max)):
        a = type_of(e.this, scope)
        if a == UNKNOWN:  # sum(NULL) has no one sum to choose; min/max(NULL) are text's
            if isinstance(e, exp.Sum):
                raise SQLError("42725", "function sum(unknown) is not unique")
            return TEXT
        if a == BOOL or (a == TEXT and isinstance(e, exp.Sum)):
            raise SQLError("42883", f"function {type(e).__name__.lower()}({_NAMES[a]}) does not exist")
        return a
    if isinstance(e, _COMPARE):
        a, b = type_of(e.this, scope), type_of(e.expression, scope)
        if not _comparable(a, b):
            raise SQLError("42883", f"operator does not exist: {_NAMES[a]} {e.key} {_NAMES[b]}")
        _read_literal(e.this, b)
        _read_literal(e.expression, a)
        return BOOL
    if isinstance(e, (exp.And, exp.Or)):
        for x in (e.this, e.expression):
            _boolean(type_of(x, scope), type(e).__name__.upper())
        return BOOL
    if isinstance(e, exp.Not):
        _boolean(type_of(e.this, scope), "NOT")
        return BOOL
    if isinstance(e, exp.Is):
        a = type_of(e.this, scope)
        if isinstance(e.expression, exp.Boolean):
            _boolean(a, "IS TRUE/FALSE")
        return BOOL
    if isinstance(e, exp.In):
        a = type_of(e.this, scope)
        for x in e.expressions:
            if not _comparable(a, b := type_of(x, scope)):
                raise SQLError("42883", f"operator does not exist: {_NAMES[a]} = {_NAMES[b]}")
            a = a or b  # the list's type: the first typed member's
        for x in (e.this, *e.expressions):
            _read_literal(x, a)
        return BOOL
    if isinstance(e, exp.Between):
        a = type_of(e.this, scope)
        for x in (e.args["low"], e.args["high"]):
            if not _comparable(a, b := type_of(x, scope)):
                raise SQLError("42883", f"operator does not exist: {_NAMES[a]} >= {_NAMES[b]}")
        return BOOL
    return UNKNOWN  # not in the subset: compile_expr refuses it


def assignable(value: int, column: int, name: str) -> None:
    """PostgreSQL's assignment casts: anything into text, numbers into numbers; 42804 else."""
    if value in (UNKNOWN, column) or column == TEXT or (value in _NUMBERS and column in _NUMBERS):
        return
    raise SQLError("42804", f'column "{name}" is of type {_NAMES[column]} but expression is of type '
                            f"{_NAMES[value]}")


def oid_of(v: Any) -> int:
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return INT8
    if isinstance(v, float):
        return FLOAT8
    return TEXT


def coerce(v: Any, oid: int) -> Any:
    """A value stored into a column of type oid."""
    if v is None:
        return None
    if oid != TEXT and (oid == BOOL) != isinstance(v, bool) and not isinstance(v, str):
        raise SQLError("42804", f"a {'boolean' if oid == BOOL else 'number'} column cannot hold {_text(v)}")
    if oid == INT8:
        return to_int8(v)
    if oid == FLOAT8:
        return to_float8(v)
    if oid == TEXT:
        return _text(v)
    return to_bool(v)


# -- SELECT ------------------------------------------------------------------------

AGGREGATES = {exp.Count: "count", exp.Sum: "sum", exp.Min: "min", exp.Max: "max"}


def plan_select(tree: exp.Select) -> Select:
    frm = tree.args.get("from_") or tree.args.get("from")
    if tree.args.get("joins") or tree.args.get("group"):
        raise SQLError("0A000", "joins and GROUP BY are not supported")
    for arg, what in (("with_", "WITH"), ("with", "WITH"), ("distinct", "DISTINCT"), ("offset", "OFFSET"),
                      ("having", "HAVING"), ("locks", "FOR UPDATE/SHARE"), ("windows", "WINDOW")):
        if tree.args.get(arg):
            raise SQLError("0A000", f"SELECT … {what} is not supported")
    table = _table_name(frm.this) if frm is not None else None

    def run(snapshots: dict[str, list[tuple]], catalog: dict) -> tuple[list, list]:
        if table is None:
            scope, rows = None, [()]
        else:
            if table not in catalog:
                raise SQLError("42P01", f'relation "{table}" does not exist')
            scope, rows = Scope(catalog[table]), snapshots[table]
        where = _where(tree)
        for x in tree.expressions:  # PostgreSQL's type errors come before any row is read
            if not isinstance(x, exp.Star):
                type_of(x, scope)
        if where is not None:
            _boolean(type_of(where, scope), "WHERE")
        for o in (tree.args["order"].expressions if tree.args.get("order") else ()):
            type_of(o.this, scope)
        limit = tree.args.get("limit")
        if limit is not None and compile_expr(limit.expression, None)(()) == 0:
            rows = []  # LIMIT 0 reads no row, as PostgreSQL's executor: nothing is evaluated
        if where is not None:  # (its constant terms are evaluated even then, as PostgreSQL folds them)
            pred = compile_where(where, scope)
            rows = [r for r in rows if pred(r) is True]
        items = tree.expressions
        if any(isinstance(x, exp.Star) for x in items):
            if len(items) > 1:
                raise SQLError("0A000", "SELECT * with other columns is not supported")
            if scope is None:
                raise SQLError("42601", "SELECT * with no tables specified is not valid")
            return list(scope.columns), sorted_limited(tree, scope, rows, rows)
        names, outs, aggs = [], [], []
        for x in items:
            alias = x.alias if isinstance(x, exp.Alias) else None
            inner = x.this if isinstance(x, exp.Alias) else x
            agg = AGGREGATES.get(type(inner))
            if agg:
                aggs.append(True)
                arg = inner.this
                f = None if isinstance(arg, exp.Star) else compile_expr(arg, scope)
                outs.append((agg, f))
            else:
                aggs.append(False)
                outs.append((None, compile_expr(inner, scope)))
            names.append(alias or (agg if agg else (inner.name.lower() if isinstance(inner, exp.Column)
                                                    else "?column?")))
        if any(aggs):
            if not all(aggs):
                raise SQLError("42803", "a column must appear in GROUP BY or be used in an aggregate")
            if tree.args.get("order"):
                raise SQLError("0A000", "ORDER BY with aggregates is not supported")
            out = sorted_limited(tree, None, [()], [tuple(_aggregate(agg, f, rows) for agg, f in outs)])
        else:
            out = [tuple(f(r) for _, f in outs) for r in rows]
            out = sorted_limited(tree, scope, rows, out)
        types = []
        for i, name in enumerate(names):
            oid = type_of(items[i], scope)
            if oid == UNKNOWN:  # a quoted literal or NULL, untyped: text, as PostgreSQL says
                oid = TEXT
            if oid == FLOAT8:  # CASE 1 … ELSE 2.5: every value of a double column is one
                out = [r[:i] + (float(r[i]) if isinstance(r[i], int) else r[i],) + r[i + 1:] for r in out]
            types.append((name, oid))
        return types, out

    return Select([table] if table else [], run)


def _aggregate(agg: str, f: Callable | None, rows: list[tuple]) -> Any:
    if agg == "count":
        return len(rows) if f is None else sum(1 for r in rows if f(r) is not None)
    vals = [v for r in rows if (v := f(r)) is not None]
    if not vals:
        return None
    return {"sum": sum, "min": min, "max": max}[agg](vals)


def sorted_limited(tree: exp.Select, scope: Scope | None, rows: list[tuple], out: list[tuple]) -> list:
    order = tree.args.get("order")
    if order is not None:
        pairs = list(zip(rows, out))
        for o in reversed(order.expressions):  # stable sorts, last key first
            inner = o.this
            while isinstance(inner, (exp.Paren, exp.Neg)):  # -(3) is the constant -3
                inner = inner.this
            if isinstance(inner, (exp.Literal, exp.Null, exp.Boolean)):
                raise SQLError("0A000", "ORDER BY a position or a constant is not supported")
            key = compile_expr(o.this, scope)
            desc = bool(o.args.get("desc"))
            # NULLs sort as larger than any value, unless NULLS FIRST/LAST says (PostgreSQL's rule)
            nulls_high = bool(o.args.get("nulls_first")) == desc
            pairs.sort(key=lambda p, key=key, high=nulls_high: _order_key(key(p[0]), high), reverse=desc)
        out = [o for _, o in pairs]
    limit = tree.args.get("limit")
    if limit is not None:
        n = compile_expr(limit.expression, None)(())
        if n is not None:  # LIMIT NULL is no limit
            if isinstance(n, bool) or not isinstance(n, int):
                raise SQLError("0A000", "LIMIT takes an integer")
            if n < 0:
                raise SQLError("2201W", "LIMIT must not be negative")
            out = out[:n]
    return out


def _order_key(v: Any, nulls_high: bool) -> tuple:
    if v is None:
        return (1, 0) if nulls_high else (-1, 0)
    return (0, v)


# -- writes ------------------------------------------------------------------------


def insert_rows(plan: Insert, columns: list[tuple[str, int]], source: list[tuple]) -> list[tuple]:
    """Full rows for INSERT, from constant VALUES or from the SELECT's output rows."""
    names = [c for c, _ in columns]
    target = plan.columns or names
    for c in target:
        if c not in names:
            raise SQLError("42703", f'column "{c}" of relation "{plan.table}" does not exist')
    if plan.values is not None:
        kinds = dict(columns)
        for row in plan.values:
            for c, e in zip(target, row):
                assignable(type_of(e, None), kinds[c], c)
        source = [tuple(compile_expr(e, None)(()) for e in row) for row in plan.values]
    rows = []
    for vals in source:
        if len(vals) > len(target) or (plan.columns and len(vals) < len(target)):
            raise SQLError("42601", f"INSERT has {len(vals)} values for {len(target)} columns")
        given = dict(zip(target, vals))
        rows.append(tuple(coerce(given.get(c), oid) for c, oid in columns))
    return rows


def check_not_null(table: str, columns: list[tuple[str, int]], not_null: list[str] | set[str],
                   rows: list[tuple]) -> None:
    """23502 for a row that would put NULL into a NOT NULL column (as PostgreSQL words it)."""
    for i, (name, _) in enumerate(columns):
        if name in not_null and any(r[i] is None for r in rows):
            raise SQLError("23502", f'null value in column "{name}" of relation "{table}" '
                                    f"violates not-null constraint")


def mutate_diffs(plan: Mutate, columns: list[tuple[str, int]], rows: list[tuple]) -> list[tuple[tuple, int]]:
    """(row, diff) updates an UPDATE or DELETE makes to a table holding `rows`."""
    scope = Scope(columns)
    if plan.where is not None:
        _boolean(type_of(plan.where, scope), "WHERE")
    pred = compile_where(plan.where, scope) if plan.where is not None else (lambda r: True)
    sets = []
    for name, e in plan.assignments:
        if name not in scope.index:
            raise SQLError("42703", f'column "{name}" of relation "{plan.table}" does not exist')
        assignable(type_of(e, scope), columns[scope.index[name]][1], name)
        sets.append((scope.index[name], compile_expr(e, scope), columns[scope.index[name]][1]))
    diffs = []
    for r in rows:
        if pred(r) is not True:
            continue
        diffs.append((r, -1))
        if plan.kind == "update":
            new = list(r)
            for i, f, oid in sets:
                new[i] = coerce(f(r), oid)
            diffs.append((tuple(new), 1))
    return diffs
