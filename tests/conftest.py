"""Test order for `make test`: files with long tests first.

`make test` runs two workers with `--dist loadfile --no-loadscope-reorder`: xdist
hands out whole files in collection order, each to the first worker free. Its
default order (most tests first) put the files of a few long tests (docker, Spark,
clusters: one to three minutes each) last, so the run ended with one worker on
them and the other idle. With them first, the many short tests fill in at the end.
"""

LONG = ("slow", "docker", "spark", "cluster")


def pytest_collection_modifyitems(config, items):
    long_files = {item.path for item in items if any(item.get_closest_marker(m) for m in LONG)}
    counts: dict = {}
    for item in items:
        counts[item.path] = counts.get(item.path, 0) + 1
    # long files first; the others by how many tests they hold, most first (xdist's own
    # order); a file's own tests keep their order (a stable sort)
    items.sort(key=lambda item: (item.path not in long_files, -counts[item.path] if item.path not in long_files
                                 else 0))
