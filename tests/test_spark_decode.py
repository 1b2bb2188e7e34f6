"""`check --spark` decodes a batch of lines in one msgspec call (values kept as JSON text) and
falls back to the rules path (`event_from_dict`) for a batch the fast decoder refuses: both
must give the same rows, on a simulated history and on lines written in unusual but valid
ways. Pure functions: no Spark needed."""

from __future__ import annotations

import pytest
from live import require_module

require_module("pyarrow")

from sleuth.spark.history_ops import _decode_fast, _decode_slow  # noqa: E402
from sleuth.workloads.sim_list_append import write_sim  # noqa: E402


def both(lines: list[str]) -> tuple[dict | None, dict]:
    return (_decode_fast(3, "\n".join(lines).encode()),
            _decode_slow(["f0", "f1", "f2", "f3"], [3] * len(lines), lines))


def test_a_simulated_history_decodes_the_same_both_ways(tmp_path):
    path = tmp_path / "h.jsonl"
    write_sim(str(path), "read-committed", 300, seed=4)
    lines = path.read_text().splitlines()
    fast, slow = both(lines)
    assert fast is not None and fast == slow
    assert len(fast["index"]) == len(lines)


def test_spaces_escapes_strings_errors_and_blank_lines():
    lines = ['{"index": 0, "time": 1, "type": "invoke", "process": 0, "f": "txn", "value": [["append", 1, 2]]}',
             "",
             '{"index":1,"time":2,"type":"ok","process":"nemesis","f":"start","value":"caf\\u00e9 \\"x\\"",'
             '"error":{"why": [1, 2]}}',
             '{"index":2,"time":3,"type":"info","process":0,"f":"txn","error":"timeout","node":"n1","ts":5}',
             '{"index":3,"time":4,"type":"invoke","process":1,"f":"read","value":null,"extra":{"ignored":true}}']
    fast, slow = both(lines)
    assert fast == slow
    assert fast["value"] == ['[["append",1,2]]', '"café \\"x\\""', "null", "null"]
    assert fast["error"] == [None, '{"why":[1,2]}', '"timeout"', None]
    assert fast["process"][1] == -1 and fast["ts"][2] == 5


def test_a_carriage_return_between_tokens_is_written_compact_as_any_other_whitespace():
    """JSON allows \\r between tokens; a value's text must still be the one `orjson.dumps` writes,
    or the same value would compare unequal to itself written compactly elsewhere."""
    lines = ['{"index":0,"time":1,"type":"invoke","process":0,"f":"txn","value":[["append",\r1,2]]}',
             '{"index":1,"time":2,"type":"fail","process":0,"f":"txn","value":[["append",1,2]],'
             '"error":[1,\r2]}']
    fast, slow = both(lines)
    assert fast == slow
    assert fast["value"] == ['[["append",1,2]]'] * 2 and fast["error"] == [None, "[1,2]"]


def test_a_number_with_a_fraction_or_an_exponent_is_written_as_orjson_writes_it():
    lines = ['{"index":0,"time":1,"type":"invoke","process":0,"f":"write","value":[1e2,2.50,-0.5E1]}',
             '{"index":1,"time":2,"type":"ok","process":0,"f":"write","value":[1e2,2.50,-0.5E1],'
             '"node":"n1.local"}']
    fast, slow = both(lines)
    assert fast == slow
    assert fast["value"] == ["[100.0,2.5,-5.0]"] * 2 and fast["node"] == [None, "n1.local"]


@pytest.mark.parametrize("line", [
    '{"index":0,"time":1.0,"type":"invoke","process":0,"f":"txn"}',  # RULES accept a whole float time
    '{"index":0,"time":1,"type":"invoke","process":0,"f":"txn","node":3}',  # and a numeric node
    '{"index":0,"time":1,"type":"begin","process":0,"f":"txn"}',  # a bad type: the rules name it
    '{"index":0,"time":1,"type":"invoke","process":0,"f":"txn"',  # torn
])
def test_what_the_fast_decoder_refuses_goes_to_the_rules(line):
    fast, slow = both([line])
    assert fast is None
    assert len(slow["index"]) == 1


