#!/usr/bin/env bash
# Seeds the fuzz corpora: proto with the protos of testdata/hlo's modules
# and of the shared corpus's valid modules up to 64 KB;
# parse_print with every module of testdata/hlo and,
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
# proto: the HloModuleProto of each testdata module and of the shared
# corpus's valid modules up to 64 KB (needs a built hlo-opt; modules the
# writer refuses are skipped).
mkdir -p corpus/proto
hlo_opt=../target/release/hlo-opt
if [ -x "$hlo_opt" ]; then
  for f in ../testdata/hlo/*.hlo; do
    "$hlo_opt" --emit=proto --no-verify "$f" -o "corpus/proto/$(basename "$f" .hlo).pb" 2>/dev/null || true
  done
  for d in ../../shared/corpus/xla/valid ../../shared/corpus/jax; do
    [ -d "$d" ] || continue
    find "$d" -name '*.hlo' -size -64k | while read -r f; do
      "$hlo_opt" --emit=proto --no-verify "$f" -o "corpus/proto/$(basename "$f" .hlo).pb" 2>/dev/null || rm -f "corpus/proto/$(basename "$f" .hlo).pb"
    done
  done
else
  echo "proto: no $hlo_opt (cargo build --release); corpus/proto left as is" >&2
fi
echo "parse_print: $(ls corpus/parse_print | wc -l) inputs; passes: $(ls corpus/passes | wc -l) inputs; proto: $(ls corpus/proto | wc -l) inputs"
