#!/usr/bin/env bash
# Seeds the fuzz corpus with every module of testdata/hlo and, when present,
# the shared corpus (valid and invalid modules).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p corpus/parse_print
cp ../testdata/hlo/*.hlo corpus/parse_print/ 2>/dev/null || true
for d in ../../shared/corpus/xla/valid ../../shared/corpus/xla/invalid ../../shared/corpus/jax ../../shared/data/tpugraphs/tile_kernels; do
  [ -d "$d" ] && cp "$d"/*.hlo corpus/parse_print/ 2>/dev/null || true
done
ls corpus/parse_print | wc -l
