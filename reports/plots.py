"""The report's pictures (matplotlib, Agg): latency and throughput over time, anomaly cycles.

Everything is vectorized with numpy, so a 100k-operation history plots in
about a second. Nemesis windows are shaded on both time plots.
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

COLORS = {"ok": "#2b8a3e", "fail": "#e8590c", "info": "#1c7ed6"}


def _shade(ax: Any, windows: list[tuple[float, float, str]]) -> None:
    for i, (a, b, label) in enumerate(windows):
        ax.axvspan(a, b, color="#868e96", alpha=0.15, lw=0, label="nemesis" if i == 0 else None)


def latency(path: str, ops: dict[str, np.ndarray], windows: list, title: str) -> None:
    """ops: {"t": completion time (s), "lat": latency (ms), "type": array of 'ok'/'fail'/'info'}."""
    fig, ax = plt.subplots(figsize=(9, 3.2), dpi=110)
    _shade(ax, windows)
    for typ, color in COLORS.items():
        m = ops["type"] == typ
        if m.any():
            ax.scatter(ops["t"][m], np.maximum(ops["lat"][m], 0.01), s=3, c=color, label=typ,
                       alpha=0.6, lw=0, rasterized=True)
    ax.set_yscale("log")
    _plain_log_labels(ax)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper right", fontsize=8, markerscale=3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _plain_log_labels(ax: Any) -> None:
    """Milliseconds as plain numbers (0.1, 2, 50, 1000), not matplotlib's 4×10¹: the decades,
    and over a narrow range (two decades or less) the 2s and 5s between them too."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    def plain(v: float, _pos: Any) -> str:
        return f"{v:g}"

    def twos_and_fives(v: float, _pos: Any) -> str:
        mantissa = round(v / 10 ** math.floor(math.log10(v) + 1e-9), 6)
        return f"{v:g}" if mantissa in (2, 5) else ""

    lo, hi = ax.get_ylim()
    ax.yaxis.set_major_formatter(FuncFormatter(plain))
    narrow = lo > 0 and math.log10(hi / lo) <= 2
    ax.yaxis.set_minor_formatter(FuncFormatter(twos_and_fives) if narrow else NullFormatter())


def throughput(path: str, ops: dict[str, np.ndarray], windows: list, title: str) -> None:
    end = float(ops["t"].max()) if len(ops["t"]) else 1.0
    bins = np.arange(0, math.ceil(end) + 1.0, 1.0)
    fig, ax = plt.subplots(figsize=(9, 2.8), dpi=110)
    _shade(ax, windows)
    for typ, color in COLORS.items():
        m = ops["type"] == typ
        counts, _ = np.histogram(ops["t"][m], bins=bins)
        if m.any():
            ax.plot(bins[:-1], counts, color=color, label=typ, lw=1.2)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("ops/s")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def cycle_geometry(n: int) -> list[tuple[tuple[float, float], tuple[float, float], float, tuple[float, float]]]:
    """Where `cycle` draws each of n edges (i -> i+1 around a circle of radius R): its
    start, its end, its bend (matplotlib's arc3 `rad`) and where its label goes, on the
    arc's middle. Two transactions' two edges (a -> b, b -> a) bend to either side, or they
    would lie on one line under one label and read as a single edge; they sit side by
    side (left, right), so their drawing is a wide strip, not a tall empty square."""
    pos = ([(-R, 0.0), (R, 0.0)] if n == 2 else  # two: left and right; more: the first on top
           [(R * math.cos(2 * math.pi * i / n + math.pi / 2), R * math.sin(2 * math.pi * i / n + math.pi / 2))
            for i in range(n)])
    rad = 0.35 if n == 2 else 0.0
    out = []
    for i in range(n):
        (x1, y1), (x2, y2) = pos[i], pos[(i + 1) % n]
        # arc3's control point is the chord's middle moved by rad * (dy, -dx); the curve's
        # middle lies halfway there; the label sits a little further in the same direction
        # (a straight edge's label: just outside the chord's middle, as it always was)
        dx, dy = x2 - x1, y2 - y1
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        label = (mx + 0.6 * rad * dy, my - 0.6 * rad * dx) if rad else (mx * 0.9 / R, my * 0.9 / R)
        out.append(((x1, y1), (x2, y2), rad, label))
    return out


R = 0.85  # the circle the transactions sit on, in axes units of [-1.2, 1.2]
# room around the transactions and labels, same units: sideways for a name's box, up and down
# for a box's or a label's half height
MARGIN_X, MARGIN_Y = 0.35, 0.18
INCHES = 4.2 / 2.4  # figure inches per axes unit: a full circle's drawing is 4.2 in square
TITLE = 0.35  # inches above the drawing for its title


def cycle_extent(geometry: list) -> tuple[float, float, float, float]:
    """(x0, x1, y0, y1): what the drawing of `geometry` covers (its transactions, its labels and
    its arcs' middles), with a margin around, so the figure is as large as its cycle and no larger."""
    xs = [p[0] for start, _end, _rad, label in geometry for p in (start, label)]
    ys = [p[1] for start, _end, _rad, label in geometry for p in (start, label)]
    return min(xs) - MARGIN_X, max(xs) + MARGIN_X, min(ys) - MARGIN_Y, max(ys) + MARGIN_Y


def cycle(path: str, steps: list[dict], title: str, limit: int = 10) -> None:
    """Transactions on a circle, one arrow per dependency edge, labelled with its kind."""
    shown = steps[:limit]
    names = [s["from"] for s in shown]
    if len(steps) > limit:
        names.append(f"… {len(steps) - limit} more")
    geometry = cycle_geometry(len(names))
    pos = {name: geometry[i][0] for i, name in enumerate(names)}
    x0, x1, y0, y1 = cycle_extent(geometry)
    # sized by the cycle: two transactions make a wide strip; the title gets its own 0.35 in
    height = (y1 - y0) * INCHES
    fig = plt.figure(figsize=((x1 - x0) * INCHES, height + TITLE), dpi=110)
    ax = fig.add_axes((0, 0, 1, height / (height + TITLE)))  # the axes fill the figure below the title
    for i, (start, end, rad, (lx, ly)) in enumerate(geometry):
        kind = shown[i]["kind"] if i < len(shown) else "…"
        color = "#c92a2a" if kind == "rw" else "#495057"
        # an order of two appends no read saw, one of the two possible (checker/cycles.py): dashed
        assumed = i < len(shown) and shown[i].get("unseen-order", False)
        ax.annotate("", xy=end, xytext=start,
                    arrowprops={"arrowstyle": "-|>", "color": color, "lw": 1.4, "shrinkA": 14, "shrinkB": 14,
                                "connectionstyle": f"arc3,rad={rad}", "linestyle": "--" if assumed else "-"})
        ax.text(lx, ly, kind + ("?" if assumed else ""), fontsize=8, ha="center", va="center", color=color)
    for name, (x, y) in pos.items():
        ax.text(x, y, name, ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round", "fc": "#f1f3f5", "ec": "#adb5bd"})
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_aspect("equal")  # arc3 bends in display space: equal scales keep the labels on the arcs
    ax.axis("off")
    ax.set_title(title, fontsize=9)
    fig.savefig(path)
    plt.close(fig)
