"""PNG plot of output tokens/s against concurrency, one curve per result. matplotlib is imported lazily
(Agg backend, no display) so nothing else pays for it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specserve.api.curves import Curve


def plot_curves(curves: Sequence[tuple[str, Curve]], path: Path, title: str = "Output tokens/s vs concurrency") -> None:
    import matplotlib  # noqa: PLC0415 (lazy: heavy, only the bench plots need it)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    try:
        for label, curve in curves:
            ax.plot(curve.xs, curve.ys, marker="o", label=label)
        ax.set_xscale("log")
        levels = sorted({x for _, curve in curves for x in curve.xs})
        ax.set_xticks(levels, [f"{x:g}" for x in levels])  # the measured levels, as plain numbers
        ax.minorticks_off()
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel("output tokens/s (all requests)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
