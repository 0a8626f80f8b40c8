#!/usr/bin/env bash
# The CI run from a cold start on this machine: a fresh clone of this repository's HEAD with every cache the test
# command fills pointed at empty folders (the Go module and build caches, the control plane's binaries, pip's
# cache, XDG_CACHE_HOME), then `.ci/run`; prints the wall-clock time. What it cannot make cold: Debian packages
# already installed and the Go toolchain. Usage: bash scripts/ci-cold.sh [WORKDIR]   (default /tmp/specserve-ci-cold)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-/tmp/specserve-ci-cold}"
rm -rf "$work" && mkdir -p "$work"/cache/{kube,gomod,gocache,pip,xdg}
git clone -q "$root" "$work/repo" && cd "$work/repo" || exit 1
export SPECSERVE_KUBE_CACHE="$work/cache/kube" GOMODCACHE="$work/cache/gomod" GOCACHE="$work/cache/gocache" \
  PIP_CACHE_DIR="$work/cache/pip" XDG_CACHE_HOME="$work/cache/xdg" CI=true
unset KUBEBUILDER_ASSETS
echo "cold CI start $(date -u +%T) at $(git log --oneline -1)"
start=$(date +%s)
bash .ci/run
rc=$?
echo "cold CI end $(date -u +%T): exit $rc after $(($(date +%s) - start)) s"
exit "$rc"
