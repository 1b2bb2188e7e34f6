"""The drawing of an anomaly's cycle in a report (reports/plots.py, `cycle`): every edge
readable on its own. A cycle of two transactions has two edges between the same two
points (a -> b, b -> a, the commonest write skew and lost update); drawn straight, they
lay on one line under one label and read as a single double-headed edge."""

from __future__ import annotations

import math

from sleuth.reports import plots


def test_two_transactions_two_arcs_two_labels_apart():
    (a_start, a_end, a_rad, a_label), (b_start, b_end, b_rad, b_label) = plots.cycle_geometry(2)
    assert (a_start, a_end) == (b_end, b_start)  # the same two points, both ways
    assert a_rad != 0 and b_rad != 0
    assert math.dist(a_label, b_label) > 0.3  # each label by its own arc, in [-1.2, 1.2] axes


def test_larger_cycles_straight_edges_each_label_by_its_chord():
    for n in range(3, 12):
        geometry = plots.cycle_geometry(n)
        assert all(rad == 0 for _, _, rad, _ in geometry)
        for start, end, _, label in geometry:
            middle = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
            others = [math.dist(label, ((s[0] + e[0]) / 2, (s[1] + e[1]) / 2)) for s, e, _, _ in geometry]
            assert math.dist(label, middle) == min(others)  # nearest to its own edge


def test_the_drawing_is_written(tmp_path):
    for n in (2, 3, 12):  # 12: ten shown and "… 2 more"
        steps = [{"from": f"T{i}", "kind": "rw" if i % 2 else "ww"} for i in range(n)]
        path = tmp_path / f"c{n}.png"
        plots.cycle(str(path), steps, f"G2-item #{n}")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_latency_axis_reads_in_plain_milliseconds():
    import matplotlib.pyplot as plt

    def labels(lo, hi):
        fig, ax = plt.subplots()
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        plots._plain_log_labels(ax)
        fig.canvas.draw()
        def shown(minor):  # the labels of ticks inside the axis
            return [t.get_text() for t, at in zip(ax.get_yticklabels(minor=minor), ax.get_yticks(minor=minor))
                    if t.get_text() and lo <= at <= hi]
        major, minor = shown(False), shown(True)
        plt.close(fig)
        return major, minor

    major, minor = labels(1.5, 40)  # matplotlib wrote 2×10⁰, 3×10⁰ … 4×10¹ here
    assert major == ["10"] and minor == ["2", "5", "20"]
    major, minor = labels(0.5, 4000)  # wide: the decades alone
    assert major == ["1", "10", "100", "1000"] and minor == []


def test_the_figure_is_sized_by_the_cycle(tmp_path):
    # issue 43: a 2-transaction cycle was drawn in a tall, mostly empty square
    from PIL import Image

    sizes = {}
    for n in (2, 3, 8):
        steps = [{"from": f"T{i}", "kind": "rw" if i % 2 else "ww"} for i in range(n)]
        path = tmp_path / f"c{n}.png"
        plots.cycle(str(path), steps, "G2-item #1")
        sizes[n] = Image.open(path).size
    (w2, h2), h3, h8 = sizes[2], sizes[3][1], sizes[8][1]
    assert h2 < 0.6 * w2  # side by side: a wide strip
    assert h2 < h3 <= h8  # taller as the cycle has more transactions
    (a, b, _, _), _ = plots.cycle_geometry(2)
    assert a[1] == b[1]  # the two transactions on one level
