#!/usr/bin/env bash
# Seeds the fuzz corpora: parse_print with every module of testdata/hlo and,
# when present, the shared corpus (valid and invalid modules); passes with
# the modules the passes are tested on (testdata/layout, testdata/tile) and
# the shared corpus's valid modules up to 64 KB (a fuzz input runs both
# passes, so small modules keep the executions fast).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p corpus/parse_print corpus/passes
cp ../testdata/hlo/*.hlo corpus/parse_print/ 2>/dev/null || true
for d in ../../shared/corpus/xla/valid ../../shared/corpus/xla/invalid ../../shared/corpus/jax ../../shared/data/tpugraphs/tile_kernels; do
  [ -d "$d" ] && cp "$d"/*.hlo corpus/parse_print/ 2>/dev/null || true
done
cp ../testdata/layout/*.hlo ../testdata/tile/kernels/*.hlo ../testdata/tile/modules/*.hlo corpus/passes/ 2>/dev/null || true
cp ../testdata/hlo/*.hlo corpus/passes/ 2>/dev/null || true
for d in ../../shared/corpus/xla/valid ../../shared/corpus/jax ../../shared/data/tpugraphs/tile_kernels; do
  [ -d "$d" ] && find "$d" -name '*.hlo' -size -64k -exec cp {} corpus/passes/ \; 2>/dev/null || true
done
echo "parse_print: $(ls corpus/parse_print | wc -l) inputs; passes: $(ls corpus/passes | wc -l) inputs"
