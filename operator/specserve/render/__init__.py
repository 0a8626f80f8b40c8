"""Rendering a SpecServe into Kubernetes objects (pure)."""

from specserve.render.manifests import Manifest, render, to_yaml

__all__ = ["Manifest", "render", "to_yaml"]
