"""`specserve demo`: the operator's whole loop on one machine, live.

A fake Kubernetes API, the real operator (`specserve run` as a subprocess), a local kubelet that turns the
rendered Deployments into `specserve emulate` processes, Debian's Prometheus scraping them with the PodMonitor's
labels, HAProxy as the gateway programmed from the operator's HTTPRoute, and a load generator ramping demand
across the crossover and back. The operator never imports this package."""
