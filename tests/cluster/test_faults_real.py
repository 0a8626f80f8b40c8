"""Faults a real cluster can show, under the real operator process: etcd stopped for 30 s, a real validating webhook
refusing writes to one pool, latency through a proxy in front of the API server, and 410 Gone on a re-watch after
etcd compacted the history the operator's watch would resume from.

Runs after test_cluster.py (files run in name order): it stops that module's operators and runs its own, with a
Lease that outlives the etcd outage (with the chart's 15 s the leader stops acting after 10 s without a renewal and
its pod restarts: right in production, but nothing restarts it here)."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.controlplane import OPERATOR_USER, WRITE_VERBS, ControlPlane, free_port, wait_for
from tests.cluster.faults import DelayProxy, Webhook, applied, etcd_compact
from tests.cluster.test_cluster import (
    JSON,
    RESYNC,
    accept_routes,
    condition,
    deployments,
    example,
    holder,
    namespace,
    pods,
    quiet,
    sample,
    specserve,
    wait_ready,
    writes_in,
)

POD = "pod-f"
LEASE = "--lease-seconds=120"


@pytest.fixture(scope="module")
def operator(plane: ControlPlane) -> Iterator[ControlPlane]:
    for name in [n for n in plane.procs if n.startswith("operator-")]:
        plane.stop_process(name)
    plane.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": "llm-serving"}, "value": 1000})  # fmt: skip
    start(plane, POD)
    yield plane
    plane.stop_process(f"operator-{POD}")


METRICS: dict[str, int] = {}


def start(plane: ControlPlane, pod: str, server: str | None = None) -> None:
    METRICS[pod] = free_port()
    plane.run_operator(pod, f"--resync-seconds={RESYNC}", "--full-resync-every=1", LEASE, metrics_port=METRICS[pod],
                       server=server)  # fmt: skip
    wait_for(lambda: holder(plane) == pod, 120, f"{pod} holding the Lease", interval=1)


def swap(plane: ControlPlane, old: str, new: str, server: str | None = None) -> None:
    """Stop operator `old` (it hands its Lease over) and start `new` against `server`."""
    plane.stop_process(f"operator-{old}")
    start(plane, new, server)


def alive(plane: ControlPlane, pod: str = POD) -> None:
    proc = plane.procs[f"operator-{pod}"]
    assert proc.poll() is None, f"the operator exited with {proc.returncode}:\n{plane.log_tail(f'operator-{pod}', 60)}"


def log(plane: ControlPlane, pod: str = POD) -> str:
    return (plane.workdir / f"operator-{pod}.log").read_text(errors="replace")


def metrics(pod: str = POD) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS[pod]}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def served(ns: str) -> JSON:
    """The two-pool H200 example, evaluated every 3 s (not 15): its load is reported unknown 9 s after the start."""
    return example("llama31-8b-h200.yaml", ns, switching={"evaluationIntervalSeconds": 3})


def settled(plane: ControlPlane, prefix: str, timeout: float = 180) -> tuple[str, str]:
    """A fresh namespace with the two-pool H200 example Ready, its load reported unknown (the tier has no
    Prometheus: MetricsAvailable turns False after three evaluations, one status write and an Event the fault must
    not be blamed for), and quiet: (namespace, name)."""
    ns = namespace(plane, prefix)
    doc = served(ns)
    plane.apply(doc)
    name = doc["metadata"]["name"]
    wait_ready(plane, ns, name, timeout)
    wait_for(lambda: condition(specserve(plane, ns, name), "MetricsAvailable").get("status") == "False", timeout,
             "the load reported unknown", interval=1)  # fmt: skip
    assert quiet(plane, ns, 3 * RESYNC) == [], "no steady state before the fault"
    return ns, name


def pod_uids(plane: ControlPlane, ns: str) -> set[str]:
    return {p["metadata"]["uid"] for p in pods(plane, ns)}


def serving_safely(weights: dict[str, int], ready: dict[str, int]) -> None:
    assert sum(w for p, w in weights.items() if ready.get(p, 0) > 0) > 0, f"no Ready pool has weight: {weights} {ready}"
    for pool, weight in weights.items():
        assert weight == 0 or ready.get(pool, 0) >= 1, f"traffic routed to {pool} with no ready pod: {weights} {ready}"


# ------------------------------------------------------------------------------------------ etcd stopped


def unavailable(pod: str = POD) -> float:
    """specserve_api_unavailable_total, all series: the operator's API calls that got no answer, 429 or a 5xx."""
    return sum(float(v) for v in re.findall(r"^specserve_api_unavailable_total{[^}]*} (\S+)$", metrics(pod), re.M))


