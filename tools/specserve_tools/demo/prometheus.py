"""Debian's Prometheus on loopback, scraping the demo's pods with the labels the operator's PodMonitor gives them.

In a cluster the Prometheus Operator turns the PodMonitor into scrape config; here the same relabelings are
applied by hand: each pod becomes a file_sd target whose labels are what those relabelings would produce
(plus the target labels the Prometheus Operator always adds: namespace, pod, container, endpoint, job).
The file is rewritten as pods come and go (Prometheus watches it). HAProxy's exporter is scraped too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from specserve_tools.demo.procs import Child, Supervisor

POD_LABEL = "__meta_kubernetes_pod_label_"
SD_FILE = "pods.json"


def sanitize(label: str) -> str:
    """Kubernetes label key -> the name Prometheus' Kubernetes discovery gives it."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


def target_labels(
    pod_monitor: Mapping[str, Any], pod: str, namespace: str, labels: Mapping[str, str]
) -> dict[str, str]:
    """The labels the Prometheus Operator + Kubernetes discovery put on a pod's series (pure)."""
    meta = pod_monitor.get("metadata") or {}
    endpoint = ((pod_monitor.get("spec") or {}).get("podMetricsEndpoints") or [{}])[0]
    out = {
        "namespace": namespace,
        "pod": pod,
        "container": "sglang",
        "endpoint": str(endpoint.get("port", "http")),
        "job": f"{meta.get('namespace', namespace)}/{meta.get('name', '')}",
    }
    by_meta = {POD_LABEL + sanitize(k): v for k, v in labels.items()}
    for rule in endpoint.get("relabelings") or []:
        action = rule.get("action", "replace")
        sources = rule.get("sourceLabels") or []
        if action != "replace" or not rule.get("targetLabel"):
            continue  # the operator renders only plain copies; anything else is not modelled
        value = (rule.get("separator", ";")).join(by_meta.get(s, "") for s in sources)
        if value:
            out[str(rule["targetLabel"])] = value
    return out


def prometheus_config(workdir: Path, exporter_port: int, interval: float) -> str:
    config = {
        "global": {"scrape_interval": f"{interval:g}s", "scrape_timeout": f"{min(interval, 1.0):g}s"},
        "scrape_configs": [
            {"job_name": "specserve-pods", "file_sd_configs": [{"files": [str(workdir / SD_FILE)]}]},
            {"job_name": "haproxy", "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}]},
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_targets(workdir: Path, targets: list[tuple[int, dict[str, str]]]) -> None:
    doc = [{"targets": [f"127.0.0.1:{port}"], "labels": labels} for port, labels in targets]
    tmp = workdir / (SD_FILE + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    tmp.replace(workdir / SD_FILE)  # atomic: Prometheus never reads half a file


@dataclass
class Prometheus:
    port: int
    child: Child
    workdir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def query(self, session: aiohttp.ClientSession, promql: str) -> list[dict[str, Any]]:
        async with session.get(
            self.url + "/api/v1/query", params={"query": promql}, timeout=aiohttp.ClientTimeout(total=5)
        ) as resp:
            doc = await resp.json(content_type=None)
        if doc.get("status") != "success":
            raise RuntimeError(f"Prometheus refused {promql!r}: {doc.get('error')}")
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result


async def start_prometheus(
    sup: Supervisor, workdir: Path, port: int, exporter_port: int, interval: float = 1.0
) -> Prometheus:
    workdir.mkdir(parents=True, exist_ok=True)
    write_targets(workdir, [])
    config = workdir / "prometheus.yml"
    config.write_text(prometheus_config(workdir, exporter_port, interval), encoding="utf-8")
    child = sup.start(
        "prometheus",
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
        ],
    )
    prom = Prometheus(port, child, workdir)
    async with aiohttp.ClientSession() as session:
        for _ in range(300):
            if not child.alive():
                raise RuntimeError(f"prometheus exited: {child.tail()}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(prom.url + "/-/ready", timeout=aiohttp.ClientTimeout(total=1)) as resp:
                    if resp.status == 200:
                        return prom
            await asyncio.sleep(0.1)
    raise RuntimeError(f"prometheus was not ready within 30 s: {child.tail()}")
