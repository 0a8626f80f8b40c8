"""A real Kubernetes control plane on loopback, in a temp dir: etcd, kube-apiserver (TLS, RBAC, ServiceAccount tokens,
an audit log), kube-controller-manager, kube-scheduler and kwok (GPU nodes, pods that start after a delay), the
Gateway API and Prometheus Operator CRDs, the chart installed by helm, and the operator run as the chart runs it:
with the chart's ServiceAccount token, over TLS.

The binaries come from $KUBEBUILDER_ASSETS (the envtest convention) or scripts/kube-binaries.sh's cache; `find()`
says which are missing and why, so the tier skips with a reason only when they cannot be had.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
OPERATOR_NS = "specserve-system"
OPERATOR_SA = "specserve"
OPERATOR_USER = f"system:serviceaccount:{OPERATOR_NS}:{OPERATOR_SA}"
GPU_PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H200", "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition")
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# kwok marks a pod with this annotation "true" NotReady (a pool losing its pods while they still exist).
FAIL_ANNOTATION = "specserve.test/fail"
STARTUP_MS = 1500  # kwok's start-up delay before a pod is Running and Ready
NODES_PER_PRODUCT = 3


@dataclass(frozen=True)
class Assets:
    bin: dict[str, Path]
    crds: Path
    kwok_stages: Path


def cache_dirs() -> tuple[Path, Path]:
    """scripts/kube-binaries.sh's cache directories (binaries, CRDs) for the pinned versions (not built here)."""
    out = subprocess.run(["bash", str(ROOT / "scripts/kube-binaries.sh"), "--dir"], capture_output=True, text=True,
                         check=True)  # fmt: skip
    binaries, crds = out.stdout.strip().splitlines()[-2:]
    return Path(binaries), Path(crds)


def find() -> Assets | str:
    """The binaries and CRDs, or why they cannot be had (the reason the tier is skipped)."""
    try:
        cache, crds = cache_dirs()
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"scripts/kube-binaries.sh --dir failed: {exc}"
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    found: dict[str, Path] = {}
    for name in BINARIES:
        for d in ([Path(assets)] if assets else []) + [cache / "bin"]:
            if (d / name).is_file() and os.access(d / name, os.X_OK):
                found[name] = d / name
                break
    missing = [n for n in BINARIES if n not in found]
    if missing:
        return f"{', '.join(missing)} not built: run scripts/kube-binaries.sh (cache {cache})"
    if not (crds / ".done").is_file() or not (cache / "kwok-stages" / ".done").is_file():
        return f"CRDs or kwok stages not downloaded: run scripts/kube-binaries.sh ({crds})"
    if shutil.which("kubectl") is None or shutil.which("helm") is None:
        return "kubectl or helm not on PATH: run scripts/install-kube-tools.sh"
    return Assets(found, crds, cache / "kwok-stages")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (subprocess.CalledProcessError, OSError, ValueError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; last: {last!r}")


def _openssl(d: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)


def make_pki(d: Path) -> None:
    """A cluster CA, the API server's serving certificate, an admin client certificate (system:masters) and the
    ServiceAccount token signing key."""
    d.mkdir(parents=True, exist_ok=True)
    _openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=specserve-test-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-keyout", "ca.key", "-out", "ca.crt")  # fmt: skip
    leaves = {
        "apiserver": ("/CN=kube-apiserver", "serverAuth", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        "admin": ("/O=system:masters/CN=admin", "clientAuth", None),
    }
    for name, (subject, usage, san) in leaves.items():
        _openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{name}.key",
                 "-out", f"{name}.csr")  # fmt: skip
        ext = f"extendedKeyUsage={usage}\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        (d / f"{name}.ext").write_text(ext + (f"{san}\n" if san else ""), encoding="utf-8")
        _openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt")  # fmt: skip
    _openssl(d, "genrsa", "-out", "sa.key", "2048")
    _openssl(d, "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")


def kubeconfig(path: Path, server: str, ca: Path, user: dict[str, str]) -> Path:
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "test", "user": user}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
    }  # fmt: skip
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: ["{OPERATOR_USER}"]
  - level: None