ETCD_DOWN = 30.0


def etcd_outage(plane: ControlPlane, failures: float) -> float | None:
    """etcd stopped for ETCD_DOWN seconds (SIGTERM), the operator checked alive each second, then started again
    with the same data and flags; returns when specserve_api_unavailable_total first rose above `failures`."""
    plane.stop_process("etcd")
    stopped = time.monotonic()
    named_after: float | None = None
    while time.monotonic() - stopped < ETCD_DOWN:
        alive(plane)
        if named_after is None and unavailable() > failures:
            named_after = time.monotonic() - stopped
        time.sleep(1)
    argv, env = plane.argv["etcd"]
    plane._start("etcd", argv, env)
    wait_for(plane.apiserver_ready, 120, "kube-apiserver ready with etcd back", interval=1)
    return named_after


def nodes_ready(plane: ControlPlane) -> bool:
    return all(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
               for n in plane.get("nodes")["items"])  # fmt: skip


def kubelet_reports_ready(plane: ControlPlane) -> None:
    """Play the kubelets of nodes Ready again: a pod the node lifecycle controller marked not Ready (its Ready
    condition False, its containers still ready), in any namespace, is reported Ready again (kwok's stages here
    never do; the tier's later tests need the earlier tests' pools whole)."""
    for pod in plane.get("pods", "-A")["items"]:
        status = pod.get("status") or {}
        ready: JSON = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})
        containers = status.get("containerStatuses") or []
        if ready.get("status") == "False" and containers and all(c.get("ready") for c in containers):
            patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
            plane.kubectl("patch", "pod", pod["metadata"]["name"], "-n", pod["metadata"]["namespace"],
                          "--subresource=status", "-p", json.dumps(patch))  # fmt: skip


def not_ready_nodes(plane: ControlPlane) -> int:
    """How many times the node lifecycle controller marked a node NotReady (its Events, counted)."""
    events = plane.get("events", "-n", "default", "--field-selector", "reason=NodeNotReady")["items"]
    return sum(int(e.get("count") or 1) for e in events)


