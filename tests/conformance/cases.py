"""Command lines rendered by the operator's own renderer (specserve.render), for the conformance suite.

Nothing here knows SGLang's flags: every argv comes from `render(parse_object(doc))`, for each example in
examples/ and for a matrix of SpecServes. Files the pod mounts from a rendered ConfigMap (the adaptive config)
are resolved to their content, as the kubelet would, so SGLang reads the file the operator rendered.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from specserve.api.models import Algorithm, Mode, SpecServe, Strategy
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.render import render
from specserve.versions import RELEASES, release

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CONTAINER = "sglang"
SM120_PRODUCT = "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
H100_PRODUCT = "NVIDIA-H100-80GB-HBM3"


@dataclass(frozen=True)
class Case:
    """One SGLang container of one rendered Deployment."""

    id: str
    version: str
    argv: list[str]
    env: dict[str, str]
    files: dict[str, str]  # path inside the pod -> content (from ConfigMaps)
    spec: SpecServe = field(compare=False, repr=False)
    command: list[str] = field(default_factory=list)

    def probe_request(self) -> dict[str, Any]:
        return {"id": self.id, "argv": self.argv, "env": self.env, "files": self.files}


def _mounted_files(pod: dict[str, Any], container: dict[str, Any], manifests: list[dict[str, Any]]) -> dict[str, str]:
    """Files the container sees from ConfigMap volumes (whole-map mounts, `items`, and `subPath`)."""
    maps = {m["metadata"]["name"]: m.get("data", {}) for m in manifests if m["kind"] == "ConfigMap"}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    files: dict[str, str] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        source = volume.get("configMap")
        if source is None:
            continue
        data = maps.get(source["name"])
        assert data is not None, f"volume {mount['name']} mounts ConfigMap {source['name']}, which is not rendered"
        items = source.get("items") or [{"key": key, "path": key} for key in data]
        by_path = {item["path"]: data[item["key"]] for item in items}
        if "subPath" in mount:
            files[mount["mountPath"]] = by_path[mount["subPath"]]
        else:
            for path, content in by_path.items():
                files[f"{mount['mountPath'].rstrip('/')}/{path}"] = content
    return files


def cases_of(name: str, spec: SpecServe) -> list[Case]:
    """One case per distinct SGLang container the SpecServe renders, in either mode (Restart swaps its pod)."""
    out: list[Case] = []
    seen: set[str] = set()
    for mode in Mode:
        out += _cases_in_mode(name, spec, mode, seen)
    return out


def _cases_in_mode(name: str, spec: SpecServe, mode: Mode, seen: set[str]) -> list[Case]:
    manifests = render(spec, mode)
    out = []
    for manifest in manifests:
        if manifest["kind"] != "Deployment":
            continue
        pod = manifest["spec"]["template"]["spec"]
        containers = [c for c in pod["containers"] if c["name"] == CONTAINER]
        assert len(containers) == 1, f"{name}: Deployment {manifest['metadata']['name']} has no '{CONTAINER}' container"
        container = containers[0]
        env = {e["name"]: str(e["value"]) for e in container.get("env", []) if "value" in e}
        key = json.dumps([manifest["metadata"]["name"], container["args"], env])
        if key in seen:
            continue
        seen.add(key)
        out.append(
            Case(
                id=f"{name}/{mode.value}/{manifest['metadata']['name']}",
                version=spec.spec.engine.sglang_version,
                argv=list(container["args"]),
                env=env,
                files=_mounted_files(pod, container, manifests),
                spec=spec,
                command=list(container.get("command", [])),
            )
        )
    return out


@cache
def example_cases() -> tuple[Case, ...]:
    out: list[Case] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "SpecServe":
                out += cases_of(path.stem, parse_object(doc))
    return tuple(out)


BASE: dict[str, Any] = {
    "apiVersion": "specserve.io/v1alpha1",
    "kind": "SpecServe",
    "metadata": {"name": "conf", "namespace": "llm"},
    "spec": {
        "model": {"path": "/models/base", "servedName": "base", "revision": "main"},
        "speculative": {"numSteps": 3, "eagleTopk": 1},
        "engine": {"tensorParallelSize": 1, "memFractionStatic": 0.8, "maxRunningRequests": 64},
        "placement": {"gpusPerPod": 1},
        "pools": {"speculative": {"replicas": 1}, "baseline": {"replicas": 1}},
        "routing": {"gateway": {"name": "gw"}},
        "switching": {"crossoverConcurrency": 12},
    },
}
GPU_PRODUCTS = {"sm120": SM120_PRODUCT, "h100": H100_PRODUCT}
NGRAM_DRAFT_TOKENS = (4, 12)
ADAPTIVE_CONFIGS: dict[str, dict[str, list[int]] | None] = {
    "no-adaptive-config": None,
    "adaptive-config": {"1": [1, 3, 5], "8": [0, 1, 3], "32": [0]},
}


def _extra_args(version: str) -> dict[str, list[str]]:
    # The decode CUDA-graph cap under the name the operator's release table gives for this version.
    return {"no-extra": [], "extra-cuda-graph-cap": [release(version).cuda_graph_max_bs_flag, "64"]}


@dataclass(frozen=True)
class Matrix:
    cases: tuple[Case, ...]
    rejected: tuple[tuple[str, str], ...]  # (matrix id, why parse_object refused it)
    valid_ids: tuple[str, ...]


@cache
def matrix() -> Matrix:
    """Every strategy x algorithm x GPU x adaptive config x extra args x release that SpecServe accepts."""
    cases: list[Case] = []
    rejected: list[tuple[str, str]] = []
    valid: list[str] = []
    for version, strategy, algorithm, gpu, adaptive in itertools.product(
        RELEASES, Strategy, Algorithm, GPU_PRODUCTS, ADAPTIVE_CONFIGS
    ):
        for extra_name, extra in _extra_args(version).items():
            doc = copy.deepcopy(BASE)
            spec = doc["spec"]
            spec["strategy"] = strategy.value
            spec["engine"]["sglangVersion"] = version
            spec["engine"]["extraArgs"] = extra
            spec["placement"]["gpuProduct"] = GPU_PRODUCTS[gpu]
            if gpu == "sm120":
                spec["engine"]["tensorParallelSize"] = 8
                spec["placement"]["gpusPerPod"] = 8
            spec["speculative"]["algorithm"] = algorithm.value
            if algorithm is not Algorithm.NGRAM:
                spec["speculative"]["draftModelPath"] = f"/models/drafters/{algorithm.value.lower()}"
            config = ADAPTIVE_CONFIGS[adaptive]
            if config is not None:
                spec["speculative"]["adaptiveConfig"] = config
            name = f"{version}/{strategy.value}/{algorithm.value}/{gpu}/{adaptive}/{extra_name}"
            try:
                obj = parse_object(doc)
            except InvalidSpecServe as exc:
                rejected.append((name, str(exc)))
                continue
            valid.append(name)
            cases += cases_of(name, obj)
    for version, tokens in itertools.product(RELEASES, NGRAM_DRAFT_TOKENS):
        # NGRAM's one knob SpecServe renders: the draft-token count (4: the loop's pool on the H200, 12: SGLang's
        # default), no draft model, no steps.
        doc = copy.deepcopy(BASE)
        doc["spec"]["engine"]["sglangVersion"] = version
        doc["spec"]["speculative"] = {"algorithm": "NGRAM", "numDraftTokens": tokens}
        name = f"{version}/TrafficSplit/NGRAM-{tokens}"
        valid.append(name)
        cases += cases_of(name, parse_object(doc))
    return Matrix(tuple(cases), tuple(rejected), tuple(valid))


def all_cases() -> tuple[Case, ...]:
    return example_cases() + matrix().cases


def adaptive_files(case: Case) -> dict[str, str]:
    """The rendered adaptive-config files a case's command line points at."""
    return {path: content for path, content in case.files.items() if path in case.argv}


def describe(case: Case) -> str:
    return f"{case.id} (SGLang {case.version}): {json.dumps(case.argv)}"