"""


def node(name: str, product: str, gpus: int = 8) -> dict[str, Any]:
    """A kwok node with GPUs: the capacity and the GPU feature discovery labels the render's affinity uses."""
    capacity = {"cpu": "128", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": str(gpus), "ephemeral-storage": "4Ti"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                       "type": "kwok", "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus),
                       "nvidia.com/gpu.present": "true"},
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }  # fmt: skip


def pod_stages(node_stages: Path) -> str:
    """kwok's node stages (initialize, heartbeat with a Lease) and pod stages of our own: a pod becomes Running and
    Ready STARTUP_MS after it is scheduled; a pod annotated FAIL_ANNOTATION turns NotReady; deletion completes."""
    ready = f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: pod-ready}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
      - {{key: .metadata.deletionTimestamp, operator: DoesNotExist}}
      - {{key: .spec.nodeName, operator: Exists}}
      - {{key: .status.podIP, operator: DoesNotExist}}
  delay: {{durationMilliseconds: {STARTUP_MS}, jitterDurationMilliseconds: {STARTUP_MS + 500}}}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: Initialized}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: Ready}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: ContainersReady}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        restartCount: 0
        started: true
        state: {{running: {{startedAt: {{{{ $now | Quote }}}}}}}}
      {{{{ end }}}}
      hostIP: {{{{ NodeIPWith .spec.nodeName | Quote }}}}
      podIP: {{{{ PodIPWith .spec.nodeName false ( or .metadata.uid "" ) ( or .metadata.name "" )
        ( or .metadata.namespace "" ) | Quote }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: pod-fail}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
      - {{key: .metadata.deletionTimestamp, operator: DoesNotExist}}
      - {{key: '.metadata.annotations["{FAIL_ANNOTATION}"]', operator: In, values: ["true"]}}
      - {{key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: In, values: ["True"]}}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: Initialized}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "False", type: Ready, reason: ContainersNotReady}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "False", type: ContainersReady}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        restartCount: 1
        started: false
        state: {{waiting: {{reason: CrashLoopBackOff, message: "killed by the test"}}}}
      {{{{ end }}}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: pod-delete}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
      - {{key: .metadata.deletionTimestamp, operator: Exists}}
  next:
    finalizers: {{empty: true}}
    delete: true
