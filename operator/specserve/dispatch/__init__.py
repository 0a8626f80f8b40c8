"""What the kopf handlers delegate to (`Dispatcher`, routing only), and the jobs it routes to: `lanes` (one pass
per object at a time, urgent or background), `failover` (when the fast path runs), `loops` (the switching and
resync loops started and stopped), `report` (what a pass did: metrics, logs, Events), `background` (work started
and cancelled at stop), `operator_kube` (the client as these parts use it)."""

from specserve.dispatch.operator_kube import KUBE, OperatorKube
from specserve.dispatch.router import Dispatcher

__all__ = ["KUBE", "Dispatcher", "OperatorKube"]
