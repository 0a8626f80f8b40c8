#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine, then runs lint, type checks and every test.
# This is the README's test command and what CI (.ci/run) calls.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

step() { printf '\n==> %s\n' "$*"; }
wait_kube_build() {  # the background build's result: its log's tail, and its status (set -e stops on a failure)
  local rc=0
  wait "$kube_build" || rc=$?
  tail -n 3 "$kube_log"
  [ "$rc" -eq 0 ] || { cat "$kube_log"; echo "scripts/kube-binaries.sh failed ($rc)"; return "$rc"; }
}

step "Prometheus server (Debian package; tests/integration/test_prometheus.py starts it on loopback)"
if ! command -v prometheus >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
prometheus --version 2>&1 | sed -n 1p  # sed reads to EOF: `head` would SIGPIPE the writer under pipefail

step "HAProxy (Debian package; the gateway of specserve demo and tests/e2e)"
if ! command -v haproxy >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy >/dev/null
fi
haproxy -v 2>&1 | sed -n 1p

step "Python environment (.venv)"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
# Three distributions, all editable: the operator (with the checks), the fake API server and the tools.
.venv/bin/python -m pip install -q -e '.[dev]' -e ./kubefake -e './tools[demo]' 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import specserve, specserve_tools, specserve_kubefake, kopf, kmock'

step "Kubernetes control plane for tests/cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok): started"
# Built from their published Go modules once (12 min beside the tests in a cold CI run, up to 40 min on busy
# cores), then cached by version under ~/.cache/specserve-kube; KUBEBUILDER_ASSETS with etcd and kube-apiserver
# skips building those. Cold, the build runs beside the checks and the other tiers at nice 19 (it takes the CPU
# they leave while they wait on the operator), and the cluster tier waits for it; cached, it ends at once.
kube_log="$(mktemp)"
nice -n 19 bash scripts/kube-binaries.sh >"$kube_log" 2>&1 &
kube_build=$!

step "kubectl and helm (.tools/bin)"
bash scripts/install-kube-tools.sh "$root/.tools/bin"
export PATH="$root/.tools/bin:$root/.venv/bin:$PATH"

step "ruff"
ruff check operator tools kubefake tests scripts
step "mypy (strict)"
mypy
step "import layers (import-linter; the contracts are in pyproject.toml)"
lint-imports

step "alert rules (promtool, from Debian's prometheus package)"
promtool check rules charts/specserve/rules/specserve-alerts.yaml
promtool test rules tests/rules/specserve-alerts.test.yaml

step "tests"
bash scripts/sglang-env.sh; . .cache/sglang/env.sh  # CONFORMANCE-ENV: SGLang environments for tests/conformance (set -e: a failed build stops the run)
# Two workers, each test file on one of them (module fixtures run once): most integration tests wait on the
# operator, so the machine's two cores overlap them with the CPU-bound unit tests. SPECSERVE_TEST_WORKERS=0: one
# process.
if [ "$#" -gt 0 ]; then  # the tests asked for
  wait_kube_build
  export SPECSERVE_CLUSTER=1
  pytest -q -p no:cacheprovider -n "${SPECSERVE_TEST_WORKERS:-2}" --dist loadfile "$@"
  exit
fi
pytest -q -p no:cacheprovider -n "${SPECSERVE_TEST_WORKERS:-2}" --dist loadfile --ignore=tests/cluster

step "Kubernetes control plane for tests/cluster: waiting for its build"
wait_kube_build
export SPECSERVE_CLUSTER=1

step "tests/cluster on the real control plane (one process: one control plane serves the whole tier, in file order)"
pytest -q -p no:cacheprovider tests/cluster
