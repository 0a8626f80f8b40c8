"""`kubectl specserve` (and the same `specserve` subcommands): status, explain, history, pause, resume, what-if.
A user's tool over the Kubernetes API; never imported by the operator."""
