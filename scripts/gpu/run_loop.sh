#!/bin/bash
# On the GPU machine, from the repository root, with .gpu carried (filled by scripts/gpu/pack_loop.sh):
#   bash .gpu/run_loop.sh start WAIT_S [loop.py arguments...]   # set up, start the driver, wait, return results
#   bash /tmp/run_loop.sh wait WAIT_S                           # a later call on the same (still warm) machine
# (`start` leaves a copy of this script in /tmp: a later call need not carry .gpu, whose 64 MiB would travel again,
# and without carrying it .gpu is not there)
# Unpacks SGLang 0.5.17, the operator's dependencies, HAProxy and this checkout's code, makes the 8B-shaped model
# config and starts scripts/gpu/loop.py (the operator steering real SGLang pools) in a session of its own, so that
# it outlives this call: one driver, one set of pod starts, across calls of at most 10 minutes each while the
# machine stays warm. Each call waits up to WAIT_S seconds (or until the driver ends) and copies what the driver
# has written so far into $OUT (loop.json and loop.png are rewritten after every step, so a cut run still returns
# data). The driver's own --deadline bounds the whole run.
G=$(cd "$(dirname "$(readlink -f "$0")")" && pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
S=/tmp/sgl-site; D=/tmp/loop-deps; H=/tmp/hap; C=/tmp/loop-src; W=/tmp/loop-out
MODE=${1:-start}; WAIT=${2:-540}; shift 2
export XZ_OPT="-T0 -3" SGLANG_ENABLE_JIT_DEEPGEMM=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
t0=$SECONDS
x() { mkdir -p "$2" && tar -xJf "$1" -C "$2"; }

collect() {  # what the driver has written so far -> $OUT
  cp $W/loop.json $W/loop.png $W/restart.png "$O/" 2>/dev/null
  tail -c 400000 $W/driver.log > "$O/driver.log" 2>/dev/null
  L=$(ls -td /tmp/specserve-loop-*/logs 2>/dev/null | head -1)  # the newest: this driver's
  [ -n "$L" ] || L=$W/logs
  [ -d "$L" ] && tar -cJf "$O/logs.tar.xz" -C "$L" . 2>/dev/null
}

if [ "$MODE" = start ]; then
  cp "$0" /tmp/run_loop.sh
  [ -d $S/sglang ] || x "$G/sglang-0.5.17-site.tar.xz" $S || exit 1
  [ -d $S/deep_gemm ] || { mkdir -p $S/deep_gemm && : > $S/deep_gemm/__init__.py; }
  [ -d $D/kopf ] || x "$G/loop-deps.tar.xz" $D
  [ -f $H/haproxy.bin ] || x "$G/haproxy.tar.xz" $H
  rm -rf $C && x "$G/loop-src.tar.xz" $C
  mkdir -p $H/bin && printf '#!/bin/sh\nexec %s/ld-linux-x86-64.so.2 --library-path %s %s/haproxy.bin "$@"\n' $H $H $H > $H/bin/haproxy
  chmod +x $H/bin/haproxy
  [ -f "$G/jitcache.tar.xz" ] && [ ! -d ~/.cache/tvm-ffi ] && tar -xJf "$G/jitcache.tar.xz" -C ~ 2>/dev/null
  if [ -n "$FAKE_ENGINE" ]; then  # a dry run on a CPU machine: the emulator stands in, no SGLang on the path
    SITE=
  else
    SITE=$S:
    [ -f /tmp/model/config.json ] || SIZE=8b python3 $C/make_model.py /tmp/model > /tmp/make-model.log 2>&1 || { tail -20 /tmp/make-model.log; exit 1; }
    (nvidia-smi -L; PYTHONPATH=$S python3 -c "import torch, sglang; print('torch', torch.__version__, 'sglang', sglang.__version__)") 2>&1 | tail -3
  fi
  echo "setup took $((SECONDS - t0)) s"; $H/bin/haproxy -v | head -1
  rm -rf $W; mkdir -p $W
  [ -f "$G/curves.json" ] && [ -z "$CALIBRATE" ] && CURVES="--curves $G/curves.json"
  # setsid: the driver and its pods are not this call's processes, so they run on after it returns
  PATH=$H/bin:$PATH PYTHONPATH=$SITE$C/operator:$C/tools:$C/kubefake:$D setsid nohup python3 $C/scripts/gpu/loop.py \
    --out $W --no-validate $CURVES "$@" > $W/driver.log 2>&1 < /dev/null &
  echo $! > $W/driver.pid
elif [ ! -f $W/driver.pid ]; then
  echo "no driver on this machine (a fresh one: the warm machine was given back)"; exit 3
fi

PID=$(cat $W/driver.pid)
while kill -0 "$PID" 2>/dev/null && [ $((SECONDS - t0)) -lt "$WAIT" ]; do sleep 5; done
if kill -0 "$PID" 2>/dev/null; then
  echo "driver still running after $((SECONDS - t0)) s: partial results"; collect
else
  echo "driver ended"; collect
  # the JIT caches for the next session (Triton's too, if it fits the 16 MiB a returned file may hold)
  XZ_OPT="-T0 -9e" tar -cJf "$O/jitcache.tar.xz" -C ~ $(cd ~ && ls -d .cache/tvm-ffi .cache/flashinfer .triton/cache 2>/dev/null) 2>/dev/null
  [ "$(stat -c %s "$O/jitcache.tar.xz" 2>/dev/null || echo 0)" -gt 16000000 ] && \
    XZ_OPT="-T0 -9e" tar -cJf "$O/jitcache.tar.xz" -C ~ $(cd ~ && ls -d .cache/tvm-ffi .cache/flashinfer 2>/dev/null)
fi
tail -25 $W/driver.log; ls -la "$O"; echo "this call: $((SECONDS - t0)) s"
