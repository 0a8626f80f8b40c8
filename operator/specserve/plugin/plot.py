"""The curves and the operating point as a terminal plot (plotext) or a PNG (matplotlib): `explain`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

JSON = dict[str, Any]
PLOT_HINT = "pip install 'specserve[plugin]'"


def _series(data: JSON) -> tuple[list[float], list[float], list[float], list[float]]:
    curves = data["curves"]
    sx, sy = zip(*curves["speculative"], strict=True)
    bx, by = zip(*curves["baseline"], strict=True)
    return list(sx), list(sy), list(bx), list(by)


def terminal(data: JSON, width: int = 78, height: int = 20) -> str:
    """Both curves (tokens/s per replica against concurrency per replica), the crossover and the operating point."""
    import plotext as plt  # noqa: PLC0415 (an extra, only for explain)

    sx, sy, bx, by = _series(data)
    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    plt.plot(sx, sy, label="speculative", marker="braille")
    plt.plot(bx, by, label="baseline", marker="braille")
    if data["crossoverPerReplica"] is not None:
        plt.vline(data["crossoverPerReplica"])
    point = data["operatingPoint"]
    if point["perReplica"] is not None and point["speculativeTokensPerSecond"] is not None:
        x = point["perReplica"]
        plt.scatter([x, x], [point["speculativeTokensPerSecond"], point["baselineTokensPerSecond"]],
                    label="now", marker="x")  # fmt: skip
    plt.title("tokens/s per replica vs concurrency per replica (| crossover, x now)")
    text: str = plt.uncolorize(plt.build())
    return text


def png(data: JSON, path: Path) -> None:
    import matplotlib  # noqa: PLC0415 (the bench extra)

    matplotlib.use("Agg")
    import matplotlib.pyplot as mpl  # noqa: PLC0415

    sx, sy, bx, by = _series(data)
    fig, ax = mpl.subplots(figsize=(8, 5))
    ax.plot(sx, sy, label="speculative", marker="o")
    ax.plot(bx, by, label="baseline", marker="o")
    if data["crossoverPerReplica"] is not None:
        ax.axvline(data["crossoverPerReplica"], color="grey", linestyle="--", label="crossover")
    point = data["operatingPoint"]
    if point["perReplica"] is not None and point["speculativeTokensPerSecond"] is not None:
        ax.axvline(point["perReplica"], color="red", label=f"now ({point['perReplica']:g}/replica)")
    ax.set_xlabel("concurrency per replica")
    ax.set_ylabel("output tokens/s per replica")
    ax.set_title(f"{data['namespace']}/{data['name']}: {data['curves']['source']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    mpl.close(fig)
