"""sleuth's verdicts beside adya's, model by model, on random simulated histories.

A differential run, the way the anomalies of 2026-11-27 were found (a fuzzy read
judged valid under read atomic; a session's missed write and a G-single hidden
behind a G-nonadjacent judged valid under strong session snapshot isolation and
consistent view): `sleuth sim` writes small list-append histories of every
database character, and each one is judged by both checkers under every model
both know. Disagreements whose reason is known are counted under it; any other
is listed, and the exit status is 1.

Known reasons (README, "What is measured"):
- adya has no detector for Adya's G-cursor, G-monotonic and G-update, so where
  those are all sleuth found that the model forbids, adya says valid;
- adya reads a list that ends with the transaction's own appends as it is, so
  on read-committed histories it reports `incompatible-order` where sleuth
  orders the read by its external part.

adya must be on PATH (`cargo install adya --no-default-features`).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from sleuth.checker import list_append, models
from sleuth.history import read_jsonl

ROOT = Path(__file__).resolve().parent
ADYA_ONLY_MISSES = {"G-cursor", "G-monotonic", "G-update"}
VERDICT = {0: True, 1: False, 2: "unknown"}


def reason(sleuth, adya: bool | str, found: list[str], adya_types: list[str]) -> str | None:
    if sleuth is False and adya is True and set(found) <= ADYA_ONLY_MISSES:
        return "adya has no G-cursor/G-monotonic/G-update detector"
    if sleuth is True and adya is False and set(adya_types) <= {"incompatible-order"}:
        return "adya reads a transaction's own appends as part of the order"
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--histories", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if shutil.which("adya") is None:
        print("adya is not installed (cargo install adya --no-default-features)", file=sys.stderr)
        return 2
    out = ROOT / "out" / "compare"
    out.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(args.seed)
    known: Counter = Counter()
    unexplained = []
    judged = 0
    for i in range(args.histories):
        db = rnd.choice(["serializable", "snapshot-isolation", "read-committed", "stale-reads"])
        params = {"--txns": rnd.choice([5, 10, 20, 40, 100, 300]), "--concurrency": rnd.choice([2, 3, 5, 10]),
                  "--keys": rnd.choice([1, 2, 3, 8]), "--seed": rnd.randrange(10**6)}
        f = out / f"h-{i}.jsonl"
        subprocess.run([sys.executable, "-m", "sleuth.cli", "sim", "--db", db, "-o", str(f),
                        *(str(x) for kv in params.items() for x in kv)], check=True, capture_output=True)
        h = read_jsonl(f)
        for model in models.MODELS:
            r = list_append.check(h, model)
            a = subprocess.run(["adya", "check", "--json", "-c", model, str(f)], capture_output=True)
            adya = VERDICT.get(a.returncode, a.returncode)
            judged += 1
            if r.valid == adya:
                continue
            adya_types = json.loads(a.stdout or b"{}").get("anomaly_types", [])
            why = reason(r.valid, adya, r.anomaly_types, adya_types)
            if why:
                known[why] += 1
            else:
                unexplained.append((f.name, db, params, model, r.valid, r.anomaly_types, adya, adya_types))
        print(f"  {i + 1}/{args.histories} histories", file=sys.stderr, end="\r")
    print(f"\n{args.histories} histories x {len(models.MODELS)} models: {judged} verdicts from each checker")
    print(f"  agree: {judged - sum(known.values()) - len(unexplained)}")
    for why, n in known.most_common():
        print(f"  differ, known reason ({why}): {n}")
    print(f"  differ, unexplained: {len(unexplained)}")
    for name, db, params, model, sv, st, av, at in unexplained:
        print(f"    {name} ({db}, {params}) {model}: sleuth {sv} {st}; adya {av} {at}")
    print(f"histories in {out}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
