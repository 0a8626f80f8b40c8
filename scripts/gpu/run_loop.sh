#!/bin/bash
# On the GPU machine, from the repository root, with .gpu carried (filled by scripts/gpu/pack_loop.sh):
#   bash .gpu/run_loop.sh [DEADLINE_S] [loop.py arguments...]
# Unpacks SGLang 0.5.17, the operator's dependencies, HAProxy and this checkout's code, makes the 8B-shaped model
# config, runs scripts/gpu/loop.py (the operator steering real SGLang pools) and packs the results into $OUT.
G=$(cd "$(dirname "$(readlink -f "$0")")" && pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
S=/tmp/sgl-site; D=/tmp/loop-deps; H=/tmp/hap; C=/tmp/loop-src; W=/tmp/loop-out
DEADLINE=${1:-520}; shift
export XZ_OPT="-T0 -3" SGLANG_ENABLE_JIT_DEEPGEMM=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
t0=$SECONDS
x() { mkdir -p "$2" && tar -xJf "$1" -C "$2"; }
[ -d $S/sglang ] || x "$G/sglang-0.5.17-site.tar.xz" $S || exit 1
[ -d $S/deep_gemm ] || { mkdir -p $S/deep_gemm && : > $S/deep_gemm/__init__.py; }
[ -d $D/kopf ] || x "$G/loop-deps.tar.xz" $D
[ -f $H/haproxy.bin ] || x "$G/haproxy.tar.xz" $H
rm -rf $C && x "$G/loop-src.tar.xz" $C
mkdir -p $H/bin && printf '#!/bin/sh\nexec %s/ld-linux-x86-64.so.2 --library-path %s %s/haproxy.bin "$@"\n' $H $H $H > $H/bin/haproxy
chmod +x $H/bin/haproxy; export PATH=$H/bin:$PATH
[ -f "$G/jitcache.tar.xz" ] && [ ! -d ~/.cache/tvm-ffi ] && tar -xJf "$G/jitcache.tar.xz" -C ~ 2>/dev/null
[ -f /tmp/model/config.json ] || SIZE=8b python3 $C/make_model.py /tmp/model > /tmp/make-model.log 2>&1 || { tail -20 /tmp/make-model.log; exit 1; }
export PYTHONPATH=$S:$C/operator:$C/tools:$C/kubefake:$D
echo "setup took $((SECONDS - t0)) s"; haproxy -v | head -1
(nvidia-smi -L; python3 -c "import torch, sglang, kopf, kubernetes; print('torch', torch.__version__, 'sglang', sglang.__version__)") 2>&1 | tail -3
rm -rf $W; mkdir -p $W
[ -f "$G/curves.json" ] && CURVES="--curves $G/curves.json"
python3 $C/scripts/gpu/loop.py --out $W --no-validate --deadline $((DEADLINE - (SECONDS - t0))) $CURVES "$@" 2>&1 | tail -60
cp $W/loop.json $W/loop.png "$O/" 2>/dev/null
tar -cJf "$O/logs.tar.xz" -C $W --exclude loop.json --exclude loop.png .
XZ_OPT="-T0 -9e" tar -cJf "$O/jitcache.tar.xz" -C ~ $(cd ~ && ls -d .cache/tvm-ffi .cache/flashinfer 2>/dev/null) 2>/dev/null  # Triton's cache left out: 64 MiB
ls -la "$O"; echo "total $((SECONDS - t0)) s"
