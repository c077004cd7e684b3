# Set-up shared by scripts/quickstart and scripts/test (sourced, not run):
# installs what a fresh machine lacks, idempotently. Run from the repo root.

# Runs a command as root: directly, or through sudo when it works without a
# password; fails otherwise.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
  else return 1
  fi
}

# apt-get install PACKAGES as root; a warning (not an error) when impossible.
apt_install() {
  if ! command -v apt-get >/dev/null; then
    echo "warning: cannot install $*: no apt-get; install them with your package manager" >&2
    return 1
  fi
  echo "installing $* (apt-get)" >&2
  as_root apt-get update -qq && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || {
    echo "warning: could not install $* (needs root or password-less sudo)" >&2
    return 1
  }
}

# cargo on PATH: rustup's default place, else a minimal rustup install.
ensure_cargo() {
  if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null; then
    command -v curl >/dev/null || apt_install curl ca-certificates || true
    echo "installing Rust (rustup, minimal profile)" >&2
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal >&2
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  # The C toolchain's linker, which cargo needs for any binary.
  command -v cc >/dev/null || apt_install build-essential || true
}

# .venv with the given pip arguments (requirement files with -r, or specs);
# creates it when missing. pip does nothing (and needs no network) when every
# pinned requirement is already installed.
ensure_venv() {
  if [ ! -x .venv/bin/python ]; then
    echo "creating .venv (python3 -m venv)" >&2
    if ! python3 -m venv .venv 2>/dev/null; then
      rm -rf .venv
      apt_install python3-venv python3-pip || true
      python3 -m venv .venv
    fi
  fi
  local args=()
  for a in "$@"; do
    case $a in
      *.txt) args+=(-r "$a") ;;
      *) args+=("$a") ;;
    esac
  done
  echo "checking .venv: pip install ${args[*]}" >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "${args[@]}"
}

# A Python >= 3.12 (the newest jaxlib needs one; Debian 12's is 3.11): the
# first that works of python3.12 on PATH, pyenv's 3.12 builds, then the
# same for 3.13 (the machine image ships pyenv builds of both under
# ~/.pyenv/versions). Prints its path.
find_python_next() {
  local c
  for c in python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3 \
      python3.13 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 \
        && "$c" -c 'import sys, venv, ssl; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$c"
      return 0
    fi
  done
  return 1
}

# .venv-next: the newest jaxlib (hlo/conformance/requirements-next.txt), a
# second XLA judging the generated corpus (docs/jax_gen.md). Without a
# Python >= 3.12 it is left out with a warning, and the checks that use it
# record a skip.
ensure_venv_next() {
  if [ ! -x .venv-next/bin/python ]; then
    local py
    if ! py=$(find_python_next); then
      echo "warning: no Python >= 3.12 found (python3.12, python3.13, pyenv): the newest-jaxlib checks are skipped" >&2
      return 0
    fi
    echo "creating .venv-next ($py -m venv)" >&2
    "$py" -m venv .venv-next || { rm -rf .venv-next; return 0; }
  fi
  echo "checking .venv-next: pip install -r hlo/conformance/requirements-next.txt" >&2
  .venv-next/bin/python -m pip install --quiet --disable-pip-version-check \
    -r hlo/conformance/requirements-next.txt || {
    echo "warning: could not install the newest jaxlib into .venv-next: its checks are skipped" >&2
    rm -rf .venv-next
  }
}

# The pinned onnxruntime requirement (one source: the training requirements).
ort_requirement() {
  grep -m1 '^onnxruntime==' costmodel/training/requirements.txt
}

# A C compiler and valgrind for the C ABI tests.
ensure_system_packages() {
  local missing=()
  command -v cc >/dev/null || missing+=(build-essential)
  command -v valgrind >/dev/null || missing+=(valgrind)
  if [ ${#missing[@]} -gt 0 ]; then
    apt_install "${missing[@]}" || true
  fi
}

# Exports what the tests use from .venv: its Python and ONNX Runtime library.
use_venv() {
  if [ -x .venv/bin/python ]; then
    export HLO_OPT_PYTHON="$PWD/.venv/bin/python"
    if [ -x .venv-next/bin/python ]; then
      export HLO_OPT_PYTHON_NEXT="$PWD/.venv-next/bin/python"
    fi
    local ort
    ort=$(ls "$PWD"/.venv/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.1.* 2>/dev/null | head -n1 || true)
    if [ -n "$ort" ]; then export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ort}"; fi
  fi
}
