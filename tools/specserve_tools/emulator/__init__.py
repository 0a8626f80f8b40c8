"""A GPU-free stand-in for one SGLang 0.5.23 server (`specserve emulate`), for tests, demos and bench fidelity.

The operator never imports this package."""
