#!/usr/bin/env bash
# The local demo (README's first command): the operator's whole loop, live, on one machine, no GPU, no cluster.
#   emulated: the Kubernetes API (specserve_kubefake), the pods (a local kubelet running SGLang emulators);
#   real:     the operator (`specserve run`), Prometheus and HAProxy (Debian packages), the load through HAProxy.
# Installs what it needs on a fresh machine (Debian, root), then runs `specserve demo` with any flags given,
# e.g. `bash scripts/demo.sh --profile seed-kimi-k25-rtxpro6000` or `--strategy Adaptive`. Output: out/demo/.
# `bash scripts/offline-demo.sh` is the older offline walk-through (render, bench, calibrate) without the operator.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
if [ ${#need[@]} -gt 0 ]; then
  echo "==> installing ${need[*]} (Debian packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
# The operator, the fake API server and the tools (whose entry points give `specserve` its demo command).
.venv/bin/python -m pip install -q -e . -e ./kubefake -e './tools[demo]' 2>&1 | grep -v '^WARNING: Location' || true
exec .venv/bin/specserve demo "$@"
