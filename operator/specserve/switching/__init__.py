"""The switching loop: read the load, ask the policy, record its verdict in status, let the reconcile realise it."""
