"""Thin, typed I/O against the Kubernetes API (server-side apply, status, pruning)."""
