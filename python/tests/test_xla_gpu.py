"""hlo_opt.xla_gpu on what XLA wrote on an H200 (testdata/xla_gpu/session1):
`choose` keys every GEMM fusion as XLA's own logs key it, picks configs XLA
measured on it, writes XLA's cache layout; bad environments raise. The
JAX-on-GPU half runs only where jax has a GPU (skipped visibly otherwise)."""

import lzma
import os
import tarfile
from pathlib import Path

import pytest

import hlo_opt
import hlo_opt.xla_gpu as xg

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "testdata/xla_gpu/session1/core.tar.xz"


def _files():
    with tarfile.open(SESSION, "r:xz") as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}


def _profiles(logs: str):
    """(fingerprint, instruction text) of each instruction_profiles block."""
    out = []
    for block in logs.split("instruction_profiles {")[1:]:
        fp = block.split('hlo_fingerprint: "', 1)[1].split('"', 1)[0]
        text = block.split('hlo_text: "', 1)[1].split('"\n', 1)[0]
        out.append((fp, text, block))
    return out


def test_choose_keys_as_xla_and_writes_its_cache(tmp_path):
    files = _files()
    prog = "gated_mlp_bf16_b1024"
    module = hlo_opt.parse(files[f"hlo/{prog}.off.hlo"], f"{prog}.off.hlo", verify=False)
    logs = files[f"logs/{prog}.textproto"].decode()
    choices = xg.choose(module, logs, cache_dir=tmp_path)
    want = sorted(fp for fp, text, _ in _profiles(logs) if "__triton_gemm" in text)
    assert sorted(c.hlo_fingerprint for c in choices) == want
    device = logs.split('device: "', 1)[1].split('"', 1)[0]
    assert sorted(os.listdir(tmp_path / device)) == [f"{fp}.pb" for fp in want]
    blocks = {fp: block for fp, _, block in _profiles(logs)}
    for c in choices:
        cfg = c.config
        # The chosen config is one XLA measured on this fusion or a near one;
        # its fields are the Triton tile's.
        assert cfg["block_m"] >= 16 and cfg["num_warps"] in (2, 4, 8, 16)
        assert c.why
        assert c.hlo_fingerprint in blocks


def test_bad_environment_raises():
    files = _files()
    module = hlo_opt.parse(files["hlo/odd_bf16.off.hlo"], "odd.hlo", verify=False)
    with pytest.raises(hlo_opt.PassError, match="device"):
        xg.choose(module, "entries { }\n")


def test_make_cache_on_a_gpu(tmp_path):
    jax = pytest.importorskip("jax")
    if jax.default_backend() != "gpu":
        pytest.skip("jax has no GPU here (the JAX-on-GPU path of hlo_opt.xla_gpu needs one)")
    import jax.numpy as jnp

    f = lambda x, w: jax.nn.relu(x @ w)  # noqa: E731
    args = (jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16),
            jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16))
    choices = xg.make_cache(f, *args, cache_dir=tmp_path)
    assert choices
    assert xg.compile(f, *args, cache_dir=tmp_path) is not None


def test_jax_compile_gpu_refuses_what_it_cannot_do():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import hlo_opt.jax as hj

    f = lambda x: x @ x  # noqa: E731
    x = jax.ShapeDtypeStruct((64, 64), jnp.float32)
    with pytest.raises(ValueError, match="only"):
        hj.compile(f, x, passes=["layout"], backend="gpu")
    with pytest.raises(TypeError, match="unknown options"):
        hj.compile(f, x, passes=["tile"], backend="gpu", budget=3)
    if jax.default_backend() != "gpu":
        with pytest.raises(hlo_opt.BackendError, match="not a GPU"):
            hj.compile(f, x, passes=["tile"], backend="gpu")
