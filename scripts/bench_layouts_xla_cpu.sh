#!/usr/bin/env bash
# The XLA:CPU table of docs/benchmarks.md (24 Nov, "the layout pass on XLA:CPU"): for each *.pre.hlo of
# the shared jax corpus and the testdata layout modules, runtime on XLA:CPU
# (through PJRT) of (a) XLA's normal pipeline, (b) the original with its
# layouts kept, (c) the layout pass's output (default model), (d) with
# --measure=xla-cpu; ratios from one interleaved run with a control.
# Usage: scripts/bench_layouts_xla_cpu.sh [--budget S] [--measure-budget S] [FILE...]
set -euo pipefail
cd "$(dirname "$0")/.."
export HLO_OPT_PYTHON="${HLO_OPT_PYTHON:-$PWD/.venv/bin/python}"
ort=$(ls "$PWD"/.venv/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.1.* 2>/dev/null | head -n1 || true)
if [ -n "$ort" ]; then export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ort}"; fi
cargo build --release -q --bin hlo-opt-pjrt-worker
cargo build --release -q -p pjrt --example bench_layouts
flags=()
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --budget|--measure-budget) flags+=("$1" "$2"); shift 2 ;;
    *) files+=("$1"); shift ;;
  esac
done
if [ ${#files[@]} -eq 0 ]; then
  files=(testdata/layout/*.hlo)
  if [ -d ../shared/corpus/jax ]; then files+=(../shared/corpus/jax/*.pre.hlo); fi
fi
exec target/release/examples/bench_layouts "${flags[@]}" "${files[@]}"
