#!/usr/bin/env bash
# The collect -> train -> use loop on XLA:CPU (README.md, "A layout model of
# your own hardware"): collect layout configurations of some jax corpus
# modules measured on XLA:CPU, train a layout model on them, then on modules
# not collected from compare it with the default (TpuGraphs/TPU) model:
# ranking metrics against CPU measurements (hlo-cost eval) and the runtime of
# the pass's output with each model against the compiler-default layouts
# (examples/bench_layout_models.rs).
# Usage: scripts/cpu_layout_model.sh [OUT_DIR]   (default target/cpu-layout)
# Resumable: rerun the same command after an interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/cpu-layout}"
export HLO_OPT_PYTHON="${HLO_OPT_PYTHON:-$PWD/.venv/bin/python}"
ort=$(ls "$PWD"/.venv/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.1.* 2>/dev/null | head -n1 || true)
if [ -n "$ort" ]; then export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ort}"; fi
C=../shared/corpus/jax
cargo build --release -q --bin hlo-cost --bin hlo-opt-pjrt-worker
cargo build --release -q --example bench_layout_models
mkdir -p "$out"
# 1. Collect: training modules, then held-out modules (another seed).
nice -n 10 target/release/hlo-cost collect $C/mlp_train.pre.hlo testdata/layout/transformer_bert.hlo \
  testdata/layout/convnet_unet3d.hlo --configs 32 --chunk 8 --measure-budget 2 -o "$out/train"
nice -n 10 target/release/hlo-cost collect $C/mlp.pre.hlo $C/resnet50.pre.hlo $C/bert_base.pre.hlo \
  --configs 24 --chunk 8 --measure-budget 2 --seed 1 -o "$out/eval"
# 2. Train (the device, xla-cpu, comes from the collection's manifest.json);
#    --ridge-blend 1 calibrates it (log_runtime_per_score, log_runtime_resolution),
#    which the layout pass's trust region needs to judge its predicted gains.
nice -n 10 "$HLO_OPT_PYTHON" costmodel/training/train.py --task layout --data "$out/train" --train . \
  --valid --steps 300 --ridge-blend 1 --out "$out/layout-xla-cpu.hlocm"
# 3. Ranking on the held-out modules: the CPU model, then the default (TPU) model.
target/release/hlo-cost eval --model "$out/layout-xla-cpu.hlocm" "$out"/eval/*.npz
target/release/hlo-cost eval "$out"/eval/*.npz
# 4. The pass's output with each model against the compiler default (layouts kept).
nice -n 10 target/release/examples/bench_layout_models --layout-model "$out/layout-xla-cpu.hlocm" \
  --budget 6 $C/mlp.pre.hlo $C/resnet50.pre.hlo $C/bert_base.pre.hlo