@pytest.mark.timeout(600)
def test_etcd_stopped_for_30_s_disrupts_nothing_and_the_operator_settles_back_to_no_writes(
    operator: ControlPlane,
) -> None:
    """What should happen: the API server answers 5xx or times out on everything that needs etcd; the operator's
    calls fail and are retried; it keeps its Lease (renew deadline 80 s > 30 s: a failed renewal is no loss),
    deletes nothing, moves no weight (an error is no pool without Ready pods), re-applies nothing, and names the
    outage on its metrics while it lasts (specserve_api_unavailable_total: status cannot be written without etcd).
    Once etcd is back: what the cluster reports then is followed (nodes marked NotReady: a failover), at most what
    the switching loop saw of it (MetricsAvailable's reason KubeReadFailed when its Deployment read failed, then
    back, and an Event), never all weight off, no pod replaced, then no write; and a spec change after it is applied
    (see docs/fault-tolerance.md: once in four runs the operator's SpecServe watch delivered nothing after it)."""
    plane = operator
    ns, name = settled(plane, "etcd")
    uids = pod_uids(plane, ns)
    weights, ready, _ = sample(plane, ns, name)
    serving_safely(weights, ready)
    templates = {n: d["spec"]["template"] for n, d in deployments(plane, ns).items()}
    leading = log(plane).count("leading as")
    failures = unavailable()
    nodes_not_ready_before = not_ready_nodes(plane)
    start_ = plane.audit_count()
    watched = watch(plane, ns, name)

    named_after = etcd_outage(plane, failures)
    print(f"\nspecserve_api_unavailable_total rose {named_after} s into the etcd outage")
    assert named_after is not None, "the outage was never named on the operator's metrics while it lasted"
    alive(plane)
    assert holder(plane) == POD
    assert log(plane).count("leading as") == leading, "leadership changed hands during the outage"
    assert "lost the lease" not in log(plane) and "could not renew the lease for" not in log(plane)

    # Serving from here on: some weight, always (never all weight off), until the cluster is whole again.
    def whole() -> bool:
        accept_routes(plane, ns)
        w, _, _ = sample(plane, ns, name)
        assert sum(w.values()) > 0, f"all weight off: {w}"
        if not nodes_ready(plane):
            return False
        kubelet_reports_ready(plane)
        return condition(specserve(plane, ns, name), "Ready").get("status") == "True"

    wait_for(whole, 180, "every node and the SpecServe Ready again", interval=0.5)
    after, ready_after, _ = sample(plane, ns, name)
    serving_safely(after, ready_after)
    assert pod_uids(plane, ns) == uids, "a pool's pods were replaced during the outage"
    assert {n: d["spec"]["template"] for n, d in deployments(plane, ns).items()} == templates
    assert quiet(plane, ns, 3 * RESYNC) == [], "the operator still writes after etcd came back"
    outage = writes_in(plane, ns, start_)
    # kwok's node Leases could not be renewed either: when the node lifecycle controller then saw them stale, it
    # marked the nodes NotReady and their pods not Ready (as after a real etcd outage that outlasts the grace
    # period), and the operator failed traffic over to a pool still Ready: a route write, nothing else.
    not_ready = not_ready_nodes(plane) > nodes_not_ready_before
    print(f"operator writes in {ns} across the etcd outage (nodes marked NotReady: {not_ready}): {outage}")
    owned = [w for w in outage if not w.split()[1].startswith(("specserves/", "events/"))]
    if not_ready:
        assert all(w.startswith("patch httproutes/") for w in owned), f"more than failovers written: {outage}"
    else:
        assert after == weights, f"weights moved with every pool Ready: {weights} -> {after}"
        assert owned == [], f"owned objects written across the outage: {outage}"
    assert not [w for w in outage if w.startswith("delete ")], outage
    # Still reconciling: a spec change after the outage is applied (once in four runs the operator's SpecServe
    # watch delivered nothing after the outage; the resync's LIST of SpecServes catches what it missed).
    change_applied(plane, ns, name, templates, watched)
    alive(plane)


