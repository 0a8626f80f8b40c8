"""A fake Kubernetes API server that behaves like a real one where SpecServe depends on it.

The operator never imports this package. Tests (tests/integration: the real kopf operator talks HTTP to it) and
`specserve demo` (which runs it as the cluster) do. Unlike kmock, which stores what it is sent, the fake:

- assigns ``metadata.uid``, ``creationTimestamp``; bumps a global ``resourceVersion`` on every write that changes
  something (a no-op write changes nothing and emits no watch event, like the real server); ``metadata.generation``
  starts at 1 and increments only when something outside ``metadata`` and ``status`` changes;
- normalises stored objects per kind: drops ``omitempty`` zero values (``readOnly: false``, ``value: ""``, empty
  lists and maps, nulls) and fills in the defaults of the kinds the operator renders (Deployment strategy,
  probes, ``terminationMessagePath``, ``imagePullPolicy``, Service ``sessionAffinity``/``clusterIP``/``ipFamilies``,
  port ``protocol``/``targetPort``, HTTPRoute backendRef ``group``/``kind``/``weight``, canonical quantities, ...);
- implements merge patch (RFC 7386), strategic merge patch (containers/env/ports/volumes/... merged by key),
  JSON patch (RFC 6902, incl. ``test``) and server-side apply with ``metadata.managedFields`` (fields the same
  manager stops applying are removed; conflicts with other managers -> 409 unless ``force=true``);
- the ``/status`` subresource changes only ``.status``; patches to the main resource ignore ``.status`` for kinds
  that have the subresource;
- a client-sent ``uid``/``resourceVersion``/``generation`` on create is ignored; a ``resourceVersion`` in a PUT
  or patch body is a precondition (409 Conflict when stale);
- validates: built-in kinds against the official JSON schemas (kubernetes_validate, 1.35) plus the API-server
  rules the schemas do not express (label syntax, tolerations, requests <= limits, node selector keys); custom
  resources against their CRD's ``openAPIV3Schema`` (pruning unknown fields, applying defaults) and CEL rules
  (``x-kubernetes-validations``; unchanged values are not re-checked, as with the server's validation
  ratcheting). Failures answer 422 with a ``Status`` body naming the field. Custom resources take no strategic
  merge patch (415);
- DELETE honours finalizers (``deletionTimestamp`` first), garbage-collects dependents by ``ownerReferences`` uid
  (recursively; also a dependent created with no living owner, shortly after), and deleting a namespace deletes
  what is inside. Namespaced objects need their Namespace (404 without it, 403 while it terminates);
- LIST items of built-in kinds carry no ``apiVersion``/``kind`` (as on a real server; GET and watch events do);
- LIST with ``labelSelector`` (``k=v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``, ``k notin (a,b)``) and
  ``fieldSelector`` (``metadata.name``, ``metadata.namespace``); WATCH from a ``resourceVersion`` (410 Gone when it
  is older than the kept history), honouring ``timeoutSeconds``;
- optionally (``block_owner_deletion=False``) the OwnerReferencesPermissionEnforcement admission plugin: setting
  ``blockOwnerDeletion: true`` without ``update`` on the owner's ``/finalizers`` is 403 Forbidden;
- discovery (``/api``, ``/apis``, ``/api/v1``, ``/apis/{group}/{version}``, ``/version``) as kopf scans it, both
  cluster-wide and namespaced; CRDs are listed under ``apiextensions.k8s.io/v1``;
- records every request and injects faults: refused writes by object (``api.faults.refuse(kind, name=, verb=,
  status=, times=)``), slow and hung calls by kind and verb (``faults.slow``/``faults.hang``), or any status code,
  delay or hang per method and path (``faults.add``);
- mutating admission (``api.mutating_webhook(kind, mutate, manager=)``: the webhook's fields are its own in
  managedFields), writes by other field managers (``api.write_as(manager, ...)``, ``api.hpa_scale``);
- Deployment rollouts that stall with pods saying why (``api.stall_rollouts(ns, name, "ImagePullBackOff",
  deadline=)`` then ProgressDeadlineExceeded; ``api.set_pods(ns, name, [PodState(...), ...])`` with status counts
  to match; ``api.set_progress_deadline_exceeded``; ``api.lose_pods``);
- optional CRDs (Gateway API, Prometheus Operator) absent from the start or removed at run time
  (``api.remove_crd(HTTPROUTES)``, ``api.install_crd``).

Usage::

    from specserve_kubefake import FakeApiServer, DEPLOYMENTS, SPECSERVES

    async with FakeApiServer(auto_ready=False) as api:      # SpecServe CRD installed by default
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm"}})
        api.create(specserve_doc)                           # seeds like a POST: uid, resourceVersion, generation
        ...                                                 # point the operator at api.url (write_kubeconfig)
        api.set_deployment_ready("llm", "kimi-k25-spec")    # the Deployment controller's word: Ready now
        api.faults.add(method="PATCH", path=r"/deployments/", status=500, times=2)
        start = len(api.requests)
        ...
        assert api.writes_since(start) == []

Nothing writes Deployment status unless the test does (``set_deployment_ready(ns, name, ready=, updated=)``) or
asks for a controller stand-in: ``auto_ready=True`` marks every new generation fully ready at once;
``observe_rollouts=True`` acts as the real controller at the start of a rollout (observedGeneration catches up,
updatedReplicas 0, maxUnavailable old pods gone) and leaves readiness to the test. With neither, after a spec
change ``status.observedGeneration`` lags ``metadata.generation`` until the test calls set_deployment_ready.

Resource names are ``"{group}/{version}/{plural}"`` or ``"v1/{plural}"`` for the core group (the constants
below). ``python -m specserve_kubefake --port 8001`` runs it standalone (see ``__main__``).
"""

from __future__ import annotations

from specserve_kubefake import admission
from specserve_kubefake.admission import Mutator
from specserve_kubefake.faults import Fault, Faults
from specserve_kubefake.kubeconfig import write_kubeconfig
from specserve_kubefake.pods import PodState
from specserve_kubefake.recording import RecordedRequest
from specserve_kubefake.resources import (
    CONFIGMAPS,
    CRDS,
    DEPLOYMENTS,
    EVENTS,
    HTTPROUTES,
    LEASES,
    NAMESPACES,
    NETWORKPOLICIES,
    PODDISRUPTIONBUDGETS,
    PODMONITORS,
    PODS,
    SECRETS,
    SERVICES,
    SPECSERVES,
)
from specserve_kubefake.server import FakeApiServer
from specserve_kubefake.store import ApiError

__all__ = [
    "CONFIGMAPS",
    "CRDS",
    "DEPLOYMENTS",
    "EVENTS",
    "HTTPROUTES",
    "LEASES",
    "NAMESPACES",
    "NETWORKPOLICIES",
    "PODDISRUPTIONBUDGETS",
    "PODMONITORS",
    "PODS",
    "SECRETS",
    "SERVICES",
    "SPECSERVES",
    "ApiError",
    "FakeApiServer",
    "Fault",
    "Faults",
    "Mutator",
    "PodState",
    "RecordedRequest",
    "admission",
    "write_kubeconfig",
]