"""
    nodes = [p.read_text(encoding="utf-8") for p in sorted(node_stages.glob("*.yaml"))]
    return "\n---\n".join([*nodes, ready])


@dataclass
class ControlPlane:
    assets: Assets
    workdir: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    server: str = ""
    argv: dict[str, tuple[list[str], dict[str, str]]] = field(default_factory=dict)  # how each was started
    order: list[str] = field(default_factory=list)  # first start order

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def admin(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def _start(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}.log").open("ab")  # appended to: a restarted process keeps its history
        self.argv[name] = (list(argv), dict(env or {}))
        if name not in self.order:
            self.order.append(name)
        proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
                                env={**os.environ, **(env or {})}, start_new_session=True)  # fmt: skip
        self.procs[name] = proc
        return proc

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.workdir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def _alive(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        argv = ["kubectl", f"--kubeconfig={kubeconfig or self.admin}", *args]
        out = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=120, check=False)
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {out.returncode}\n{out.stdout}\n{out.stderr}")
        return out

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def apply(self, doc: dict[str, Any] | str, *extra: str) -> None:
        text = doc if isinstance(doc, str) else json.dumps(doc)
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", *extra, input=text)

    def start(self) -> None:
        b, d = self.assets.bin, self.workdir
        make_pki(self.pki)
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        self._start("etcd", [
            str(b["etcd"]), "--data-dir", str(d / "etcd"), "--name", "default",
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--quota-backend-bytes", str(2 << 30), "--log-level", "warn",
        ])  # fmt: skip
        (d / "audit-policy.yaml").write_text(AUDIT_POLICY, encoding="utf-8")
        p = self.pki
        self.server = f"https://127.0.0.1:{api_port}"
        self._start("kube-apiserver", [
            str(b["kube-apiserver"]), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", f"--secure-port={api_port}", "--advertise-address=127.0.0.1",
            f"--cert-dir={d / 'apiserver-certs'}",
            f"--tls-cert-file={p / 'apiserver.crt'}", f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'ca.crt'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p / 'sa.pub'}", f"--service-account-signing-key-file={p / 'sa.key'}",
            "--authorization-mode=RBAC", "--service-cluster-ip-range=10.96.0.0/16",
            "--endpoint-reconciler-type=none", "--allow-privileged=true",
            f"--audit-policy-file={d / 'audit-policy.yaml'}", f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=0",
        ])  # fmt: skip
        kubeconfig(self.admin, self.server, p / "ca.crt",
                   {"client-certificate": str(p / "admin.crt"), "client-key": str(p / "admin.key")})  # fmt: skip

        wait_for(self.apiserver_ready, 180, "kube-apiserver /readyz")
        auth = [f"--authentication-kubeconfig={self.admin}", f"--authorization-kubeconfig={self.admin}",
                "--bind-address=127.0.0.1"]  # fmt: skip
        self._start("kube-controller-manager", [
            str(b["kube-controller-manager"]), f"--kubeconfig={self.admin}", *auth, f"--secure-port={free_port()}",
            "--leader-elect=false", f"--service-account-private-key-file={p / 'sa.key'}",
            f"--root-ca-file={p / 'ca.crt'}", "--use-service-account-credentials=false",
            "--controllers=*", "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
        ])  # fmt: skip
        self._start("kube-scheduler", [
            str(b["kube-scheduler"]), f"--kubeconfig={self.admin}", *auth, f"--secure-port={free_port()}",
            "--leader-elect=false",
        ])  # fmt: skip
        (d / "kwok.yaml").write_text(pod_stages(self.assets.kwok_stages), encoding="utf-8")
        self._start("kwok", [
            str(b["kwok"]), f"--kubeconfig={self.admin}", f"--config={d / 'kwok.yaml'}",
            "--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.244.0.0/16", "--node-ip=10.0.0.1", f"--server-address=127.0.0.1:{free_port()}",
            "--node-lease-duration-seconds=40",
        ])  # fmt: skip
        for i, product in enumerate(GPU_PRODUCTS):
            for j in range(NODES_PER_PRODUCT):
                self.add_node(node(f"gpu-{i}-{j}", product))
        self.add_node(node("cpu-0", "none", gpus=0))

        def nodes_ready() -> bool:
            for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
                self._alive(name)
            items = self.get("nodes")["items"]
            return len(items) == NODES_PER_PRODUCT * len(GPU_PRODUCTS) + 1 and all(
                any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
                for n in items
            )

        wait_for(nodes_ready, 120, "the kwok nodes Ready")
        # The service account controller (kube-controller-manager) creates `default` in each namespace.
        wait_for(lambda: self.kubectl("get", "sa", "default", "-n", "default", check=False).returncode == 0,
                 60, "the default ServiceAccount")  # fmt: skip

    def apiserver_ready(self) -> bool:
        self._alive("etcd")
        self._alive("kube-apiserver")
        return self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0

    def restart(self, name: str, down: float = 0.0, timeout: float = 180) -> None:
        """Stop process `name` (SIGTERM: the API server closes its watches) and start it again with the same flags
        and ports after `down` seconds; for the API server, wait until it is ready again."""
        argv, env = self.argv[name]
        self.stop_process(name)
        time.sleep(down)
        self._start(name, argv, env)
        if name == "kube-apiserver":
            wait_for(self.apiserver_ready, timeout, "kube-apiserver /readyz after its restart")

    def add_node(self, doc: dict[str, Any]) -> None:
        """Create a kwok node, then set its capacity through the status subresource (as a kubelet does; a create
        may drop status, and kwok keeps the capacity it finds)."""
        self.kubectl("create", "-f", "-", input=json.dumps(doc))
        self.kubectl("patch", "node", doc["metadata"]["name"], "--subresource=status", "--type=merge",
                     "-p", json.dumps({"status": doc["status"]}))  # fmt: skip

    def install_crds(self) -> None:
        for path in sorted(self.assets.crds.glob("*.yaml")):
            self.kubectl("apply", "--server-side", "-f", str(path))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")

    def install_chart(self, values: Sequence[str] = ()) -> None:
        """`helm install` of the chart: SpecServe's CRD, the operator's ServiceAccount, RBAC and Lease Role. Its
        Deployment's pod is a kwok pod (no process): the operator runs here (`run_operator`), with that
        ServiceAccount's token and the chart's arguments."""
        sets = [a for v in values for a in ("--set", v)]
        subprocess.run(["helm", "install", "specserve", str(ROOT / "charts/specserve"), "-n", OPERATOR_NS,
                        "--create-namespace", f"--kubeconfig={self.admin}", "--wait", "--timeout", "120s", *sets],
                       check=True, capture_output=True, text=True)  # fmt: skip
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/specserves.specserve.io")

    def operator_kubeconfig(self, name: str = "operator", server: str | None = None) -> Path:
        """A kubeconfig with a token of the chart's ServiceAccount (TokenRequest), as a pod of the chart gets; for
        the API server at `server` (default: this plane's; a proxy in front of it, another API server)."""
        token = self.kubectl("create", "token", OPERATOR_SA, "-n", OPERATOR_NS, "--duration=2h").stdout.strip()
        return kubeconfig(self.workdir / f"{name}.kubeconfig", server or self.server, self.pki / "ca.crt",
                          {"token": token})  # fmt: skip

    def user_kubeconfig(self, user: str, namespace: str, *cluster_roles: str) -> Path:
        """A kubeconfig for a person: ServiceAccount `user` of `namespace` (a token, over TLS), bound in that
        namespace to `cluster_roles` (RoleBindings), and no more."""
        self.kubectl("create", "serviceaccount", user, "-n", namespace)
        for role in cluster_roles:
            self.kubectl("create", "rolebinding", f"{user}-{role}", "-n", namespace, f"--clusterrole={role}",
                         f"--serviceaccount={namespace}:{user}")  # fmt: skip
        token = self.kubectl("create", "token", user, "-n", namespace, "--duration=2h").stdout.strip()
        return kubeconfig(self.workdir / f"{namespace}-{user}.kubeconfig", self.server, self.pki / "ca.crt",
                          {"token": token})  # fmt: skip

    def run_operator(self, pod: str, *extra: str, metrics_port: int | None = None,
                     server: str | None = None) -> subprocess.Popen[bytes]:  # fmt: skip
        """`specserve run` with the chart's arguments, as the chart's ServiceAccount, over TLS (to `server`)."""
        cfg = self.operator_kubeconfig(pod, server)
        argv = [sys.executable, "-m", "specserve.cli", "run", "--all-namespaces", "--leader-elect",
                f"--leader-election-namespace={OPERATOR_NS}", "--leader-election-name=specserve",
                "--lease-seconds=15", f"--metrics-port={metrics_port or free_port()}",
                "--prometheus-url=http://127.0.0.1:9", "--log-level=info", *extra]  # fmt: skip
        env = {"KUBECONFIG": str(cfg), "POD_NAME": pod, "POD_NAMESPACE": OPERATOR_NS, "PYTHONUNBUFFERED": "1"}
        return self._start(f"operator-{pod}", argv, env)

    def stop_process(self, name: str, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def stop(self) -> None:
        # The operators first, then in reverse start order: kwok, the controllers, the API server (restarted or
        # not), then etcd.
        names = sorted(self.procs, key=lambda n: (not n.startswith("operator-"), -self.order.index(n)))
        for name in names:
            self.stop_process(name, timeout=15)

    def audit(self, user: str = OPERATOR_USER) -> Iterator[dict[str, Any]]:
        """The API server's audit events for `user` (the operator's ServiceAccount), oldest first."""
        if not self.audit_log.exists():
            return
        for line in self.audit_log.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if (event.get("user") or {}).get("username") == user:
                yield event

    def writes(self, since: float = 0.0, user: str = OPERATOR_USER) -> list[str]:
        """The operator's writes (verb resource/name) audited at or after `since` (the audit log's line count)."""
        out = []
        for i, event in enumerate(self.audit(user)):
            if i < since or event.get("verb") not in WRITE_VERBS:
                continue
            ref = event.get("objectRef") or {}
            sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
            code = (event.get("responseStatus") or {}).get("code")
            out.append(f"{event['verb']} {ref.get('resource')}/{ref.get('name')}{sub} {code}")
        return out

    def audit_count(self, user: str = OPERATOR_USER) -> int:
        return sum(1 for _ in self.audit(user))
