"""The tools' `specserve` subcommands, registered in pyproject.toml's `specserve.commands` entry points.

Loading an entry point imports only this module (cheap): each command's own module is imported when it runs."""

from __future__ import annotations

from specserve.cli import Extra, Subcommand

# Top-level packages of the `bench` extra (tools/pyproject.toml); a command that misses one says how to install it.
BENCH_HINT = "pip install 'specserve-tools[bench]'"
BENCH_EXTRA = Extra("bench", frozenset({"matplotlib", "rich", "ruamel"}), BENCH_HINT)

EMULATE = Subcommand(
    "specserve_tools.commands.emulate", "run a GPU-free SGLang emulator (tests and demos)", BENCH_EXTRA
)
BENCH = Subcommand(
    "specserve_tools.commands.bench", "sweep concurrency against an OpenAI-compatible endpoint", BENCH_EXTRA
)
CALIBRATE = Subcommand(
    "specserve_tools.commands.calibrate", "turn two bench results into switching thresholds", BENCH_EXTRA
)
SIMULATE = Subcommand(
    "specserve_tools.commands.simulate",
    "replay a trace under the switching policy, baselines and the optimum",
    BENCH_EXTRA,
)
DEMO = Subcommand(
    "specserve_tools.commands.demo",
    "the operator's whole loop on one machine, live (no GPU, no cluster)",
    BENCH_EXTRA,
)

# By name, as tools/pyproject.toml registers them (python -m specserve_tools runs them without the entry points).
COMMANDS = {"emulate": EMULATE, "bench": BENCH, "calibrate": CALIBRATE, "simulate": SIMULATE, "demo": DEMO}
