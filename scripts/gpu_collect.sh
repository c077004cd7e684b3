#!/usr/bin/env bash
# XLA:GPU tile collection: one command on the GPU machine (docs/xla-gpu.md).
# Writes at most 8 files under ${OUT:-out-gpu}: core.tar.xz (autotuning logs,
# results, optimized HLO per program and mode, smoke.txt, provenance),
# smoke*.tar.xz, dumps*.tar.xz, summary.json.
#   bash scripts/gpu_collect.sh [--budget 540] [--only a,b] [--dry-run]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for p in /opt/torch/.venv/bin/python .venv/bin/python python3; do
    if [ -x "$p" ] || command -v "$p" >/dev/null 2>&1; then PY=$p; break; fi
  done
fi
OUT=${OUT:-out-gpu}
mkdir -p "$OUT"
exec "$PY" scripts/gpu_collect.py --out "$OUT" "$@"
