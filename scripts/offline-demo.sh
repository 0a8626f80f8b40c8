#!/usr/bin/env bash
# The offline walk-through (no operator), GPU-free and cluster-free, on the embedded default (Kimi-K2.5 on 8x RTX PRO 6000):
#   1. render examples/kimi-k25-rtxpro6000.yaml into the Kubernetes objects the operator applies;
#   2. run two SGLang emulators (speculative and baseline) that follow the seed benchmark's measured curves,
#      sweep concurrency against both with `specserve bench`, and plot them;
#   3. `specserve calibrate` the two results and write its verdict into a copy of the example, then render
#      that copy again.
# Everything lands in out/offline-demo/. Takes about a minute on 2 cores. Pass another SpecServe file to render it only.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q -e . -e './tools[bench]' 2>&1 | grep -v '^WARNING: Location' || true
specserve=.venv/bin/specserve

if [ $# -gt 0 ]; then exec "$specserve" render "$1"; fi

out=out/offline-demo
mkdir -p "$out"
example=examples/kimi-k25-rtxpro6000.yaml
echo "==> 1. specserve render $example  (-> $out/rendered.yaml)"
"$specserve" render "$example" > "$out/rendered.yaml"
grep -E '^(kind|  name):' "$out/rendered.yaml" | paste - - | sed 's/^/    /'

echo "==> 2. two emulated SGLang servers following the seed benchmark (8x RTX PRO 6000, Kimi-K2.5, TP 8)"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
spec_port=${DEMO_SPEC_PORT:-38101}
base_port=${DEMO_BASE_PORT:-38102}
common=(--profile seed-kimi-k25-rtxpro6000 --host 127.0.0.1 --time-scale 10 --startup-seconds 0 --duration 600)
"$specserve" emulate "${common[@]}" --port "$spec_port" --speculative-algorithm EAGLE3 > "$out/emulator-spec.log" 2>&1 &
pids+=($!)
"$specserve" emulate "${common[@]}" --port "$base_port" > "$out/emulator-base.log" 2>&1 &
pids+=($!)
sweep=(--levels 1,2,5,10,30,70,100,250 --max-tokens 128 --wait-ready 60 --output-dir "$out" --quiet)
"$specserve" bench --url "http://127.0.0.1:$spec_port" --label speculative --name spec "${sweep[@]}"
"$specserve" bench --url "http://127.0.0.1:$base_port" --label baseline --name base "${sweep[@]}"
"$specserve" bench --plot "$out/spec.json" "$out/base.json" --name both --output-dir "$out" --quiet

echo "==> 3. specserve calibrate  (-> $out/kimi-k25-calibrated.yaml)"
cp "$example" "$out/kimi-k25-calibrated.yaml"
"$specserve" calibrate "$out/spec.json" "$out/base.json" --write "$out/kimi-k25-calibrated.yaml"
"$specserve" render "$out/kimi-k25-calibrated.yaml" > "$out/rendered-calibrated.yaml"
echo "==> done: $out/ holds the rendered objects, both bench results (JSON, CSV) and the plot both.png"
