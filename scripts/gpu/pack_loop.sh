#!/bin/bash
# On the CPU machine: fill DEST (default ../../main/.gpu, a folder `run` carries) for scripts/gpu/run_loop.sh.
# Needs the overlay built first (../shared/gpu/build_sglang_site.sh DEST/sglang-0.5.17-site.tar.xz) and the
# project's virtualenv (the operator's pure-Python dependencies the GPU image lacks are copied from it) and haproxy.
set -euo pipefail
REPO=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
DEST=$(readlink -f "${1:-$REPO/../../main/.gpu}")
SP=$(python3 -c "import site; print(site.getsitepackages()[0])")
T=$(mktemp -d)
mkdir -p "$DEST" "$T/src" "$T/deps" "$T/hap"
# this checkout's code: operator, tools, fake API, the drivers, the example
tar -cf - -C "$REPO" --exclude __pycache__ --exclude .mypy_cache operator/specserve tools/specserve_tools kubefake/specserve_kubefake \
  scripts/gpu examples/llama31-8b-h200.yaml | tar -xf - -C "$T/src"
cp /work/shared/gpu/make_model.py "$T/src/" 2>/dev/null || cp "$DEST/make_model.py" "$T/src/"
tar -cJf "$DEST/loop-src.tar.xz" -C "$T/src" .
cp "$REPO/scripts/gpu/run_loop.sh" "$DEST/run_loop.sh"  # what the GPU call runs: bash .gpu/run_loop.sh ...
# pure-Python dependencies of `specserve run`, kopf and the fake API that the GPU image lacks (it has PyYAML,
# jinja2, typing_extensions, prometheus_client; compiled parts dropped: its Python
# is 3.12, and these come last on PYTHONPATH so the image's own copies win)
for p in kopf kubernetes click iso8601 pythonjsonlogger prometheus_api_client requests urllib3 \
  certifi charset_normalizer idna dateutil durationpy websocket oauthlib requests_oauthlib ruamel jsonpatch.py \
  jsonpointer.py; do cp -r "$SP/$p" "$T/deps/"; done
rm -rf "$T/deps/kubernetes/aio" "$T/deps/kubernetes/test"
find "$T/deps" -name __pycache__ -prune -exec rm -rf {} +
find "$T/deps" -name "*.so" -delete
tar -cJf "$DEST/loop-deps.tar.xz" -C "$T/deps" .
# HAProxy with every library it links, run through the bundled loader (any glibc on the other side)
cp "$(command -v haproxy)" "$T/hap/haproxy.bin"
for l in $(ldd "$(command -v haproxy)" | grep -o '/[^ ]*'); do cp -L "$l" "$T/hap/"; done
tar -cJf "$DEST/haproxy.tar.xz" -C "$T/hap" .
rm -rf "$T"; ls -la "$DEST"; du -cb "$DEST"/*.tar.xz | tail -1
