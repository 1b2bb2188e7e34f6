"""sleuth's verdicts beside adya's, model by model, on random small histories.

A differential run, the way the anomalies of 2026-11-27 were found (a fuzzy read
judged valid under read atomic; a session's missed write and a G-single hidden
behind a G-nonadjacent judged valid under strong session snapshot isolation and
consistent view; a lost update behind a transaction's own append judged valid
under snapshot isolation). Three sources of histories, each judged by both
checkers under every model both know:

- `sim`: `sleuth sim` list-append histories of every database character;
- `random`: the small list-append histories of the brute-force tests
  (tests/test_cycles_bruteforce.py's generator: random commit order, stale reads,
  failed and crashed transactions, with or without a final read);
- `rw-register`: small random rw-register histories made here, judged with no
  version-order inference beyond Elle's defaults, with writes-follow-reads, with
  sequential keys and with linearizable keys (the same option to both).

Disagreements whose reason is known are counted under it; any other is listed,
and the exit status is 1. The known reasons (README, "What is measured"), each
decided from the history, not from the disagreement's look:

- adya has no detector for Adya's G-cursor, G-monotonic and G-update, so where
  those are all sleuth found that the model forbids, adya says valid;
- adya reads a list that ends with the transaction's own appends as it is (sleuth
  orders the read by its external part): adya, given the same history with each
  such read moved before the transaction's appends to its key and holding its
  external part, gives sleuth's verdict;
- adya leaves transactions that never completed out of its graph's process,
  real-time and anti-dependency edges: every example of every anomaly sleuth
  found that the model forbids involves such a transaction;
- adya says unknown (`empty-transaction-graph`) where it infers no dependency,
  and sleuth, with nothing forbidden found, says valid;
- rw-register: adya takes only a transaction's first read of each key, so a
  fuzzy read (read x = 1, then x = 2) is no G-single to it; sleuth forbids it
  from consistent view up, as Adya's definitions do.

adya must be on PATH (`cargo install adya --no-default-features`).

    .venv/bin/python bench/compare_adya.py [--histories 100] [--sources sim,random,rw-register]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from sleuth.checker import list_append, models, rw_register
from sleuth.history.jsonl import read_jsonl, write_jsonl

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "tests"))
from test_cycles_bruteforce import generate, to_history, transactions  # noqa: E402 - the brute-force tests' histories

ADYA_ONLY_MISSES = {"G-cursor", "G-monotonic", "G-update"}
VERDICT = {0: True, 1: False, 2: "unknown"}
RW_OPTIONS = {  # name -> (adya's flags, sleuth's options)
    "defaults": ([], {"wfr_keys": False}),
    "wfr-keys": (["--wfr-keys"], {"wfr_keys": True}),
    "sequential-keys": (["--sequential-keys"], {"wfr_keys": False, "sequential_keys": True}),
    "linearizable-keys": (["--linearizable-keys"], {"wfr_keys": False, "linearizable_keys": True}),
}


def adya(path: Path, model: str, workload: str, flags: list[str]) -> tuple[bool | str, list[str]]:
    a = subprocess.run(["adya", "check", "--json", "-m", workload, "-c", model, *flags, str(path)],
                       capture_output=True)
    return VERDICT.get(a.returncode, a.returncode), json.loads(a.stdout or b"{}").get("anomaly_types", [])


def rw_history(rnd: random.Random) -> list[tuple]:
    """A few transactions of one to three micro-ops on up to three keys, run in start
    or random commit order; some reads served a stale version, some transactions
    failed or crashed (a crashed one takes effect half the time)."""
    keys = ["x", "y", "z"][: rnd.randint(1, 3)]
    txns = transactions(rnd, keys, (2, 6), write="w")
    versions: dict = {k: [None] for k in keys}
    stale = rnd.choice([0.0, 0.3, 0.7])
    order = sorted(txns, key=lambda t: t[1]) if rnd.random() < 0.5 else rnd.sample(txns, len(txns))
    for t in order:
        if t[3] == "fail" or (t[3] == "info" and rnd.random() < 0.5):
            continue
        own: dict = {}
        for m in t[4]:
            f, k, v = m
            if f == "w":
                own[k] = v
            else:
                m[2] = own[k] if k in own else (rnd.choice(versions[k]) if rnd.random() < stale else versions[k][-1])
        for k, v in own.items():
            versions[k].append(v)
    return [tuple(t) for t in txns]


def write(path: Path, txns: list[tuple]) -> Path:
    """The history of (process, start, end, type, micro-ops) transactions, as the tests make it."""
    write_jsonl(to_history(txns).events, path)
    return path


@functools.cache
def reads_first(path: Path) -> Path:
    """The list-append history at `path` with each ok read that follows the transaction's
    own appends to its key moved before its first append to that key, holding its
    external part (what sleuth orders): written once, beside it."""
    events = []
    for e in read_jsonl(path).events:
        if e.type == "ok" and e.value:
            mops: list = []
            own: dict = {}
            for f, k, v in e.value:
                mine = own.get(k)
                outside = list_append.external_part(v, mine) if f == "r" and mine and v is not None else None
                if outside is not None:
                    at = next(i for i, m in enumerate(mops) if m[0] == "append" and m[1] == k)
                    mops.insert(at, [f, k, outside])
                    continue
                if f == "append":
                    own.setdefault(k, []).append(v)
                mops.append([f, k, v])
            e = dataclasses.replace(e, value=mops)
        events.append(e)
    moved = path.with_suffix(".reads-first.jsonl")
    write_jsonl(events, moved)
    return moved


def _involves_crashed(result, model: str) -> bool:
    forbidden = [t for t in result.anomaly_types if models.forbids(model, t)]

    def crashed(example: dict) -> bool:
        parts = [*example.get("txns", ()), *example.get("ops", ())]
        parts += [example[k] for k in ("op", "writer") if k in example]
        return any(p.get("type") == "info" for p in parts)

    return bool(forbidden) and all(crashed(e) for t in forbidden for e in result.anomalies[t])


def reason(source: str, path: Path, model: str, result, verdict, types: list[str]) -> str | None:
    """The known reason for a disagreement, if one holds (module docstring)."""
    mine = result.valid
    if mine is False and verdict is True and set(result.anomaly_types) <= ADYA_ONLY_MISSES:
        return "adya has no G-cursor/G-monotonic/G-update detector"
    if mine is True and verdict == "unknown" and types == ["empty-transaction-graph"]:
        return "adya says unknown where it infers no dependency"
    if mine is False and verdict in (True, "unknown") and _involves_crashed(result, model):
        return "adya leaves crashed transactions out of process, real-time and rw edges"
    if source == "rw-register" and mine is False and verdict is True and \
            set(result.anomaly_types) == {"fuzzy-read"}:
        return "adya takes a transaction's first read of a key only (a fuzzy read is no G-single)"
    if source != "rw-register":
        if adya(reads_first(path), model, "list-append", [])[0] == mine:
            return "adya reads a transaction's own appends as part of the order"
    return None


def histories(source: str, n: int, rnd: random.Random, out: Path):
    """(path, workload, option name) of n histories from `source`."""
    for i in range(n):
        path = out / f"{source}-{i}.jsonl"
        if source == "sim":
            db = rnd.choice(["serializable", "snapshot-isolation", "read-committed", "stale-reads"])
            params = {"--txns": rnd.choice([5, 10, 20, 40, 100, 300]), "--concurrency": rnd.choice([2, 3, 5, 10]),
                      "--keys": rnd.choice([1, 2, 3, 8]), "--seed": rnd.randrange(10**6)}
            subprocess.run([sys.executable, "-m", "sleuth.cli", "sim", "--db", db, "-o", str(path),
                            *(str(x) for kv in params.items() for x in kv)], check=True, capture_output=True)
            yield path, "list-append", None
        elif source == "random":
            txns = generate(rnd, final_read=rnd.random() < 0.5, txns=(2, 6), stale=rnd.choice([0.0, 0.3, 0.6]))
            yield write(path, txns), "list-append", None
        else:
            yield write(path, rw_history(rnd)), "rw-register", list(RW_OPTIONS)[i % len(RW_OPTIONS)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--histories", type=int, default=100, help="per source")
    ap.add_argument("--sources", default="sim,random,rw-register")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if shutil.which("adya") is None:
        print("adya is not installed (cargo install adya --no-default-features)", file=sys.stderr)
        return 2
    out = ROOT / "out" / "compare"
    out.mkdir(parents=True, exist_ok=True)
    unexplained = []
    for source in args.sources.split(","):
        rnd = random.Random(args.seed)
        known: Counter = Counter()
        judged, before = 0, len(unexplained)
        for i, (path, workload, option) in enumerate(histories(source, args.histories, rnd, out)):
            h = read_jsonl(path)
            flags, kwargs = RW_OPTIONS[option] if option else ([], {})
            for model in models.MODELS:
                r = (rw_register.check(h, model, **kwargs) if option else list_append.check(h, model))
                verdict, types = adya(path, model, workload, flags)
                judged += 1
                if r.valid == verdict:
                    continue
                why = reason(source, path, model, r, verdict, types)
                if why:
                    known[why] += 1
                else:
                    unexplained.append((path.name, option, model, r.valid, r.anomaly_types, verdict, types))
            if sys.stderr.isatty():  # one line rewritten in a terminal; a line per quarter in a log
                print(f"  {source}: {i + 1}/{args.histories} histories", file=sys.stderr, end="\r")
            elif (i + 1) % max(1, args.histories // 4) == 0:
                print(f"  {source}: {i + 1}/{args.histories} histories", file=sys.stderr)
        if sys.stderr.isatty():
            print(file=sys.stderr)  # past the rewritten line
        print(f"{source}: {args.histories} histories x {len(models.MODELS)} models: {judged} verdicts "
              "from each checker", file=sys.stderr)
        print(f"{source}: agree {judged - sum(known.values()) - (len(unexplained) - before)} of {judged}")
        for why, n in known.most_common():
            print(f"  differ, known reason ({why}): {n}")
    print(f"differ, unexplained: {len(unexplained)}")
    for name, option, model, sv, st, av, at in unexplained:
        print(f"  {name}{f' ({option})' if option else ''} {model}: sleuth {sv} {st}; adya {av} {at}")
    print(f"histories in {out}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
