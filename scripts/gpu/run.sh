#!/bin/bash
# On the GPU machine, from the repository root, with .gpu carried (docs/real-engine.md says how to fill it):
#   bash .gpu/scripts/gpu/run.sh PHASE [DEADLINE_S]      PHASE: core | adaptive (scripts/gpu/real_engine.py)
# Unpacks the offline SGLang 0.5.17 overlay, makes the dummy-weight model configs (Llama-3.1-8B shape, EAGLE-3 draft),
# runs the driver with this repository's operator and tools (.gpu/operator, .gpu/tools), and packs logs into $OUT (at most 8 files return).
G=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"; S=/tmp/sgl-site; W=/tmp/work
PHASE=${1:-core}; DEADLINE=${2:-500}
export SGLANG_ENABLE_JIT_DEEPGEMM=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$S:$G/operator:$G/tools  # the operator and the tools (bench) of this checkout
t0=$SECONDS
[ -d $S/sglang ] || { mkdir -p $S && python3 -c "import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$G/sglang-0.5.17-site.tar.xz" $S; } || exit 1
# deep_gemm is imported (not used) by the DSA attention module during EAGLE cuda-graph capture on 0.5.17
[ -d $S/deep_gemm ] || { mkdir -p $S/deep_gemm && : > $S/deep_gemm/__init__.py; }
[ -f "$G/jitcache.tar.xz" ] && [ ! -d ~/.cache/tvm-ffi ] && tar -xJf "$G/jitcache.tar.xz" -C ~ 2>/dev/null
if [ -f "$G/model.tar.xz" ]; then mkdir -p /tmp && tar -xJf "$G/model.tar.xz" -C /tmp; fi
[ -f /tmp/model/config.json ] || SIZE=8b python3 "$G/make_model.py" /tmp/model > $W-setup.log 2>&1 || { tail -20 $W-setup.log; exit 1; }
echo "setup took $((SECONDS - t0)) s"
(nvidia-smi -L; python3 -c "import torch, sglang; print('torch', torch.__version__, 'sglang', sglang.__version__)") 2>&1 | tail -3
mkdir -p $W
python3 "$G/scripts/gpu/real_engine.py" "$PHASE" --example "$G/examples/llama31-8b-h200.yaml" --out $W \
  --deadline $((DEADLINE - (SECONDS - t0))) 2>&1 | tee $W/driver.log
cp $W/$PHASE.json "$O/" 2>/dev/null
[ -d $W/bench ] && tar -cJf "$O/bench-$PHASE.tar.xz" -C $W bench
tar -cJf "$O/logs-$PHASE.tar.xz" -C $W --exclude bench --exclude "$PHASE.json" .
tar -cJf "$O/jitcache.tar.xz" -C ~ $(cd ~ && ls -d .cache/tvm-ffi .cache/flashinfer .triton 2>/dev/null) 2>/dev/null
ls -la "$O"; echo "total $((SECONDS - t0)) s"
