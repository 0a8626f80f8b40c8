#!/usr/bin/env bash
# The local demo: installs SpecServe into .venv and renders the embedded Kimi-K2.5 / RTX PRO 6000 example
# into the Kubernetes objects the operator would apply.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q -e . 2>&1 | grep -v '^WARNING: Location' || true
exec .venv/bin/specserve render "${1:-examples/kimi-k25-rtxpro6000.yaml}"
