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
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper right", fontsize=8, markerscale=3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


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


def cycle(path: str, steps: list[dict], title: str, limit: int = 10) -> None:
    """Transactions on a circle, one arrow per dependency edge, labelled with its kind."""
    shown = steps[:limit]
    names = [s["from"] for s in shown]
    if len(steps) <= limit:
        pass
    else:
        names.append(f"… {len(steps) - limit} more")
    n = len(names)
    pos = {name: (math.cos(2 * math.pi * i / n + math.pi / 2), math.sin(2 * math.pi * i / n + math.pi / 2))
           for i, name in enumerate(names)}
    fig, ax = plt.subplots(figsize=(4.2, 4.2), dpi=110)
    for i, name in enumerate(names):
        nxt = names[(i + 1) % n]
        (x1, y1), (x2, y2) = pos[name], pos[nxt]
        kind = shown[i]["kind"] if i < len(shown) else "…"
        ax.annotate("", xy=(x2 * 0.85, y2 * 0.85), xytext=(x1 * 0.85, y1 * 0.85),
                    arrowprops={"arrowstyle": "-|>", "color": "#c92a2a" if kind == "rw" else "#495057",
                                "lw": 1.4, "shrinkA": 14, "shrinkB": 14})
        ax.text((x1 + x2) * 0.45, (y1 + y2) * 0.45, kind, fontsize=8, ha="center", va="center",
                color="#c92a2a" if kind == "rw" else "#495057")
    for name, (x, y) in pos.items():
        ax.text(x * 0.85, y * 0.85, name, ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round", "fc": "#f1f3f5", "ec": "#adb5bd"})
    ax.set_xlim(-1.2, 1.2)
    ax.set_ylim(-1.2, 1.2)
    ax.axis("off")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
