"""The load signal: PromQL built from the operator's own PodMonitor labels, read from Prometheus (or the pods'
/metrics directly), turned into the policy's Samples. Unknown is never 0."""
