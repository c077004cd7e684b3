#!/usr/bin/env bash
# Featurizes the real fused TPU kernels of shared/data/tpugraphs/tile_kernels
# (HLO text + the autotuner's measured tile configurations) into TpuGraphs tile
# npz files under costmodel/training/data/tile_kernels/, the extra training data
# of the default tile model (the shared npz samples hold only one tile kernel
# with more than one distinct configuration).
#
# Usage (from the repository root): bash costmodel/training/make_tile_kernels.sh [SHARED_DIR]
set -euo pipefail
shared=${1:-../shared}
out=costmodel/training/data/tile_kernels
cargo build --release --bin hlo-cost
bin=${CARGO_TARGET_DIR:-target}/release/hlo-cost
mkdir -p "$out"
for hlo in "$shared"/data/tpugraphs/tile_kernels/*.hlo; do
  name=$(basename "$hlo" .hlo)
  "$bin" featurize --task tile "$hlo" --runs "${hlo%.hlo}.runs.json" -o "$out/$name.npz"
done
