"""Conformance suite: SpecServe checked against the real SGLang releases it supports.

Each supported release (specserve.versions.RELEASES) has its own virtual environment built by
scripts/sglang-env.sh, named by SPECSERVE_SGLANG_PY_<version with dots as underscores>. The project's venv never
imports sglang or torch: cases are sent in one batch to tests/conformance/sglang_probe.py running in that
environment, and SGLang's source files are read with `ast` from its site-packages.

Without the variables (plain `pytest` on a developer machine) these tests skip and say how to build the
environments; under CI (CI=true) a missing environment is a failure, never a silent skip.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import pytest

from specserve.versions import RELEASES

HERE = Path(__file__).resolve().parent
PROBE = HERE / "sglang_probe.py"
SUPPORTED_VERSIONS: tuple[str, ...] = tuple(RELEASES)


def env_var(version: str) -> str:
    return "SPECSERVE_SGLANG_PY_" + version.replace(".", "_")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.conformance)


@dataclass
class SGLangEnv:
    version: str
    python: Path
    _answers: dict[str, dict[str, Any]] = field(default_factory=dict)

    @cached_property
    def site_packages(self) -> Path:
        out = subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        )
        return Path(out.stdout.strip())

    def source(self, relative: str) -> Path:
        """A file of the installed sglang package, e.g. 'srt/entrypoints/http_server.py'."""
        path = self.site_packages / "sglang" / relative
        assert path.is_file(), f"SGLang {self.version} has no sglang/{relative}"
        return path

    def probe(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run the probe once per distinct request (imports take seconds; the answer is cached)."""
        key = json.dumps(request, sort_keys=True)
        if key not in self._answers:
            environ = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
            done = subprocess.run(  # noqa: PLW1510 - the return code is asserted below
                [str(self.python), str(PROBE)],
                input=key,
                capture_output=True,
                text=True,
                timeout=600,
                env=environ,
                cwd=HERE,
            )
            assert done.returncode == 0, f"probe failed in SGLang {self.version}:\n{done.stderr[-4000:]}"
            answer = json.loads(done.stdout)
            assert answer["sglang_version"] == self.version, answer["sglang_version"]
            self._answers[key] = answer
        return self._answers[key]


@cache
def _env(version: str) -> SGLangEnv | str:
    """The environment, or why it is unavailable."""
    value = os.environ.get(env_var(version))
    if not value:
        return (
            f"{env_var(version)} is not set: run `bash scripts/sglang-env.sh && . .cache/sglang/env.sh` "
            f"to build the SGLang {version} conformance environment (scripts/test.sh does both)"
        )
    python = Path(value)
    if not os.access(python, os.X_OK):
        return f"{env_var(version)}={value} is not an executable Python; rerun scripts/sglang-env.sh"
    return SGLangEnv(version=version, python=python)


def sglang_env(version: str) -> SGLangEnv:
    """The conformance environment of `version`; skips (fails under CI) when it is missing."""
    env = _env(version)
    if isinstance(env, str):
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"conformance environment missing under CI: {env}", pytrace=False)
        pytest.skip(env)
    return env
