"""No kopf finalizer on SpecServes: a SpecServe (or its namespace) deletes even while the operator is down.

Nothing needs cleaning up on deletion (children carry ownerReferences, the garbage collector removes them), and
no handler asks for kopf's finalizer: there is no on.delete handler, and the resync is our own loop (specserve.resync),
not a kopf timer, which would need one. kopf then also removes the finalizer older versions added, the first time it
sees such an object. An object without finalizers vanishes at once (kopf never sees a deletionTimestamp), so its
DELETED event is the object's one forget (specserve.objects.Objects.forget), which marks its state gone for the
reconciles still queued behind its lock.
"""
