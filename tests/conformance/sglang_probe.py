"""Runs INSIDE an SGLang conformance environment (scripts/sglang-env.sh), never in the project's venv.

Reads one JSON request on stdin and writes one JSON answer on stdout, so the slow imports (torch, sglang) happen
once per batch of cases:

    {"cli": [{"id": str, "argv": [str, ...], "env": {str: str}, "files": {argv_value: file_content}}],
     "adaptive": [{"id": str, "config": str, "initial_steps": int, "batch_sizes": [int],
                   "cuda_graph_bs": [int] | null, "argv": [str] | null, "cuda_graph_max_bs": int}]}

For each cli case, SGLang's own argparse parser (ServerArgs.add_cli_args) parses argv; if it accepts,
ServerArgs.from_cli_args builds the record. `files` maps argv values that are paths inside the pod (e.g. the
mounted adaptive config) to the content the pod would see; a temporary file takes their place for from_cli_args.
from_cli_args outcomes: "accepted", "rejected" (with the error), or "needs_gpu" when the only failure is the
release's own "no accelerator" check (0.5.9's __post_init__ asks torch for a device before validating further).

When the command line asks for --speculative-adaptive, SGLang's own adaptive gates run on the record too
(adaptive_unsupported_reason, _init_adaptive_speculative_params).

For each adaptive case, SGLang's adaptive_spec_params (0.5.2x) loads the JSON from a file with its own
_load_adaptive_config / resolve_candidate_steps_from_config, and AdaptiveSpeculativeParams routes each batch size to
a slot exactly as the engine does (pad to a CUDA-graph batch size, then the largest key <= it). With `argv`, the
padding uses the batch sizes SGLang's generate_decode_cuda_graph_batch_sizes captures for that command line.

Only the standard library and sglang are imported here; the file is also linted with the project's tests.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.metadata
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator
from typing import Any

NO_ACCELERATOR = "No accelerator ("


class ParserRejectedError(Exception):
    pass


class _RaisingParser(argparse.ArgumentParser):
    """argparse calls error() for unknown, ambiguous and malformed flags; raise instead of exiting."""

    def error(self, message: str) -> Any:
        raise ParserRejectedError(message)


@functools.cache
def _parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]  # noqa: PLC0415 - only inside the SGLang env

    parser = _RaisingParser(prog="sglang.launch_server", allow_abbrev=True)
    ServerArgs.add_cli_args(parser)
    return parser


@contextlib.contextmanager
def _environment(extra: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _materialise(argv: list[str], files: dict[str, str], tmp: str) -> list[str]:
    out = []
    for index, value in enumerate(argv):
        if value in files:
            path = os.path.join(tmp, f"file{index}{os.path.splitext(value)[1]}")
            with open(path, "w") as handle:
                handle.write(files[value])
            out.append(path)
        else:
            out.append(value)
    return out


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _cli_case(case: dict[str, Any]) -> dict[str, Any]:
    from sglang.srt.server_args import ServerArgs  # noqa: PLC0415 - only inside the SGLang env

    result: dict[str, Any] = {"id": case["id"]}
    with _environment(case.get("env", {})), tempfile.TemporaryDirectory() as tmp:
        argv = _materialise(list(case["argv"]), case.get("files", {}), tmp)
        try:
            namespace = _parser().parse_args(argv)
        except ParserRejectedError as exc:
            result.update(parse="rejected", parse_error=str(exc), from_cli_args="skipped")
            return result
        except SystemExit as exc:  # a custom action that exits on its own
            result.update(parse="rejected", parse_error=f"SystemExit({exc.code})", from_cli_args="skipped")
            return result
        result["parse"] = "accepted"
        # argparse also accepts unambiguous prefixes; a prefix that works today breaks when a release adds a
        # longer flag (as --cuda-graph-max-bs did in 0.5.2x), so report every flag that is not spelled exactly.
        known = set(_parser()._option_string_actions)
        result["inexact_flags"] = [
            token.split("=", 1)[0] for token in argv if token.startswith("--") and token.split("=", 1)[0] not in known
        ]
        try:
            record = ServerArgs.from_cli_args(namespace)
        except RuntimeError as exc:
            if str(exc).startswith(NO_ACCELERATOR):
                result.update(from_cli_args="needs_gpu", from_cli_error=str(exc))
                if getattr(namespace, "speculative_adaptive", False):
                    # 0.5.17 asks for an accelerator in __post_init__; its adaptive gates read only the parsed
                    # fields, so they run on a record holding exactly those (what 0.5.23's from_cli_args builds).
                    result.update(_adaptive_startup_checks(_unresolved_record(ServerArgs, namespace)))
            else:
                result.update(from_cli_args="rejected", from_cli_error=_error_text(exc))
        except Exception as exc:
            result.update(
                from_cli_args="rejected",
                from_cli_error=_error_text(exc),
                traceback=traceback.format_exc(limit=4),
            )
        else:
            result["from_cli_args"] = "accepted"
            if getattr(namespace, "speculative_adaptive", False):
                result.update(_adaptive_startup_checks(record))
    return result


def _unresolved_record(server_args: Any, namespace: Any) -> Any:
    """A ServerArgs holding the parsed fields, without __post_init__ (which needs a GPU on 0.5.17)."""
    record = server_args.__new__(server_args)
    record.__dict__.update(vars(namespace))
    return record


def _adaptive_startup_checks(record: Any) -> dict[str, Any]:
    """SGLang's own adaptive gates, run on the record as its resolution pipeline would (0.5.2x).

    adaptive_unsupported_reason: a non-None reason makes SGLang silently fall back to static speculation.
    _init_adaptive_speculative_params: loads the config file and rejects a --speculative-num-steps that is not
    one of its candidate steps.
    """
    try:
        from sglang.srt.arg_groups.speculative_hook import (  # type: ignore[import-not-found]  # noqa: PLC0415
            _init_adaptive_speculative_params,
        )
        from sglang.srt.speculative.adaptive_spec_params import adaptive_unsupported_reason  # type: ignore[import-not-found]  # noqa: PLC0415
    except ImportError as exc:
        return {"adaptive_checks": f"unavailable: {_error_text(exc)}"}
    out: dict[str, Any] = {"adaptive_checks": "ran", "adaptive_unsupported_reason": adaptive_unsupported_reason(record)}
    try:
        _init_adaptive_speculative_params(record)
    except Exception as exc:
        out["adaptive_init"] = _error_text(exc)
    else:
        out["adaptive_init"] = "ok"
    return out


def _adaptive_case(case: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"id": case["id"]}
    try:
        from sglang.srt.speculative import adaptive_spec_params as asp  # type: ignore[import-not-found]  # noqa: PLC0415
    except ImportError as exc:
        result.update(status="absent", error=_error_text(exc))
        return result
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "adaptive-config.json")
        with open(path, "w") as handle:
            handle.write(case["config"])
        try:
            _cfg, entries = asp._load_adaptive_config(path)
            candidates = asp.resolve_candidate_steps_from_config(path)
            params = asp.AdaptiveSpeculativeParams(initial_steps=case["initial_steps"], cfg_path=path)
            capture = case.get("cuda_graph_bs")
            if case.get("argv") is not None:
                # The decode CUDA-graph batch sizes SGLang captures for this command line, from its own function
                # (0.5.23: arg_groups/cuda_graph_hook.py; 0.5.17: a ServerArgs method).
                from sglang.srt.server_args import ServerArgs  # noqa: PLC0415

                parsed = _parser().parse_args(case["argv"])
                try:
                    record = ServerArgs.from_cli_args(parsed)
                except RuntimeError as exc:
                    if not str(exc).startswith(NO_ACCELERATOR):
                        raise
                    record = _unresolved_record(ServerArgs, parsed)  # 0.5.17: see _cli_case
                try:
                    from sglang.srt.arg_groups.cuda_graph_hook import (  # type: ignore[import-not-found]  # noqa: PLC0415
                        generate_decode_cuda_graph_batch_sizes,
                    )

                    capture = generate_decode_cuda_graph_batch_sizes(record, case["cuda_graph_max_bs"])
                except ModuleNotFoundError:
                    capture = record._generate_decode_cuda_graph_batch_sizes(case["cuda_graph_max_bs"])
                result["cuda_graph_bs"] = capture
            params.set_cuda_graph_bs(capture)
            steps = {str(bs): params.get_steps_for_batch(bs) for bs in case["batch_sizes"]}
        except Exception as exc:
            result.update(status="error", error=_error_text(exc), traceback=traceback.format_exc(limit=4))
            return result
    result.update(
        status="loaded",
        keys=sorted(entries),
        candidate_steps=candidates,
        steps_for_batch=steps,
    )
    return result


def main() -> int:
    request = json.load(sys.stdin)
    real_stdout = sys.stdout
    # SGLang logs and warns while importing; keep stdout for the one JSON answer.
    sys.stdout = sys.stderr
    answer: dict[str, Any] = {
        "sglang_version": importlib.metadata.version("sglang"),
        "cli": [_cli_case(case) for case in request.get("cli", [])],
        "adaptive": [_adaptive_case(case) for case in request.get("adaptive", [])],
    }
    sys.stdout = real_stdout
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
