#!/usr/bin/env bash
# Builds one virtual environment per supported SGLang release for the conformance suite (tests/conformance):
# just enough of each release to import sglang.srt.server_args on the CPU, build its argument parser and run
# ServerArgs.from_cli_args (and, where the release has it, speculative/adaptive_spec_params.py).
#
#   bash scripts/sglang-env.sh            # build what is missing, then write .cache/sglang/env.sh
#   . .cache/sglang/env.sh                # exports SPECSERVE_SGLANG_PY_<version> for pytest
#
# Idempotent: an environment is rebuilt only when its lock file (tests/conformance/envs/sglang-<v>.txt) or its
# shims changed; a cached run takes about a second. Each environment is installed with --no-deps from a complete
# lock, so nothing pulls in SGLang's GPU dependencies (flashinfer, sglang-kernel, CUDA torch, ...); torch itself is
# an import-time stand-in (tests/conformance/envs/shims-common/torch).
# To support another release: add it to operator/specserve/versions.py, add a lock file and its version to
# VERSIONS below, and run the conformance suite (docs/sglang-versions.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

VERSIONS=(0.5.23 0.5.17 0.5.9)
cache="$root/.cache/sglang"
locks="$root/tests/conformance/envs"

python_bin=""
for candidate in python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    python_bin="$candidate"
    break
  fi
done
if [ -z "$python_bin" ]; then
  echo "sglang-env: Python 3.11 is required (the SGLang 0.5.23 wheel and the CPU torch file are cp311)" >&2
  exit 1
fi

env_var() { printf 'SPECSERVE_SGLANG_PY_%s' "${1//./_}"; }

fingerprint() {  # what the environment of version $1 is built from
  local v="$1"
  {
    cat "$locks/sglang-$v.txt"
    for shims in "$locks/shims-common" "$locks/shims-$v"; do
      if [ -d "$shims" ]; then find "$shims" -type f -name '*.py' | sort | xargs cat; fi
    done
    "$python_bin" --version
  } | sha256sum | cut -d' ' -f1
}

smoke_test='
import argparse, sys
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
parser.parse_args(["--model-path", "m"])
print("sglang", sys.argv[1], "parser ok")
'

build() {
  local v="$1" dir="$cache/$1" want
  want="$(fingerprint "$v")"
  if [ -f "$dir/.built" ] && [ "$(cat "$dir/.built")" = "$want" ] && [ -x "$dir/venv/bin/python" ]; then
    echo "sglang-env: $v cached ($dir/venv)"
    return 0
  fi
  echo "sglang-env: building $v in $dir/venv"
  local started=$SECONDS
  rm -rf "$dir"
  mkdir -p "$dir"
  "$python_bin" -m venv "$dir/venv"
  # --no-deps: the lock is complete; --only-binary: no sdist builds. pip's WARNING lines about file:// index
  # locations that do not exist on this machine are noise and are dropped; errors still fail the build.
  "$dir/venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -r "$locks/sglang-$v.txt" 2> >(grep -v '^WARNING: Location' >&2)
  local site shims
  site="$("$dir/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  for shims in "$locks/shims-common" "$locks/shims-$v"; do  # import-time stand-ins (torch, torchvision)
    if [ -d "$shims" ]; then cp -r "$shims/." "$site/"; fi
  done
  (cd "$dir" && "$dir/venv/bin/python" -c "$smoke_test" "$v")
  echo "$want" > "$dir/.built"
  echo "sglang-env: $v built in $((SECONDS - started)) s, $(du -sh "$dir" | cut -f1) on disk"
}

for v in "${VERSIONS[@]}"; do
  build "$v"
done

{
  echo "# Written by scripts/sglang-env.sh: the Python of each SGLang conformance environment."
  for v in "${VERSIONS[@]}"; do
    echo "export $(env_var "$v")=$cache/$v/venv/bin/python"
  done
} > "$cache/env.sh"
echo "sglang-env: wrote $cache/env.sh"
