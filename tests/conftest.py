"""Test order for `make test` (pytest-xdist, `--dist loadfile`: a worker takes a whole file).

The files that need Spark, Docker or a long run go first, so the two workers share the long
ones and finish together; collected alphabetically, the Spark files came last and one worker
ran their minutes alone while the other sat idle. The order within each group is kept.

xdist hands out files by this order only with `--no-loadscope-reorder` (the Makefile's
test commands): by default `loadfile` sorts files by their number of tests, most first,
which put the few-test, minutes-long Spark and Docker files last."""

from __future__ import annotations


def _weight(item) -> int:
    for rank, mark in enumerate(("spark", "docker", "slow")):
        if item.get_closest_marker(mark) is not None:
            return rank
    return 3


def pytest_collection_modifyitems(session, config, items):
    first: dict[str, int] = {}
    for item in items:
        path = str(item.path)
        first[path] = min(first.get(path, 3), _weight(item))
    position = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (first[str(item.path)], position[id(item)]))
