"""`specserve demo --cluster`: the demo's Kubernetes API is a real control plane instead of the fake.

The control plane is the one the cluster test tier starts (tests/cluster/controlplane.py in a checkout of the
repository: etcd, kube-apiserver with TLS, RBAC, ServiceAccount tokens and an audit log, kube-controller-manager,
kube-scheduler, kwok; the Gateway API and Prometheus Operator CRDs; the chart installed by helm). The operator runs as
the chart runs it: with the chart's ServiceAccount token, over TLS, so the real authorizer checks every call.

One piece stays the demo's: pods. Each replica is an emulator process on this machine, so the demo's kubelet runs a
Deployment's pods and reports its status, and the controller-manager runs without its Deployment controller (the two
would both write that status). Everything else the controller-manager does runs as in a cluster.

The binaries come from scripts/kube-binaries.sh (built once from the Go modules, cached); without them, or outside
a checkout, the step fails saying so."""

from __future__ import annotations

import asyncio
import importlib
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]  # the checkout: tools/specserve_tools/demo/realplane.py
STARTER = ROOT / "tests" / "cluster" / "controlplane.py"
# The demo's kubelet plays the Deployment controller (above); every other controller runs.
CONTROLLERS = "*,-deployment-controller"


class NoControlPlaneError(RuntimeError):
    pass


def _starter() -> Any:
    """tests/cluster/controlplane.py of this checkout (imported by path: an installed specserve-tools has none)."""
    if not STARTER.is_file():
        raise NoControlPlaneError(
            f"--cluster needs a checkout of the repository ({STARTER} not found): the real control plane is started "
            "by its tests/cluster/controlplane.py"
        )
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("tests.cluster.controlplane")


@dataclass
class RealPlane:
    plane: Any  # tests.cluster.controlplane.ControlPlane

    @property
    def server(self) -> str:
        return str(self.plane.server)

    def ssl_context(self) -> ssl.SSLContext:
        """The cluster admin's client certificate, for the demo's own client (kubelet, gateway, viewer)."""
        ctx = ssl.create_default_context(cafile=str(self.plane.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.plane.pki / "admin.crt"), str(self.plane.pki / "admin.key"))
        return ctx

    def operator_kubeconfig(self) -> Path:
        """A kubeconfig with a token of the chart's ServiceAccount, as the chart's pod gets."""
        return Path(self.plane.operator_kubeconfig("demo-operator"))

    def stop(self) -> None:
        self.plane.stop()


def _start_blocking(workdir: Path) -> RealPlane:
    module = _starter()
    assets = module.find()
    if isinstance(assets, str):
        raise NoControlPlaneError(f"{assets}. Build them once with: bash scripts/kube-binaries.sh (about 40 minutes "
                                  "cold, from the Go modules; cached in ~/.cache/specserve-kube)")  # fmt: skip
    workdir.mkdir(parents=True, exist_ok=True)
    plane = module.ControlPlane(assets, workdir)
    real = RealPlane(plane)
    try:
        plane.start()
        plane.install_crds()
        plane.install_chart()  # `helm install --wait`: with the Deployment controller, for the chart's Deployment
        # Then without it: restarted with the same flags but --controllers.
        argv, env = plane.argv["kube-controller-manager"]
        plane.argv["kube-controller-manager"] = (
            [f"--controllers={CONTROLLERS}" if a.startswith("--controllers=") else a for a in argv],
            env,
        )
        plane.restart("kube-controller-manager")
    except BaseException:
        plane.stop()
        raise
    return real


async def start(workdir: Path) -> RealPlane:
    """Start it (about half a minute; off the event loop, so the view stays live)."""
    return await asyncio.to_thread(_start_blocking, workdir)
