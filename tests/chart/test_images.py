"""The images: hadolint-clean Dockerfiles with the pins and build args docs/images.md promises, and the SGLang
patches/ folder checked against the pinned sglang wheel (downloaded from PyPI into .cache/)."""

from __future__ import annotations

import py_compile
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from specserve.versions import default_image
from tests.chart.chartlib import REPO, tool

SGLANG_VERSION = "0.5.23"
IMAGES = REPO / "images"
SGLANG_DOCKERFILE = IMAGES / "sglang" / "Dockerfile"
OPERATOR_DOCKERFILE = IMAGES / "operator" / "Dockerfile"
PATCHES = IMAGES / "sglang" / "patches"
WHEEL_CACHE = REPO / ".cache" / "sglang-wheel"


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text(encoding="utf-8"))
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def stages(dockerfile: Path) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for ins in instructions(dockerfile):
        if ins[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


@pytest.mark.parametrize("dockerfile", [SGLANG_DOCKERFILE, OPERATOR_DOCKERFILE], ids=["sglang", "operator"])
def test_hadolint_clean(dockerfile: Path) -> None:
    proc = subprocess.run(
        [tool("hadolint"), "--failure-threshold", "style", str(dockerfile)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr


def test_hadolint_is_not_vacuous(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\nRUN cd /tmp\n", encoding="utf-8")
    proc = subprocess.run([tool("hadolint"), str(bad)], capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "DL3007" in proc.stdout


def test_sglang_dockerfile_pins() -> None:
    ins = instructions(SGLANG_DOCKERFILE)
    froms = [a for i, a in ins if i == "FROM"]
    assert froms == ["nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04"]
    args = dict(a.split("=", 1) for i, a in ins if i == "ARG")
    assert args["SGLANG_VERSION"] == SGLANG_VERSION
    assert args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cu130"
    arch = args["TORCH_CUDA_ARCH_LIST"].strip('"').replace(";", " ").split()
    assert {"9.0", "10.0", "12.0a"} <= set(arch)
    runs = " ".join(a for i, a in ins if i == "RUN")
    assert '--index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"' in runs
    assert '"sglang==${SGLANG_VERSION}"' in runs
    # patches/ is copied and applied strictly (no fuzz), then byte-compiled.
    assert ("COPY", "patches/ /tmp/patches/") in ins
    assert "patch -p1 --forward --batch --fuzz=0" in runs and "compileall" in runs


def test_sglang_torch_pin_matches_the_wheel() -> None:
    """TORCH_VERSION must be the torch sglang 0.5.23 requires (read from the downloaded wheel)."""
    args = dict(a.split("=", 1) for i, a in instructions(SGLANG_DOCKERFILE) if i == "ARG")
    with zipfile.ZipFile(pinned_wheel()) as whl:
        meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        requires = whl.read(meta).decode()
    assert f"Requires-Dist: torch=={args['TORCH_VERSION']}\n" in requires


def test_operator_dockerfile_is_small_and_non_root() -> None:
    build, final = stages(OPERATOR_DOCKERFILE)
    assert build[0] == ("FROM", "python:3.11-slim-bookworm AS builder")
    assert final[0] == ("FROM", "python:3.11-slim-bookworm")
    final_text = " ".join(a for _, a in final)
    # No build tools or package manager installs in the final stage; it installs only pre-built wheels.
    for forbidden in ("apt-get", "gcc", "build-essential", "pip wheel", "COPY operator"):
        assert forbidden not in final_text, forbidden
    assert "--no-index" in final_text
    assert ("USER", "65532:65532") in final
    assert ("ENTRYPOINT", '["specserve"]') in final
    assert ("CMD", '["run"]') in final
    assert final[-1] == ("CMD", '["run"]')


def test_dockerignore_keeps_the_operator_context_small() -> None:
    lines = (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert {"!pyproject.toml", "!README.md", "!operator/"} <= set(lines)
    # Everything is excluded first, then only the build inputs are re-included.
    assert lines.index("*") < min(lines.index(x) for x in ("!pyproject.toml", "!README.md", "!operator/"))
    copied = [a.split()[0] for i, a in instructions(OPERATOR_DOCKERFILE) if i == "COPY" and "--from" not in a]
    assert set(copied) <= {"pyproject.toml", "operator/"} | {"README.md"}


# ------------------------------------------------------------------------------------------- patches


def patch_files() -> list[Path]:
    return sorted(PATCHES.glob("*.patch"))


def test_every_patch_is_explained() -> None:
    readme = (PATCHES / "README.md").read_text(encoding="utf-8")
    patches = patch_files()
    for patch in patches:
        text = patch.read_text(encoding="utf-8")
        header = text[: min(i for i in (text.find("\ndiff "), text.find("\n--- ")) if i >= 0)]
        assert "SM120" in header and len(header.splitlines()) >= 3, f"{patch.name} needs an explaining header"
        assert patch.name in readme, f"{patch.name} is not listed in patches/README.md"
    if not patches:
        assert "no patch" in readme.lower(), "an empty patches/ folder must say why in README.md"


def pinned_wheel() -> Path:
    """The sglang wheel the image installs (CPython 3.12, x86-64), downloaded once into .cache/."""
    found = sorted(WHEEL_CACHE.glob(f"sglang-{SGLANG_VERSION}-*.whl"))
    if not found:
        WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
             "--platform", "manylinux_2_34_x86_64", "-d", str(WHEEL_CACHE), f"sglang=={SGLANG_VERSION}"],
            check=True,
            timeout=600,
        )  # fmt: skip
        found = sorted(WHEEL_CACHE.glob(f"sglang-{SGLANG_VERSION}-*.whl"))
    assert found, "pip download did not produce the sglang wheel"
    return found[0]


@pytest.fixture(scope="module")
def site_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel's sglang/ package unpacked as it would sit in site-packages."""
    root = tmp_path_factory.mktemp("site-packages")
    with zipfile.ZipFile(pinned_wheel()) as whl:
        whl.extractall(root, [n for n in whl.namelist() if n.startswith("sglang/") and n.endswith(".py")])
    return root


@pytest.mark.sglang_wheel
def test_patches_apply_cleanly_and_compile(site_packages: Path, tmp_path: Path) -> None:
    """Exactly what the Dockerfile does: patch -p1 --forward --batch --fuzz=0 from site-packages, then compile."""
    target = tmp_path / "site"
    shutil.copytree(site_packages, target)
    touched: list[Path] = []
    for patch in patch_files():
        proc = subprocess.run(
            ["patch", "-p1", "--forward", "--batch", "--fuzz=0", "-d", str(target), "-i", str(patch)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, f"{patch.name} does not apply to sglang {SGLANG_VERSION}:\n{proc.stdout}"
        touched += [target / m for m in re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), flags=re.M)]
    for path in touched:
        py_compile.compile(str(path), doraise=True)
    # The package as a whole still byte-compiles (what the Dockerfile's compileall does).
    proc = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(target / "sglang" / "srt" / "arg_groups")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


EVIDENCE = re.compile(r"^\| `(sglang/[^`:]+):(\d+)` \| `(.+)` \|$")


@pytest.mark.sglang_wheel
def test_no_patch_evidence_matches_the_pinned_wheel(site_packages: Path) -> None:
    """Every file:line quoted in patches/README.md says what the README claims in the pinned wheel."""
    rows = [EVIDENCE.match(line) for line in (PATCHES / "README.md").read_text(encoding="utf-8").splitlines()]
    evidence = [m.groups() for m in rows if m]
    assert len(evidence) >= 10
    for path, line, text in evidence:
        lines = (site_packages / path).read_text(encoding="utf-8").splitlines()
        assert text in lines[int(line) - 1], f"{path}:{line} is now {lines[int(line) - 1].strip()!r}"


def test_image_references_agree_with_the_docs() -> None:
    """docs/images.md names the image references the chart and the operator actually use."""
    docs = (REPO / "docs" / "images.md").read_text(encoding="utf-8")
    values = yaml.safe_load((REPO / "charts" / "specserve" / "values.yaml").read_text(encoding="utf-8"))
    assert f"`{values['image']['repository']}:" in docs
    assert f"`{default_image(SGLANG_VERSION)}`" in docs
    assert default_image(SGLANG_VERSION).endswith(f"{SGLANG_VERSION}-cu130")