def test_key_buckets_keep_true_and_1_apart():
    """`split` remembers each key's bucket; True == 1 in Python, but they are different JSON keys,
    so each must get its own bucket_of, whichever comes first."""
    import pyarrow as pa

    from sleuth.spark import history_keys as hk

    n = 26
    assert hk.bucket_of(True, n) != hk.bucket_of(1, n)
    values = ['[["append",1,1],["append",true,2]]', '[["append",true,3]]', '[["r",1,null]]']
    b = pa.RecordBatch.from_pydict({
        "id": [0, 1, 2], "process": [0, 1, 2], "f": ["txn"] * 3, "type": ["ok"] * 3, "value": values,
        "invoke_pos": [0, 1, 2], "complete_pos": [3, 4, 5], "invoke_time": [0, 1, 2], "complete_time": [3, 4, 5]})
    out = pa.Table.from_batches(list(hk.split("list-append", n)([b]))).to_pylist()
    got = sorted((r["id"], r["bucket"], r["value"]) for r in out)
    want = sorted([(0, hk.bucket_of(1, n), '[["append",1,1]]'), (0, hk.bucket_of(True, n), '[["append",true,2]]'),
                   (1, hk.bucket_of(True, n), '[["append",true,3]]'), (2, hk.bucket_of(1, n), '[["r",1,null]]')])
    assert got == want


@pytest.mark.parametrize("seed", range(30))
def test_byte_ranges_hold_every_line_once(tmp_path, seed):
    """However a file is cut into ranges, the lines the ranges own, in order, are the file:
    lines of every length (empty ones too), with or without a last newline, ranges smaller
    than a line, and reads smaller than a range."""
    import random

    from sleuth.spark import history_pair

    rnd = random.Random(seed)
    lines = [b"x" * rnd.choice([0, 1, 2, 5, 40, 300]) + b"\n" for _ in range(rnd.randint(0, 60))]
    data = b"".join(lines)
    if data and rnd.random() < 0.5:
        data = data[:-1]  # no newline at the end
    path = tmp_path / "h.jsonl"
    path.write_bytes(data)
    old = history_pair.READ_BYTES
    history_pair.READ_BYTES = rnd.choice([1, 7, 64, 1 << 20])
    try:
        size = rnd.choice([1, 3, 17, 100, 1000, 1 << 20])
        got = b"".join(block for _, start, end in history_pair.splits([str(path)], size)
                       for block in history_pair.read_lines(str(path), start, end))
    finally:
        history_pair.READ_BYTES = old
    assert got == data


def test_a_block_with_a_bad_line_is_judged_line_by_line():
    from sleuth.spark.history_ops import decode_block

    good = b'{"index":0,"time":1,"type":"invoke","process":0,"f":"txn","value":null}'
    bad = b'{"index":1,"time":2,"type":"ok","process":0,"f":"txn","value":"\xff"}'
    cols = decode_block(["f"], 0, good + b"\n" + bad + b"\n")
    assert cols["index"] == [0, None] and cols["problem"][0] is None
    assert cols["problem"][1].startswith("not valid JSON")


def test_locations_are_uris_and_committed_outputs_are_seen_through_their_filesystem(tmp_path, monkeypatch):
    """A path becomes a `file:` URI of its absolute path (the executors' working directory is
    not the driver's), a URI stays as it is; an output counts as committed only once its
    `_SUCCESS` is there, and removing a staging output that is gone is no error."""
    from sleuth.spark.history_ops import committed, remove, uri

    monkeypatch.chdir(tmp_path)
    assert uri("out/ops") == "file://" + str(tmp_path / "out" / "ops")
    assert uri("s3a://bucket/ops") == "s3a://bucket/ops" and uri("file:///x/y") == "file:///x/y"
    out = tmp_path / "judged"
    out.mkdir()
    (out / "part-00000.parquet").write_bytes(b"")
    assert not committed(str(out)) and not committed(uri(str(out)))
    (out / "_SUCCESS").write_bytes(b"")
    assert committed(str(out)) and committed(uri(str(out)))
    remove(uri(str(out)))
    assert not out.exists() and not committed(str(out))
    remove(str(out))  # gone already: nothing to do