def watch(plane: ControlPlane, ns: str, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    """A watch of the SpecServe of our own, beside the operator's (what the API server sends), into a file."""
    path = plane.workdir / f"watch-{ns}.json"
    with path.open("w") as out:
        proc = subprocess.Popen(["kubectl", f"--kubeconfig={plane.admin}", "get", "specserve", name, "-n", ns,
                                 "--watch", "-o", "json"], stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    return proc, path


def change_applied(
    plane: ControlPlane, ns: str, name: str, templates: JSON, watched: tuple[subprocess.Popen[bytes], Path]
) -> None:
    """A spec change applied within 120 s; prints the generations our own watch saw and what the resync caught."""
    doc = served(ns)
    doc["spec"]["engine"]["memFractionStatic"] = 0.76
    plane.apply(doc)
    generation = specserve(plane, ns, name)["metadata"]["generation"]

    def changed() -> bool:
        accept_routes(plane, ns)
        return any(d["spec"]["template"] != templates[n] for n, d in deployments(plane, ns).items())

    proc, path = watched
    try:
        wait_for(changed, 120, "the spec change after the outage applied", interval=1)
    except AssertionError:
        print(f"the operator's log, last lines:\n{plane.log_tail(f'operator-{POD}', 80)}")
        raise
    finally:
        proc.terminate()
        seen = sorted({int(g) for g in re.findall(r'"generation": (\d+)', path.read_text(errors="replace"))})
        print(f"generations our own watch of the SpecServe saw: {seen} (the change: {generation})")
        print(
            f"spec changes the resync's LIST caught (specserve_watch_stale_total): {stale_bodies()}; kopf's "
            f"throttling of an object after an error outside the handlers: {log(plane).count('Throttling for')}"
        )


def stale_bodies(pod: str = POD) -> float:
    """specserve_watch_stale_total: SpecServes whose spec the resync's LIST found newer than the watch's body."""
    return sum(float(v) for v in re.findall(r"^specserve_watch_stale_total(?:{[^}]*})? (\S+)$", metrics(pod), re.M))


# ------------------------------------------------------------------------------------------ a refusing webhook


def degraded(plane: ControlPlane, ns: str, name: str) -> JSON:
    cond = condition(specserve(plane, ns, name), "Degraded")
    return cond if cond.get("status") == "True" else {}


def test_a_real_webhook_refusing_one_pools_deployment_is_named_and_the_other_pool_keeps_serving(
    operator: ControlPlane, tmp_path: Path
) -> None:
    plane = operator
    ns, name = settled(plane, "hook")
    pools = sorted(deployments(plane, ns))
    frozen = pools[0]
    before = {n: d["spec"]["template"] for n, d in deployments(plane, ns).items()}
    with Webhook(tmp_path / "webhook", deny={frozen}) as hook, applied(plane, hook.configuration(f"freeze-{ns}", ns)):
        # The webhook is called before the change (an admin's no-op apply is admitted or refused as the operator's)
        wait_for(lambda: plane.kubectl("annotate", "deployment", frozen, "-n", ns, "specserve.test/probe=1",
                                       "--overwrite", check=False).returncode != 0, 30,
                 "the webhook refusing the frozen Deployment")  # fmt: skip
        doc = served(ns)
        doc["spec"]["engine"]["memFractionStatic"] = 0.77
        plane.apply(doc)

        def named() -> JSON:
            accept_routes(plane, ns)
            serving_safely(*sample(plane, ns, name)[:2])
            cond = degraded(plane, ns, name)
            return cond if f"Deployment/{frozen}" in cond.get("message", "") else {}

        cond = wait_for(named, 120, "the refusal named in Degraded", interval=1)
        assert hook.message in cond["message"], cond
        refused = (specserve(plane, ns, name)["status"].get("rollout") or {}).get("refused") or []
        assert f"Deployment/{frozen}" in refused, refused
        # The other pool is still served (rolled to the change or not), and traffic is only on Ready pools.
        deadline = time.monotonic() + 4 * RESYNC
        while time.monotonic() < deadline:
            accept_routes(plane, ns)
            weights, ready, _ = sample(plane, ns, name)
            serving_safely(weights, ready)
            time.sleep(0.5)
        assert deployments(plane, ns)[frozen]["spec"]["template"] == before[frozen]
        assert any(not allowed and n == frozen for _, n, allowed in hook.seen), hook.seen
        alive(plane)
        events = plane.get("events", "-n", ns, "--field-selector", "reason=ApplyFailed")["items"]
        assert [e for e in events if frozen in e.get("message", "")], "no ApplyFailed Warning event"
    # The webhook removed: the refused change goes out, both pools converge, the report clears, then quiet.
    samples = []

    def converged() -> bool:
        accept_routes(plane, ns)
        weights, ready, rolling = sample(plane, ns, name)
        samples.append((weights, ready))
        serving_safely(weights, ready)
        live = deployments(plane, ns)
        obj = specserve(plane, ns, name)
        return (all(live[n]["spec"]["template"] != before[n] for n in before) and not any(rolling.values())
                and condition(obj, "Ready").get("status") == "True" and not degraded(plane, ns, name))  # fmt: skip

    wait_for(converged, 240, "the change applied to both pools once the webhook is gone", interval=0.5)
    assert quiet(plane, ns, 3 * RESYNC) == []
    alive(plane)


# ------------------------------------------------------------------------------------------ latency


def test_200_to_500_ms_per_chunk_through_a_proxy_the_operator_converges_without_duplicate_writes(
    operator: ControlPlane,
) -> None:
    plane = operator
    port = int(plane.server.rsplit(":", 1)[1])
    with DelayProxy(port, delay=(0.2, 0.5)) as proxy:
        swap(plane, POD, "pod-slow", proxy.url)
        try:
            ns, _ = settled(plane, "slow", timeout=300)
            assert quiet(plane, ns, 4 * RESYNC) == [], "no steady state under latency"
            writes = writes_in(plane, ns)
            print(f"\nwrites through the slow proxy ({proxy.connections} connections): {writes}")
            # Each owned object created once: one apply that created it, no write raced by a slow answer into a
            # second one, nothing deleted, no conflict.
            owned = [w for w in writes if not w.split()[1].startswith(("specserves/", "events/"))]
            assert not [w for w in writes if w.startswith("delete ")], writes
            assert not [w for w in writes if w.endswith((" 409", " 422", " 400"))], writes
            per_object: dict[str, int] = {}
            for w in owned:
                per_object[w.split()[1]] = per_object.get(w.split()[1], 0) + 1
            deployment_applies = {k: v for k, v in per_object.items() if k.startswith("deployments/")}
            assert deployment_applies and all(v == 1 for v in deployment_applies.values()), writes
            alive(plane, "pod-slow")
        finally:
            swap(plane, "pod-slow", POD)


# ------------------------------------------------------------------------------------------ 410 on re-watch


def second_apiserver(plane: ControlPlane) -> tuple[str, Path]:
    """Another kube-apiserver on the same etcd (as an HA control plane has), with its watch cache off: watches go
    to etcd, so a compaction makes a re-watch from an older resourceVersion end in 410 Gone. (Its own audit log.)"""
    argv, env = plane.argv["kube-apiserver"]
    port = free_port()
    audit = plane.workdir / "audit-2.log"
    argv = [a for a in argv if not a.startswith(("--secure-port=", "--audit-log-path=", "--cert-dir="))]
    argv += [f"--secure-port={port}", f"--audit-log-path={audit}", f"--cert-dir={plane.workdir / 'certs-2'}",
             "--watch-cache=false"]  # fmt: skip
    plane._start("kube-apiserver-2", argv, env)
    server = f"https://127.0.0.1:{port}"
    wait_for(lambda: plane.kubectl("--server", server, "get", "--raw", "/readyz", check=False).returncode == 0, 120,
             "the second kube-apiserver ready")  # fmt: skip
    return server, audit


def audited_writes(audit: Path, ns: str, start: int = 0) -> list[str]:
    out = []
    events = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()] if audit.exists() else []
    mine = [e for e in events if (e.get("user") or {}).get("username") == OPERATOR_USER]
    for e in mine[start:]:
        ref = e.get("objectRef") or {}
        if e.get("verb") in WRITE_VERBS and ref.get("namespace") == ns:
            code = (e.get("responseStatus") or {}).get("code")
            out.append(f"{e['verb']} {ref.get('resource')}/{ref.get('name')}/{ref.get('subresource', '')} {code}")
    return out


def audit_len(audit: Path) -> int:
    return sum(1 for line in audit.read_text(encoding="utf-8").splitlines() if OPERATOR_USER in line)


def watch_rvs(audit: Path, start: int, resource: str) -> list[tuple[str, int]]:
    """The operator's watches and cluster-wide LISTs (kopf's relist) of `resource`, from its `start`-th audit event:
    ("watch", resourceVersion) or ("list", 0)."""
    out: list[tuple[str, int]] = []
    events = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    mine = [e for e in events if (e.get("user") or {}).get("username") == OPERATOR_USER]
    for e in mine[start:]:
        ref, uri = e.get("objectRef") or {}, e.get("requestURI", "")
        if ref.get("resource") != resource or ref.get("namespace"):
            continue
        started = e.get("stage") == "ResponseStarted"  # a watch is audited when it starts and when it ends
        if e.get("verb") == "watch" and started and (m := re.search(r"resourceVersion=(\d+)", uri)):
            out.append(("watch", int(m.group(1))))
        elif e.get("verb") == "list" and "labelSelector" not in uri:
            out.append(("list", 0))
    return out


def test_a_rewatch_from_a_compacted_resource_version_gets_410_and_the_operator_relists_without_writes(
    operator: ControlPlane,
) -> None:
    """kopf resumes a broken watch from the last resourceVersion it saw. Here that version is compacted away in
    etcd (as the API server's compactor does every 5 minutes) while the operator's connections are cut: the
    re-watch gets 410 Gone, kopf lists again (every object replayed) and watches from the new version. What
    should happen: nothing written for objects that did not change, and changes still reconciled."""
    plane = operator
    server, audit = second_apiserver(plane)
    port = int(server.rsplit(":", 1)[1])
    etcd = next(a for a in plane.argv["etcd"][0] if a.startswith("http://127.0.0.1:"))
    with DelayProxy(port) as proxy:
        swap(plane, POD, "pod-gone", proxy.url)
        try:
            ns, _ = settled(plane, "gone")
            start_ = audit_len(audit)
            other = namespace(plane, "churn")  # history moves on past the versions the operator last saw
            for i in range(5):
                plane.kubectl("create", "configmap", f"c{i}", "-n", other)
            revision = etcd_compact(etcd)
            proxy.cut()

            def relisted() -> dict[str, list[tuple[str, int]]]:
                seen = {r: watch_rvs(audit, start_, r) for r in ("deployments", "specserves")}
                return seen if all(("list", 0) in calls for calls in seen.values()) else {}

            seen = wait_for(relisted, 60, "kopf's relist after the 410", interval=1)
            for resource, calls in seen.items():
                # A re-watch from a compacted version (the 410), then a LIST, then a watch from a version after it.
                stale = next(i for i, (verb, rv) in enumerate(calls) if verb == "watch" and rv < revision)
                listed = calls.index(("list", 0), stale)
                assert any(verb == "watch" and rv >= revision for verb, rv in calls[listed:]), (resource, calls)
            assert "required revision has been compacted" in plane.log_tail("kube-apiserver-2", 200)
            time.sleep(3 * RESYNC)
            alive(plane, "pod-gone")
            writes = audited_writes(audit, ns, start_)
            print(f"\ncompacted at revision {revision}; the operator's watches after: {seen}; writes: {writes}")
            assert writes == [], f"the relist after the 410 wrote: {writes}"
            # Still reconciling: a change after the relist is applied.
            doc = served(ns)
            doc["spec"]["engine"]["memFractionStatic"] = 0.76
            before = {n: d["spec"]["template"] for n, d in deployments(plane, ns).items()}
            plane.apply(doc)
            wait_for(lambda: any(d["spec"]["template"] != before[n] for n, d in deployments(plane, ns).items()),
                     120, "the change applied after the relist", interval=1)  # fmt: skip
            assert "Traceback" not in log(plane, "pod-gone"), log(plane, "pod-gone")[-3000:]
        finally:
            swap(plane, "pod-gone", POD)
            plane.stop_process("kube-apiserver-2")
