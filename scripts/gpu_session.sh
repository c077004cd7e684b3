#!/usr/bin/env bash
# One GPU session in one command (docs/xla-gpu.md): the tile collection, the
# Python package's XLA:GPU path on a held-out program (when a wheel is in
# gpu-bin/; its JSON line goes to stdout), then the three-way measurement of
# the held-out programs, within one 10-minute run. Writes at most 8 files
# under $OUT: the collection's 5 (core, smoke, dumps tarballs, summary.json),
# measure.json, measure.md, measure_files.tar.xz.
#   OUT=... bash scripts/gpu_session.sh [COLLECT_SECONDS] [MEASURE_SECONDS]
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/opt/torch/.venv/bin/python}
OUT=${OUT:-out-gpu}
COLLECT=${1:-220}
MEASURE=${2:-300}
export PYTHONUNBUFFERED=1
# The default GPU tile model is the ONNX ranker: carry ONNX Runtime's library
# beside the binary (docs/xla-gpu.md, "One GPU session") unless set.
if [ -z "${ORT_DYLIB_PATH:-}" ] && [ -f gpu-bin/libonnxruntime.so.1.31.1 ]; then
  export ORT_DYLIB_PATH=$PWD/gpu-bin/libonnxruntime.so.1.31.1
fi
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader || true
"$PY" scripts/gpu_collect.py --out "$OUT" --budget "$COLLECT" --max-files 5 --exhaustive-frac 0 \
  --skip-done testdata/xla_gpu/session*/summary.json
echo "collect exit $?"
wheel=$(ls gpu-bin/hlo_opt-*-abi3-*x86_64.whl 2>/dev/null | head -1)
if [ -n "$wheel" ]; then
  site=$(mktemp -d)
  # A wheel is a zip of the package: unpacked, it needs neither pip nor network.
  "$PY" -m zipfile -e "$wheel" "$site" \
    && PYTHONPATH="$site" timeout 90 "$PY" scripts/gpu_python_check.py --programs held_mlp_bf16_b4096
  echo "python check exit $?"
else
  echo "python check skipped: no wheel in gpu-bin/ (bash scripts/build_wheels.sh x86_64)"
fi
"$PY" scripts/gpu_measure.py --out "$OUT" --hlo-opt gpu-bin/hlo-opt --rounds 2 --budget "$MEASURE"
echo "measure exit $?"
ls -la "$OUT"
