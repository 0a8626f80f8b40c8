"""The timeline PNGs of scripts/gpu/loop.py's results: per policy, clients in flight, the speculative pool's weight
at the gateway and output tokens/s (requests counted at their end, 3 s bins); for the Restart run, clients in
flight, the operator's mode and the pods (which mode each runs, when it started and was Ready), and tokens/s."""

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


def plot_restart(result: dict[str, Any], path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    run = result.get("restart") or {}
    tl = run.get("timeline") or []
    if not tl:
        return
    fig, axes = plt.subplots(3, 1, figsize=(11, 7), sharex=True)
    t = [row["t"] for row in tl]
    axes[0].plot(t, [row["in_flight"] for row in tl], color="grey", label="in flight")
    modes = [(row["t"], 1 if row["mode"] == "Speculative" else 0) for row in tl if row.get("mode")]
    axes[1].step([m[0] for m in modes], [m[1] for m in modes], where="post", label="status.activeMode (1: NGRAM)")
    for i, (name, pod) in enumerate((run.get("pods") or {}).items()):
        rows = [row["t"] for row in tl if name in row.get("pods", {})]
        ready = [row["t"] for row in tl if row.get("pods", {}).get(name) == "Ready"]
        if rows:
            y = 1.2 + 0.15 * i
            axes[1].plot([rows[0], rows[-1]], [y, y], color="lightgrey", lw=4)
            if ready:
                axes[1].plot([ready[0], ready[-1]], [y, y], lw=4, label=f"{pod.get('mode')} pod Ready ({name[-7:]})")
    xs, ys = tokens_series(run.get("requests") or [], run.get("wall_s") or (t[-1] if t else 0))
    axes[2].plot(xs, ys, label="output tokens/s")
    for st in run.get("stages") or []:
        for ax in axes:
            ax.axvline(st["from_s"], color="lightgrey", lw=0.6)
        axes[0].text(st["from_s"] + 0.5, 1, st["stage"], fontsize=7, rotation=90, va="bottom")
    axes[0].set_ylabel("requests in flight")
    axes[1].set_ylabel("mode / pods")
    axes[2].set_ylabel("output tokens/s")
    axes[2].set_xlabel("seconds into the Restart run")
    for ax in axes:
        ax.legend(fontsize=7, loc="upper right")
    fig.suptitle(f"SpecServe Restart on {result.get('engine')}: one pool, NGRAM-4 <-> plain (pods grey while starting)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
