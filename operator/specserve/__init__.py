"""SpecServe: a Kubernetes operator for SGLang speculative decoding that switches it by load."""

__version__ = "0.1.0"
