"""A kubeconfig pointing at the fake, for clients that read KUBECONFIG (kopf, the kubernetes library)."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_kubeconfig(path: Path, server: str, token: str = "test-token") -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubefake", "cluster": {"server": server}}],
        "users": [{"name": "kubefake", "user": {"token": token}}],
        "contexts": [{"name": "kubefake", "context": {"cluster": "kubefake", "user": "kubefake"}}],
        "current-context": "kubefake",
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
