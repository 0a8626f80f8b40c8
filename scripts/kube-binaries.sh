#!/usr/bin/env bash
# Builds the real control plane the cluster tier (tests/cluster/) runs on: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok, from their published Go modules, once, into a cache keyed by
# their versions, beside the CRDs the tier installs (the Gateway API's HTTPRoute, the Prometheus Operator's
# PodMonitor, ServiceMonitor and PrometheusRule, from their published Go modules) and kwok's node stages.
# Prints the binaries' cache directory and the CRDs' on its last two lines; `--dir` prints them, builds nothing.
#
# A binary already in $KUBEBUILDER_ASSETS (the envtest convention: etcd, kube-apiserver) is used from there and not
# built. Kubernetes is built through a wrapper module whose `replace` directives pin the staging modules
# (k8s.io/api, ...) to the matching v0.X.Y (the recipe of kubernetes issue 79384): k8s.io/kubernetes itself replaces
# them with ./staging paths that its module zip does not carry. etcd's server module has ../ replaces too, so it gets
# a wrapper as well. Builds run under `nice -n 10`: development machines are shared.
#
# Environment: SPECSERVE_KUBE_CACHE (default ~/.cache/specserve-kube), KUBE_VERSION, ETCD_VERSION, KWOK_VERSION,
# GATEWAY_API_VERSION, PROMETHEUS_OPERATOR_VERSION.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.35.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.6}"
KWOK_VERSION="${KWOK_VERSION:-v0.7.0}"
GATEWAY_API_VERSION="${GATEWAY_API_VERSION:-v1.3.0}"
PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
cache_root="${SPECSERVE_KUBE_CACHE:-$HOME/.cache/specserve-kube}"
dir="$cache_root/kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
crds="$cache_root/crds_gateway-api-${GATEWAY_API_VERSION}_prometheus-operator-${PROMETHEUS_OPERATOR_VERSION}"
bin="$dir/bin"
if [ "${1:-}" = "--dir" ]; then
  printf '%s\n%s\n' "$dir" "$crds"
  exit 0
fi
mkdir -p "$bin" "$dir/src"

log() { printf 'kube-binaries: %s\n' "$*" >&2; }
have() {  # have NAME: in KUBEBUILDER_ASSETS or already built
  { [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/$1" ]; } || [ -x "$bin/$1" ]
}

if ! command -v go >/dev/null 2>&1; then
  log "no Go toolchain on PATH: cannot build the control plane"
  exit 2
fi
export GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath"
export CGO_ENABLED=0
build=(nice -n 10 go build -ldflags)

start=$(date +%s)

# --- kube-apiserver, kube-controller-manager, kube-scheduler -------------------------------------------------------
want_kube=()
for b in kube-apiserver kube-controller-manager kube-scheduler; do have "$b" || want_kube+=("$b"); done
if [ ${#want_kube[@]} -gt 0 ]; then
  log "building ${want_kube[*]} $KUBE_VERSION (cold: tens of minutes on two cores)"
  src="$dir/src/kubernetes"
  mkdir -p "$src"
  gomod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  staging_version="v0${KUBE_VERSION#v1}"  # v1.35.4 -> v0.35.4
  {
    echo "module specserve.local/kube-binaries"
    echo
    echo "go $(sed -n 's/^go //p' "$gomod")"
    echo
    echo "replace ("
    # Every `k8s.io/x => ./staging/src/k8s.io/x` of kubernetes' own go.mod, pinned to the published version.
    sed -n 's|^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*|\t\1 => \1 '"$staging_version"'|p' "$gomod"
    echo ")"
  } >"$src/go.mod"
  cmds=()
  for b in "${want_kube[@]}"; do cmds+=("k8s.io/kubernetes/cmd/$b"); done
  (cd "$src" && go get "${cmds[@]/%/@$KUBE_VERSION}" >/dev/null 2>&1 || go get "${cmds[@]/%/@$KUBE_VERSION}")
  minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ldflags+=" -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
  (cd "$src" && "${build[@]}" "$ldflags" -o "$bin/" "${cmds[@]}")
fi

# --- etcd and kwok: one wrapper module each (etcd's server module has ../ replaces of its own) ---------------------
build_wrapped() {  # build_wrapped NAME MODULE@VERSION PACKAGE: a wrapper module that requires MODULE -> $bin/NAME
  local name="$1" module="$2" package="$3" src="$dir/src/$1"
  log "building $name ${module#*@}"
  mkdir -p "$src"
  printf 'module specserve.local/%s-binary\n\ngo 1.24\n' "$name" >"$src/go.mod"
  (cd "$src" && go get "$module" >/dev/null 2>&1 || go get "$module")
  (cd "$src" && "${build[@]}" "-s -w" -o "$bin/$name" "$package")
}
if ! have etcd; then build_wrapped etcd "go.etcd.io/etcd/server/v3@$ETCD_VERSION" go.etcd.io/etcd/server/v3; fi
if ! have kwok; then build_wrapped kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok; fi

module_dir() {  # module_dir PATH@VERSION: the module's source in the Go module cache (downloaded if need be)
  go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'
}

# --- CRDs and kwok's node stages --------------------------------------------------------------------------------
if [ ! -f "$crds/.done" ]; then
  log "CRDs: gateway-api $GATEWAY_API_VERSION, prometheus-operator $PROMETHEUS_OPERATOR_VERSION"
  mkdir -p "$crds"
  gw="$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")"
  for r in gatewayclasses gateways httproutes; do
    install -m 0644 "$gw/config/crd/standard/gateway.networking.k8s.io_$r.yaml" "$crds/"
  done
  po="$(module_dir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")"
  for r in podmonitors servicemonitors prometheusrules; do
    install -m 0644 "$po/example/prometheus-operator-crd/monitoring.coreos.com_$r.yaml" "$crds/"
  done
  touch "$crds/.done"
fi
if [ ! -f "$dir/kwok-stages/.done" ]; then
  mkdir -p "$dir/kwok-stages"
  kw="$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")"
  install -m 0644 "$kw/kustomize/stage/node/fast/node-initialize.yaml" \
    "$kw/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" "$dir/kwok-stages/"
  touch "$dir/kwok-stages/.done"
fi

log "ready in $(( $(date +%s) - start )) s: $dir"
printf '%s\n%s\n' "$dir" "$crds"
