"""Bank invariant (Jepsen's bank test): transfers move money between
accounts; every complete read must sum to the same total and, if asked, show
no negative balance.

The total is `--total` or, when not given, the sum of the first ok read (the
result says which). Account names may be numbers or strings (JSON object
keys are always strings, EDN's may be numbers): only sums and signs matter.
"""

from __future__ import annotations

from sleuth.checker import models
from sleuth.checker.result import UNKNOWN, Result, nothing_to_judge
from sleuth.history.jsonl import History

MAX_EXAMPLES = 20


def check_bank(history: History, total: int | None = None, no_negative: bool = False) -> Result:
    anomalies: dict[str, list[dict]] = {}
    notes: list[str] = []
    reads = transfers = 0
    for op in history.ops():
        if op.f == "transfer":
            v = op.invoke_value
            if not (isinstance(v, dict) and {"from", "to", "amount"} <= set(v)):
                raise history.error(op.invoke_pos, f"a transfer value must be {{from, to, amount}}, got {v!r}")
            transfers += 1
            continue
        if op.f != "read":
            raise history.error(op.invoke_pos, f"bank ops are transfer and read, not {op.f!r}")
        if op.type != "ok":
            continue
        balances = op.value
        if not isinstance(balances, dict) or not all(
                type(b) in (int, float) for b in balances.values()):
            raise history.error(op.complete_pos, f"a bank read must be {{account: balance}}, got {balances!r}")
        reads += 1
        where = {"process": op.process, "line": history.line_of(op.invoke_pos), "value": balances}
        s = sum(balances.values())
        if total is None:
            total = s
            notes.append(f"total {s} taken from the first complete read (line {where['line']})")
        if s != total:
            anomalies.setdefault(models.WRONG_TOTAL, []).append({
                "op": where, "total": s, "expected": total,
                "explanation": f"read by process {op.process} (line {where['line']}) sums to {s}, "
                               f"expected {total} ({'missing' if s < total else 'extra'} {abs(total - s)})"})
        negative = {a: b for a, b in balances.items() if b < 0}
        if no_negative and negative:
            anomalies.setdefault(models.NEGATIVE_BALANCE, []).append({
                "op": where, "negative": negative,
                "explanation": f"read by process {op.process} (line {where['line']}) shows negative "
                               f"balances {negative}"})
    counts = {k: len(v) for k, v in anomalies.items()}
    anomalies = {k: v[:MAX_EXAMPLES] for k, v in anomalies.items()}
    names = sorted(anomalies)
    valid: bool | str = not names
    if not names and not reads:
        valid = UNKNOWN
        notes.append(nothing_to_judge("no read completed ok (the invariants are checked on reads)"))
    return Result(valid=valid, model="bank", anomaly_types=names, anomalies=anomalies,
                  stats={"reads": reads, "transfers": transfers, "total": total, "anomaly-counts": counts},
                  notes=notes)
