"""The timeline PNG of scripts/gpu/loop.py's results: per policy, clients in flight, the speculative pool's weight
at the gateway and output tokens/s (requests counted at their end, 3 s bins)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

BIN = 3.0


def tokens_series(requests: list[dict[str, Any]], seconds: float) -> tuple[list[float], list[float]]:
    bins = [0.0] * (int(seconds // BIN) + 2)
    for r in requests:
        if r.get("error") is None and r.get("end") is not None:
            i = int(r["end"] // BIN)
            if i < len(bins):
                bins[i] += r["tokens"]
    return [i * BIN for i in range(len(bins))], [b / BIN for b in bins]


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    policies = result.get("policies") or {}
    if not policies:
        return
    fig, axes = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    for name, p in policies.items():
        tl = p["timeline"]
        t = [row["t"] for row in tl]
        if name == "specserve":
            axes[0].plot(t, [row["in_flight"] for row in tl], color="grey", label="in flight (specserve run)")
            axes[0].plot(t, [row["wanted"] for row in tl], color="black", ls=":", label="clients wanted")
        axes[1].plot(t, [row["weights"].get("speculative", 0) for row in tl], label=name)
        xs, ys = tokens_series(p["requests"], p["wall_s"])
        axes[2].plot(xs, ys, label=name)
    stages, start = result.get("schedule") or [], 0.0
    for s in stages:
        for ax in axes:
            ax.axvline(start, color="lightgrey", lw=0.6)
        axes[0].text(start + 0.5, 1, s["name"], fontsize=6, rotation=90, va="bottom")
        start += s["seconds"]
    axes[0].set_ylabel("requests in flight")
    axes[1].set_ylabel("speculative weight %")
    axes[2].set_ylabel("output tokens/s")
    axes[2].set_xlabel("seconds into the schedule (second half: half of the requests sampled)")
    for ax in axes:
        ax.legend(fontsize=7, loc="upper right")
    fig.suptitle(f"SpecServe loop on {result.get('engine')}: NGRAM-4 pool vs plain pool, one GPU")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
