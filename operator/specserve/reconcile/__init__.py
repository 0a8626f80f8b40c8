"""The level-based reconcile of a SpecServe: `reconcile()` realises the switching target safely and reports what
is live. core.py runs one pass; observe.py (pure) holds what the pass saw (the `Pass` record) and builds the
planner's input and the status' observation from it; memory.py (pure) what it remembers between passes;
rollout.py (pure) plans each step; apply.py, causes.py and autoscalers.py do the I/O; target.py says what to aim
at; intent.py folds the planner's decisions into the rendered manifests."""

from specserve.reconcile.apply import Kube
from specserve.reconcile.core import Outcome, reconcile
from specserve.reconcile.target import Target, target

__all__ = ["Kube", "Outcome", "Target", "reconcile", "target"]
