#!/usr/bin/env bash
# Builds the release wheels of the Python package (docs/python.md, "Wheels"):
# one abi3 wheel (CPython >= 3.10) per Linux architecture, manylinux_2_17
# (glibc 2.17 and newer), into dist/, and checks each one
# (scripts/check_wheel.py: tags, ELF machine, the glibc symbol versions and
# libraries it needs; then `auditwheel show`).
#
#   bash scripts/build_wheels.sh [x86_64] [aarch64]    # default: both
#
# Both are cross-built from this machine, whatever its architecture, with
# zig as the C compiler and linker (maturin --zig), which links against
# glibc 2.17's symbols: no aarch64 machine and no cross gcc are needed.
# What it installs, when missing: the rustup target of each architecture,
# and a build environment (WHEEL_VENV, default target/wheel-venv) with
# maturin, ziglang and auditwheel from PyPI. ONNX Runtime is loaded at run
# time (ort's load-dynamic), so nothing of it is linked.
set -euo pipefail
cd "$(dirname "$0")/.."

arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(x86_64 aarch64)
venv=${WHEEL_VENV:-target/wheel-venv}
out=${WHEEL_DIR:-dist}

if ! [ -x "$venv/bin/maturin" ] || ! "$venv/bin/python" -c 'import ziglang, auditwheel' 2>/dev/null; then
  "${PYTHON:-python3}" -m venv "$venv"
  # maturin as pyproject.toml's build-system pins it; a zig that maturin's
  # cargo-zigbuild is known to drive (checked with these versions).
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    'maturin>=1.5,<2' 'ziglang==0.17.1' 'auditwheel>=6,<7'
fi

mkdir -p "$out"
for arch in "${arches[@]}"; do
  case $arch in
    x86_64 | aarch64) triple=$arch-unknown-linux-gnu ;;
    *) echo "build_wheels: unknown architecture '$arch' (x86_64 or aarch64)" >&2; exit 2 ;;
  esac
  if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$triple"; then
    rustup target add "$triple"
  fi
  rm -f "$out"/hlo_opt-*-"$arch".whl "$out"/hlo_opt-*_"$arch".whl
  # The venv's bin first: maturin runs zig as `python -m ziglang`.
  PATH=$PWD/$venv/bin:$PATH nice -n 10 "$venv/bin/maturin" build --release --strip \
    --target "$triple" --zig --compatibility manylinux2014 --out "$out"
  wheel=$(ls "$out"/hlo_opt-*-cp310-abi3-*"$arch".whl)
  "$venv/bin/python" scripts/check_wheel.py --arch "$arch" --glibc 2.17 "$wheel"
  "$venv/bin/auditwheel" show "$wheel"
done
