"""SpecServe -> the Kubernetes objects that serve it (pure: same input, same output, no I/O).

Per pool a Deployment, a Service and a PodDisruptionBudget; the HTTPRoute the operator owns; a ConfigMap with
the adaptive config (Adaptive strategy); a PodMonitor and a NetworkPolicy when asked. Templates are jinja2 files
next to this module; every value goes through `tojson`, so no spec value can break the YAML.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import jinja2
import yaml

from specserve.api.models import (
    API_VERSION,
    KIND,
    MetricsSourceKind,
    Mode,
    SpecServe,
    SpecServeSpec,
    Weights,
)
from specserve.layout import LABEL_INSTANCE, LABEL_MODE, LABEL_POOL, Flavour, PoolRole, base_labels, pool_layout
from specserve.render.adaptive import sglang_config_file
from specserve.render.engine import ADAPTIVE_CONFIG_DIR, ADAPTIVE_CONFIG_KEY, adaptive_steps, sglang_args, sglang_env
from specserve.render.yamljson import yaml_safe_json
from specserve.versions import default_image

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Pool:
    role: str
    name: str
    replicas: int
    flavour: Flavour
    labels: dict[str, str]
    selector: dict[str, str]
    pod_labels: dict[str, str]
    args: list[str]
    env: list[dict[str, object]]
    adaptive_config: str | None  # ConfigMap name
    adaptive_steps: dict[str, list[int]] | None  # what that ConfigMap holds (computed once per render)
    config_hash: str  # of everything the engine reads: a change rolls the pods
    max_surge: int = 0  # pods a roll may start before stopping one (spare GPUs)
    external_replicas: bool = False  # an HPA/KEDA owns spec.replicas: the Deployment is applied without it


def adaptive_configmap_name(name: str, steps: dict[str, list[int]]) -> str:
    """Named for its content (as kustomize's configMapGenerator names them): a new config is a new ConfigMap, so
    pods keep the file they started with until they roll, and a restarted old pod never reads the new config
    ahead of its rollout (the reconcile prunes the old one once the roll has settled)."""
    digest = hashlib.sha256(sglang_config_file(steps).encode()).hexdigest()[:10]
    return f"{name}-adaptive-{digest}"


def pools(obj: SpecServe, mode: Mode) -> list[Pool]:
    """The pools a SpecServe runs in `mode` (the mode only matters to Restart, which has one pool)."""
    spec, name = obj.spec, obj.metadata.name
    steps = adaptive_steps(spec)
    result = []
    for laid in pool_layout(obj, mode):
        role, flavour = laid.role, laid.flavour
        labels = {**base_labels(name), LABEL_POOL: role}
        args, env = sglang_args(spec, flavour, steps), sglang_env(spec, flavour)
        mounted = steps if flavour.adaptive else None
        result.append(
            Pool(
                role=role,
                name=laid.name,
                replicas=laid.replicas,
                flavour=flavour,
                labels=labels,
                selector={LABEL_INSTANCE: name, LABEL_POOL: role},
                pod_labels={**labels, LABEL_MODE: flavour.mode_label},
                args=args,
                env=env,
                adaptive_config=adaptive_configmap_name(name, mounted) if mounted is not None else None,
                adaptive_steps=mounted,
                config_hash=_config_hash(image_of(spec), args, env, mounted),
                max_surge=laid.shape.max_surge,
                external_replicas=laid.external_replicas,
            )
        )
    return result


def _config_hash(image: str, args: list[str], env: list[dict[str, object]], steps: dict[str, list[int]] | None) -> str:
    """Hash of what the engine reads, so changing a mounted file (the adaptive config) rolls the pods too."""
    payload = {"image": image, "args": args, "env": env, "adaptive": steps}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def image_of(spec: SpecServeSpec) -> str:
    return spec.engine.image or default_image(spec.engine.sglang_version)


def weights(obj: SpecServe, mode: Mode) -> Weights:
    """HTTPRoute weights in `mode`; a pool with no replicas never gets traffic (Weights.served)."""
    pools = obj.spec.pools
    return Weights.served(mode, pools.speculative.replicas, pools.baseline.replicas)


def owner_reference(obj: SpecServe) -> dict[str, Any] | None:
    if not obj.metadata.uid:
        return None  # offline rendering: the owner does not exist yet
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": obj.metadata.name,
        "uid": obj.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _resources(spec: SpecServeSpec) -> dict[str, dict[str, str]]:
    gpus = str(spec.placement.gpus_per_pod)
    out: dict[str, dict[str, str]] = {}
    for kind in ("requests", "limits"):
        given = getattr(spec.engine.resources, kind).model_dump(by_alias=True, exclude_none=True)
        out[kind] = {**given, "nvidia.com/gpu": gpus}
    return out


def _drain_command(spec: SpecServeSpec) -> list[str]:
    """preStop: wait until the engine has no running or queued requests (bounded by the grace period).

    The endpoint is already removed from the Service when preStop runs, so new requests stop arriving.
    """
    budget = max(1, spec.engine.termination_grace_period_seconds - 10)
    script = (
        "import time,urllib.request as u\n"
        f"end=time.time()+{budget}\n"
        "time.sleep(5)\n"
        "while time.time()<end:\n"
        "  try:\n"
        f"    m=u.urlopen('http://127.0.0.1:{spec.engine.port}/metrics',timeout=5).read().decode()\n"
        "  except Exception:\n"
        "    break\n"
        "  busy=[l for l in m.splitlines() if l.startswith(('sglang:num_running_reqs','sglang:num_queue_reqs'))"
        " and float(l.rsplit(' ',1)[1])>0]\n"
        "  if not busy:\n"
        "    break\n"
        "  time.sleep(2)\n"
    )
    return ["python3", "-c", script]


def _probes(spec: SpecServeSpec) -> dict[str, int]:
    delay, period = 30, 10
    return {
        "startup_delay": delay,
        "startup_period": period,
        "startup_failures": max(1, math.ceil((spec.engine.startup_timeout_seconds - delay) / period)),
    }


def _security(spec: SpecServeSpec) -> dict[str, dict[str, Any]]:
    """Pod and container security contexts: no privilege escalation, no capabilities, the runtime's seccomp
    profile, non-root unless runAsUser is 0. The NVIDIA device plugin hands GPUs to unprivileged containers."""
    uid = spec.engine.run_as_user
    pod: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}, "runAsUser": uid}
    if uid != 0:
        # fsGroup makes a PVC cache writable for the non-root user; OnRootMismatch skips the recursive chown of
        # a multi-terabyte model volume on every pod start once it is done.
        pod |= {"runAsNonRoot": True, "runAsGroup": uid, "fsGroup": uid, "fsGroupChangePolicy": "OnRootMismatch"}
    container = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return {"pod": pod, "container": container}


def _strategy(pool: Pool) -> dict[str, int]:
    # GPU pods: a surge pod waits for GPUs, so surge only as far as the user says spare GPUs exist; without
    # surge, stop one pod then start its replacement.
    if pool.max_surge > 0:
        return {"maxSurge": pool.max_surge, "maxUnavailable": 0}
    return {"maxSurge": 0, "maxUnavailable": 1}


def _needs_pdb(pool: Pool) -> bool:
    return pool.external_replicas or pool.replicas > 0


# The labels the chart gives the operator's pods (charts/specserve/templates/deployment.yaml; tests/chart checks
# both ways). The NetworkPolicy admits pods carrying them when the operator scrapes the engines itself.
OPERATOR_POD_LABELS = {"app.kubernetes.io/part-of": "specserve", "app.kubernetes.io/component": "operator"}


def _operator_peer(obj: SpecServe) -> dict[str, str] | None:
    """The operator's pods, when it reads the engines' /metrics itself (switching.metrics.source: Direct): without
    them in the policy its own scrapes are refused and the switching loop never sees the load."""
    return OPERATOR_POD_LABELS if obj.spec.switching.metrics.source is MetricsSourceKind.DIRECT else None


def _network_policy_sources(obj: SpecServe) -> list[str]:
    """Namespaces allowed to reach the engine port: the gateway's proxies and Prometheus."""
    spec = obj.spec
    gateways = list(spec.network_policy.gateway_namespaces)
    if not gateways and spec.routing.gateway is not None:
        gateways = [spec.routing.gateway.namespace or obj.metadata.namespace]
    return list(dict.fromkeys([*gateways, *spec.network_policy.prometheus_namespaces]))


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("specserve.render", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    # `tojson` as YAML reads it back: the default ASCII escapes made an emoji in an env value unloadable.
    env.policies["json.dumps_function"] = yaml_safe_json
    return env


def _template(template: str, **context: Any) -> Manifest:
    text = _environment().get_template(template).render(**context)
    # libyaml's loader when built in: the pure-Python one was most of a reconcile's CPU (26 ms vs 4 ms a render).
    loaded: Manifest = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return loaded


def render(obj: SpecServe, mode: Mode | None = None) -> list[Manifest]:
    """Every object that serves `obj` in `mode` (default: the spec's initial mode)."""
    spec, name, namespace = obj.spec, obj.metadata.name, obj.metadata.namespace
    mode = mode or spec.switching.initial_mode
    owner = owner_reference(obj)
    common = {"namespace": namespace, "owner": owner, "engine": spec.engine}
    the_pools = pools(obj, mode)
    out: list[Manifest] = []

    adaptive = next((p for p in the_pools if p.adaptive_config and p.adaptive_steps is not None), None)
    if adaptive is not None and adaptive.adaptive_config is not None and adaptive.adaptive_steps is not None:
        out.append(
            _template(
                "configmap.yaml.j2",
                name=adaptive.adaptive_config,  # the name pools() gave it
                labels=base_labels(name),
                data={ADAPTIVE_CONFIG_KEY: sglang_config_file(adaptive.adaptive_steps)},
                **common,
            )
        )
    tolerations = [t.model_dump(by_alias=True, exclude_none=True) for t in spec.placement.tolerations]
    for pool in the_pools:
        out.append(
            _template(
                "deployment.yaml.j2",
                pool=pool,
                placement=spec.placement,
                model=spec.model,
                tolerations=tolerations,
                image=image_of(spec),
                resources=_resources(spec),
                security=_security(spec),
                strategy=_strategy(pool),
                probes=_probes(spec),
                drain_command=_drain_command(spec),
                adaptive_dir=ADAPTIVE_CONFIG_DIR,
                **common,
            )
        )
        out.append(_template("service.yaml.j2", pool=pool, **common))
        if _needs_pdb(pool):
            out.append(_template("poddisruptionbudget.yaml.j2", pool=pool, **common))
    if spec.network_policy.enabled:
        out.append(
            _template(
                "networkpolicy.yaml.j2",
                name=name,
                labels=base_labels(name),
                selector={LABEL_INSTANCE: name},
                namespaces=_network_policy_sources(obj),
                operator=_operator_peer(obj),
                **common,
            )
        )

    if spec.routing.gateway is not None:
        w = weights(obj, mode)
        by_role = {PoolRole.SPECULATIVE: w.speculative, PoolRole.BASELINE: w.baseline, PoolRole.ENGINE: 100}
        out.append(
            _template(
                "httproute.yaml.j2",
                name=name,
                labels=base_labels(name),
                gateway=spec.routing.gateway,
                hostnames=spec.routing.hostnames,
                path_prefix=spec.routing.path_prefix,
                backends=[{"name": p.name, "weight": by_role[p.role]} for p in the_pools],
                **common,
            )
        )
    if spec.monitoring.pod_monitor:
        out.append(
            _template(
                "podmonitor.yaml.j2",
                name=name,
                # The rules refuse user labels that set ours; ours come last so they win regardless.
                labels={**spec.monitoring.labels, **base_labels(name)},
                selector={LABEL_INSTANCE: name},
                interval=f"{spec.monitoring.interval_seconds}s",
                **common,
            )
        )
    return out


def to_yaml(manifests: list[Manifest]) -> str:
    return yaml.safe_dump_all(manifests, sort_keys=False, width=120)
