"""`hlo_opt.jax.compile(f, *args)` on XLA:CPU (hlo_opt.xla_cpu): jaxlib's own
client, called as `jax.jit(f)` is (pytrees, scalars, keyword arguments,
donated buffers, scans), the same results; the decision's record; measuring
keeps the default unless a candidate beats the control's spread; a
candidate whose results differ is never kept; a model for another jaxlib
keeps the default with a warning; per-op oneDNN matmuls (hlo_opt.onednn):
the rewrite reaches XLA and keeps the results, leaves jax's caches alone,
matches the Rust pass's dots, and is refused on an unverified jaxlib.
Skipped without jax."""

from __future__ import annotations

import functools
import json
import time
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

import hlo_opt  # noqa: E402
import hlo_opt.jax as hj  # noqa: E402
from hlo_opt import xla_cpu  # noqa: E402


def block(params, x, scale):
    h = jax.nn.gelu(x @ params["w1"]) * scale
    return {"y": h @ params["w2"], "norm": jnp.sum(h * h)}


def inputs(dtype=jnp.float32):
    k = jax.random.PRNGKey(0)
    params = {"w1": (jax.random.normal(k, (64, 128)) * 0.1).astype(dtype),
              "w2": (jax.random.normal(jax.random.fold_in(k, 1), (128, 32)) * 0.1).astype(dtype)}
    return params, jax.random.normal(jax.random.fold_in(k, 2), (8, 64)).astype(dtype)


def leaves_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(la, lb):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_the_candidates_are_the_pass_table():
    names = [n for n, _ in xla_cpu.CANDIDATES]
    assert names[0] == "default" and xla_cpu.CANDIDATES[0][1] == {}
    assert len(names) == 9 and len(set(names)) == 9
    assert xla_cpu.options_of("ynn:none") == {"xla_cpu_experimental_ynn_fusion_type": ""}
    with pytest.raises(ValueError, match="unknown XLA:CPU candidate"):
        xla_cpu.options_of("ynn:everything")


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_compile_takes_what_jax_jit_takes_and_gives_its_results(dtype):
    params, x = inputs(dtype)
    c = hj.compile(block, params, x, 0.5)
    assert isinstance(c, xla_cpu.Compiled)
    assert c.choice.split("+onednn:")[0] in xla_cpu.CANDIDATE_NAMES
    assert c.decision["xla"].startswith("jaxlib ")
    assert len(c.decision["predictions"]) == 9
    want = jax.jit(block)(params, x, 0.5)
    got = c(params, x, 0.5)
    if c.choice == "default":
        leaves_equal(got, want)  # the same executable as jax.jit's
    else:
        assert xla_cpu.measuring._same(got, want)
    assert "xla-cpu: model" in c.explain()


def test_scan_keyword_arguments_and_donated_buffers():
    def rnn(w, xs, *, h0):
        def cell(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h

        return jax.lax.scan(cell, h0, xs)

    w = jnp.eye(16) * 0.5
    xs = jnp.ones((10, 4, 16))
    c = hj.compile(rnn, w, xs, h0=jnp.zeros((4, 16)))
    got, want = c(w, xs, h0=jnp.zeros((4, 16))), jax.jit(rnn)(w, xs, h0=jnp.zeros((4, 16)))
    leaves_equal(got, want) if c.choice == "default" else xla_cpu.measuring._same(got, want)

    def step(p, g):
        return p - 0.1 * g

    p = jnp.ones((256,))
    c = hj.compile(step, p, p, jit_options=dict(donate_argnums=(0,)), measure="all")
    mine = jnp.ones((256,))
    out = c(mine, jnp.ones((256,)))
    np.testing.assert_allclose(np.asarray(out), 0.9, rtol=1e-6)
    assert mine.is_deleted(), "the donated argument was donated, as jax.jit(donate_argnums) does"
    assert c.measured is not None and c.measured["candidates"][0] == "default"


def layers(x, n, *, act="tanh", scale=1.0):
    for _ in range(n):
        x = getattr(jnp, act)(x @ x.T) * scale
    return x


@pytest.mark.parametrize("how", [dict(static_argnums=(1,)), dict(static_argnames=("n", "act")),
                                 dict(static_argnums=-1)])
def test_static_arguments_are_compiled_in_as_jax_jit_does(how, tmp_path):
    """``jit_options`` with ``static_argnums`` / ``static_argnames``: the
    executables take the other arguments only, as jax's do; the compiled
    function is called as ``f`` (static values included), and another
    static value is a clear error, not a wrong program."""
    x = jnp.ones((32, 32)) / 32
    f, call, kw = layers, (x, 3), dict(scale=0.5)
    if "static_argnames" in how:
        kw["act"] = "sin"
    elif how["static_argnums"] == -1:
        f = functools.partial(layers, act="sin")  # n is the last positional argument
    want = jax.jit(f, **how)(*call, **kw)
    for verify, cache in [(0.05, None), (0, None), (0.05, tmp_path), (0.05, tmp_path)]:
        c = hj.compile(f, *call, jit_options=how, verify=verify, cache_dir=cache, **kw)
        assert xla_cpu.measuring._same(c(*call, **kw), want), (how, verify)
    assert "cached" in c.decision, "the last one was taken from the cache"
    with pytest.raises(ValueError, match=r"compiled for the static arguments .*argument 1=3.*called with.*=2"):
        c(x, 2, **kw)


def test_measuring_keeps_the_default_unless_a_candidate_beats_the_noise(monkeypatch):
    params, x = inputs()
    res = {"ok": np.array([True, True, True]), "ratio": np.array([1.0, 0.99, 1.3]), "control_ratio": 1.0}

    def fake(lowered, args, candidates, budget_s):
        return dict(res, candidates=[c[0] for c in candidates])

    monkeypatch.setattr(xla_cpu.measuring, "measure", fake)
    c = hj.compile(block, params, x, 0.5, measure=2)
    assert c.choice == "default", "1% faster is within the 2% floor of the noise"
    res["ratio"] = np.array([1.0, 0.80, 1.3])
    res["control_ratio"] = 1.25
    assert hj.compile(block, params, x, 0.5, measure=2).choice == "default", "within the control's spread"
    res["control_ratio"] = 1.01
    c = hj.compile(block, params, x, 0.5, measure=2)
    assert c.choice == c.measured["candidates"][1] and c.choice != "default"
    assert "measured and kept" in c.explain()
    with pytest.raises(ValueError, match="measure="):
        hj.compile(block, params, x, 0.5, measure=-1)


def test_a_candidate_with_other_results_is_never_kept(monkeypatch):
    params, x = inputs()
    monkeypatch.setattr(xla_cpu.measuring, "measure", lambda lowered, args, candidates, budget_s: {
        "ok": np.array([True, True]), "ratio": np.array([1.0, 0.5]), "control_ratio": 1.0,
        "candidates": [c[0] for c in candidates]})
    monkeypatch.setattr(xla_cpu.compiling, "_same", lambda a, b: False)
    with pytest.warns(UserWarning, match="other results than XLA's default"):
        c = hj.compile(block, params, x, 0.5, measure=1)
    assert c.choice == "default"
    leaves_equal(c(params, x, 0.5), jax.jit(block)(params, x, 0.5))


def test_a_model_for_another_jaxlib_keeps_the_default_and_says_why(monkeypatch):
    import jaxlib

    monkeypatch.setattr(jaxlib, "__version__", "0.0.1")
    params, x = inputs()
    with pytest.warns(UserWarning, match="no built-in XLA:CPU model for jaxlib 0.0.1"):
        c = hj.compile(block, params, x, 0.5)
    assert c.choice == "default" and c.options == {}


def test_results_are_compared_in_their_dtype():
    a = jnp.asarray([1.0, 2.0, 3.0], jnp.bfloat16)
    assert xla_cpu.measuring._same(a, a + jnp.asarray(2**-8, jnp.bfloat16))
    assert not xla_cpu.measuring._same(a, a * 1.5)
    f = jnp.asarray([1.0, 2.0, 3.0], jnp.float32)
    assert xla_cpu.measuring._same(f, f * (1 + 1e-6))
    assert not xla_cpu.measuring._same(f, f * (1 + 1e-2))
    assert not xla_cpu.measuring._same(f, a)


def test_the_decision_is_the_cli_and_c_abi_decision():
    params, x = inputs()
    lowered = jax.jit(block).lower(params, x, 0.5)
    import jaxlib

    record, _ = xla_cpu.decide(lowered)
    module = hlo_opt.parse(lowered.as_text(dialect="hlo"))
    text, _ = hlo_opt._native.xla_cpu_decide(module, jaxlib=jaxlib.__version__)
    assert json.loads(text) == record


def test_collect_resumes_and_refuses_another_device(tmp_path):
    from hlo_opt.cpu_corpus import Program

    prog = Program("tiny", "test", "float32", 2, lambda a: jnp.tanh(a @ a), (jnp.ones((16, 16)),))
    assert xla_cpu.collect([prog], tmp_path, budget_s=0.05) == ["tiny"]
    with np.load(tmp_path / "tiny.npz") as z:
        assert [str(n) for n in z["candidates"]] == xla_cpu.CANDIDATE_NAMES
        assert z["ratio"][0] == 1.0 and z["ok"][0]
        meta = json.loads(str(z["meta"]))
    assert meta["device"] == xla_cpu.fingerprint() and (tmp_path / "tiny.hlo").read_text().startswith("HloModule")
    assert xla_cpu.collect([prog], tmp_path, budget_s=0.05) == [], "measured programs are skipped"
    meta["device"] = dict(meta["device"], cpu="another CPU")
    with np.load(tmp_path / "tiny.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["meta"] = np.asarray(json.dumps(meta))
    np.savez(tmp_path / "tiny.npz", **arrays)
    with pytest.raises(RuntimeError, match="was measured on"):
        xla_cpu.collect([prog], tmp_path, budget_s=0.05)


def test_collect_pools_measurements_taken_in_separate_passes(tmp_path):
    """collections=N: each program measured N times, a pass over the
    programs apart; its npz keeps every run and labels each candidate with
    the geometric mean of its ratios, valid only where valid in every run;
    a rerun measures nothing more, a larger N adds to what is there."""
    from hlo_opt.cpu_corpus import Program

    progs = [Program(n, "test", "float32", 2, lambda a: jnp.tanh(a @ a), (jnp.ones((16, 16)),)) for n in "pq"]
    assert xla_cpu.collect(progs, tmp_path, budget_s=0.05, collections=2) == ["p", "q", "p", "q"]
    with np.load(tmp_path / "p.npz") as z:
        runs, runs_ok, ratio, ok, controls = z["runs_ratio"], z["runs_ok"], z["ratio"], z["ok"], z["runs_control"]
        meta = json.loads(str(z["meta"]))
    assert runs.shape == (2, len(xla_cpu.CANDIDATE_NAMES)) and meta["collections"] == 2
    assert np.array_equal(ok, runs_ok.all(axis=0)) and ok[0] and ratio[0] == pytest.approx(1.0)
    assert np.allclose(ratio[ok], np.sqrt(runs[0] * runs[1])[ok]) and np.isnan(ratio[~ok]).all()
    assert meta["control_ratio"] == pytest.approx(float(np.sqrt(controls[0] * controls[1])))
    assert xla_cpu.collect(progs, tmp_path, budget_s=0.05, collections=2) == [], "nothing more is needed"
    assert xla_cpu.collect(progs[:1], tmp_path, budget_s=0.05, collections=3) == ["p"]
    with np.load(tmp_path / "p.npz") as z:
        assert z["runs_ratio"].shape[0] == 3 and json.loads(str(z["meta"]))["collections"] == 3
    with pytest.raises(ValueError, match="at least 1"):
        xla_cpu.collect(progs, tmp_path, collections=0)
    # Earlier runs that do not read are named before anything is timed.
    with np.load(tmp_path / "q.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["runs_control"] = arrays["runs_control"][:1]
    np.savez(tmp_path / "q.npz", **arrays)
    with pytest.raises(RuntimeError, match="q.npz: its earlier measurements have inconsistent shapes"):
        xla_cpu.collect(progs, tmp_path, budget_s=0.05, collections=3)

    # A candidate invalid in one run is invalid pooled; the default's time is the runs' median.
    earlier = dict(runs_ratio=np.array([[1.0, 0.5, 2.0]]), runs_ok=np.array([[True, True, True]]),
                   runs_control=np.array([1.02]), runs_default_ns=np.array([100.0]))
    res = dict(candidates=["default", "a", "b"], ratio=np.array([1.0, 0.8, np.nan]),
               ok=np.array([True, True, False]), control_ratio=0.98, default_ns=120.0)
    pooled = xla_cpu.pool(earlier, res)
    assert pooled["ok"].tolist() == [True, True, False]
    assert pooled["ratio"][1] == pytest.approx(0.4 ** 0.5) and np.isnan(pooled["ratio"][2])
    assert pooled["default_ns"] == 110.0 and pooled["runtime_ns"].tolist() == [110, round(110 * 0.4 ** 0.5), -1]
    assert pooled["control_ratio"] == pytest.approx((1.02 * 0.98) ** 0.5) and pooled["runs_ratio"].shape == (2, 3)


def test_collect_modules_times_a_dumped_module_on_random_arguments(tmp_path):
    """A StableHLO file as a user dumps it (pretty form, a donated argument,
    an integer one) is measured like a program: every candidate, the same
    results as jax.jit's on the same arguments, resumable; a file jax
    cannot run names itself before anything is measured."""
    from hlo_opt import stablehlo

    def f(w, x, k):
        return jnp.tanh(x @ w) * k.astype(x.dtype).sum(), x + 1

    w, x, k = jnp.ones((16, 8)), jnp.ones((4, 16)), jnp.arange(3)
    (tmp_path / "m.mlir").write_text(jax.jit(f, donate_argnums=1).lower(w, x, k).as_text())
    lowered, specs = stablehlo.lowered_from_text((tmp_path / "m.mlir").read_text())
    assert specs == [stablehlo.TensorSpec((16, 8), "float32"), stablehlo.TensorSpec((4, 16), "float32"),
                     stablehlo.TensorSpec((3,), "int32")]
    args = stablehlo.random_args(specs, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(args, stablehlo.random_args(specs, seed=1)))
    exe = lowered.compile()
    got, again = exe(*args), exe(*args)  # donation dropped: the arguments stay valid
    leaves_equal(got, jax.jit(f)(*args))
    leaves_equal(got, again)

    out = tmp_path / "data"
    # A spent budget still measures one module per call: every run makes progress.
    (tmp_path / "n.mlir").write_text((tmp_path / "m.mlir").read_text())
    spent = time.monotonic() - 1
    assert xla_cpu.collect_modules([tmp_path / "m.mlir", tmp_path / "n.mlir"], out, budget_s=0.05,
                                   deadline=spent) == ["m"]
    with np.load(out / "m.npz") as z:
        assert [str(n) for n in z["candidates"]] == xla_cpu.CANDIDATE_NAMES
        assert z["ratio"][0] == 1.0 and z["ok"].all()
        meta = json.loads(str(z["meta"]))
    assert meta["source"] == str(tmp_path / "m.mlir") and meta["dtype"] == "float32"
    assert (out / "m.hlo").read_text().startswith("HloModule")
    assert xla_cpu.collect_modules([tmp_path / "m.mlir", tmp_path / "n.mlir"], out, budget_s=0.05,
                                   deadline=spent) == ["n"], "measured modules are skipped"
    assert xla_cpu.collect_modules([tmp_path / "m.mlir"], out, budget_s=0.05) == []

    (tmp_path / "tok.mlir").write_text(
        "func.func public @main(%arg0: !stablehlo.token) -> !stablehlo.token {\n  return %arg0 : !stablehlo.token\n}\n")
    (tmp_path / "broken.mlir").write_text("func.func public @main(")
    for bad, why in [("tok", "argument 0 of main .*only ranked tensors"), ("broken", "not a StableHLO module")]:
        with pytest.raises(ValueError, match=f"{bad}.mlir: {why}"):
            xla_cpu.collect_modules([tmp_path / f"{bad}.mlir", tmp_path / "m.mlir"], tmp_path / bad)
        assert not (tmp_path / bad).exists()
    with pytest.raises(ValueError, match="share the names m"):
        xla_cpu.collect_modules([tmp_path / "m.mlir", out / "m.hlo"], tmp_path / "dup")


#: What jaxlib 0.10.2 and 0.12.0.1 do with each candidate on the probe of
#: `xla_cpu.observe` (docs/xla-cpu.md, "What XLA:CPU honours").
OBSERVED = {
    "default": {"ynn_fusions": 2, "dot": 1, "eltwise": 3, "reduce": 1},
    "ynn:none": {"ynn_fusions": 0, "dot": 0, "eltwise": 0, "reduce": 0},
    "ynn:dot": {"ynn_fusions": 1, "dot": 1, "eltwise": 1, "reduce": 0},
    "ynn:eltwise": {"ynn_fusions": 2, "dot": 1, "eltwise": 4, "reduce": 1},
    "ynn:dot+eltwise": {"ynn_fusions": 2, "dot": 1, "eltwise": 4, "reduce": 1},
    "ynn:reduce": {"ynn_fusions": 1, "dot": 0, "eltwise": 3, "reduce": 1},
    "ynn:dot+reduce": {"ynn_fusions": 2, "dot": 1, "eltwise": 4, "reduce": 1},
    "ynn:eltwise+reduce": {"ynn_fusions": 2, "dot": 1, "eltwise": 4, "reduce": 1},
    "ynn:dot+eltwise+reduce": {"ynn_fusions": 2, "dot": 1, "eltwise": 4, "reduce": 1},
}


def test_xla_cpu_honours_each_candidate_as_documented():
    assert xla_cpu.observe() == OBSERVED


def attention_mlp(p, x):
    q, k = x @ p["q"], x @ p["k"]
    a = jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k), -1)
    h = jnp.einsum("bqk,bkd->bqd", a, x)
    return jax.nn.relu(h @ p["up"]) @ p["down"], (x[:, 0] @ p["q"].T).sum()


def attention_inputs(dtype):
    k = jax.random.PRNGKey(3)
    n = lambda i, s: (jax.random.normal(jax.random.fold_in(k, i), s) / np.sqrt(s[0])).astype(dtype)  # noqa: E731
    return {"q": n(0, (64, 64)), "k": n(1, (64, 64)), "up": n(2, (64, 256)), "down": n(3, (256, 64))}, \
        n(4, (4, 16, 64)) * 8


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_onednn_rewrite_is_honoured_and_leaves_jax_caches_alone(dtype):
    from hlo_opt import onednn

    if onednn.supported():
        pytest.skip(onednn.supported())
    p, x = attention_inputs(dtype)
    lowered = jax.jit(attention_mlp).lower(p, x)
    before = lowered.as_text()
    dots = onednn.contractions(before)
    eligible = sorted({d.signature for d in dots if d.eligible})
    assert len(eligible) >= 4, dots
    # The rewrite works on the module, never on its text.
    with pytest.MonkeyPatch.context() as m:
        m.setattr(type(lowered), "as_text", lambda *a, **k: pytest.fail("the module was printed"))
        rewritten, n = onednn.lowered_with(lowered, eligible)
    assert n == sum(d.eligible for d in dots)
    assert lowered.as_text() == before and "__onednn" not in jax.jit(attention_mlp).lower(p, x).as_text()
    exe = rewritten.compile()
    assert exe.as_text().count('custom_call_target="__onednn$matmul"') == n, "XLA kept every call"
    assert xla_cpu.measuring._same(exe(p, x), jax.jit(attention_mlp)(p, x))
    # Only the chosen signatures are rewritten.
    one, n1 = onednn.lowered_with(lowered, eligible[:1])
    assert 1 <= n1 < n and one.compile().as_text().count("__onednn$matmul\"") == n1


def conv_net(w, x, x1):
    h = jax.nn.relu(jax.lax.conv_general_dilated(x, w["a"], (2, 2), [(1, 0), (1, 0)],
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC")))
    d = jax.lax.conv_general_dilated(x1, w["b"], (1,), [(2, 2)], rhs_dilation=(2,),
                                     dimension_numbers=("NWC", "WIO", "NWC"))
    g = jax.lax.conv_general_dilated(x, w["dw"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                     feature_group_count=16)
    # No padding at all: MLIR holds it as a splat (dense<0>).
    v = jax.lax.conv_general_dilated(x, w["a"], (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return h, d, g, v


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_onednn_convolutions_are_honoured(dtype):
    from hlo_opt import onednn

    if onednn.supported():
        pytest.skip(onednn.supported())
    k = jax.random.PRNGKey(5)
    n = lambda i, s, sc=1.0: (jax.random.normal(jax.random.fold_in(k, i), s) * sc).astype(dtype)  # noqa: E731
    w = {"a": n(0, (3, 3, 16, 32), 0.1), "b": n(1, (3, 16, 16), 0.1), "dw": n(2, (3, 3, 1, 16), 0.3)}
    args = (w, n(3, (2, 8, 8, 16)), n(4, (2, 32, 16)))
    lowered = jax.jit(conv_net).lower(*args)
    convs = [c for c in onednn.contractions(lowered) if c.signature.startswith("conv ")]
    assert [c.eligible for c in convs] == [True, True, False, True], "a grouped convolution keeps XLA's kernel"
    assert convs[3].signature.endswith(" s[1,1] p[0_0,0_0] ld[1,1] rd[1,1] g1"), convs[3]
    assert convs == onednn.contractions(lowered.as_text()), "read from the module or from its text alike"
    rewritten, n_ops = onednn.lowered_with(lowered, [c.signature for c in convs])
    assert n_ops == 3
    exe = rewritten.compile()
    assert exe.as_text().count('custom_call_target="__onednn$convolution"') == 3
    assert xla_cpu.measuring._same(exe(*args), jax.jit(conv_net)(*args))


def test_the_rust_pass_and_the_rewrite_agree_on_every_op():
    from hlo_opt import onednn
    from hlo_opt.cpu_corpus import programs

    checked = 0
    for prog in programs(seed=0, count=28)[::2]:
        lowered = jax.jit(prog.fn).lower(*prog.args)
        record, _ = xla_cpu.decide(lowered)
        if record.get("op_model") is None:
            pytest.skip("no op model for this jaxlib")
        rust = {d["signature"] for d in record["onednn"]}
        py = {d.signature for d in onednn.contractions(lowered) if d.eligible}
        assert rust == py, prog.name
        checked += len(py)
    k = jax.random.PRNGKey(0)
    w = {"a": jnp.ones((3, 3, 16, 32)), "b": jnp.ones((3, 16, 16)), "dw": jnp.ones((3, 3, 1, 16))}
    for f, args in [(attention_mlp, attention_inputs(jnp.bfloat16)),
                    (conv_net, (w, jax.random.normal(k, (2, 8, 8, 16)), jax.random.normal(k, (2, 32, 16))))]:
        lowered = jax.jit(f).lower(*args)
        record, _ = xla_cpu.decide(lowered)
        assert {d["signature"] for d in record["onednn"]} == \
            {d.signature for d in onednn.contractions(lowered) if d.eligible}
    assert checked >= 10


def test_an_unverified_jaxlib_gets_no_rewrite_and_a_reason(monkeypatch):
    from hlo_opt import onednn

    assert "not 0.9.9" in onednn.supported("0.9.9")
    monkeypatch.setattr(onednn, "VERIFIED", ())
    p, x = attention_inputs(jnp.bfloat16)
    with pytest.raises(RuntimeError, match="per-op oneDNN matmuls were verified on"):
        onednn.lowered_with(jax.jit(attention_mlp).lower(p, x), ["f32[1,1]x[1,1] b[]x[] c[1]x[0]"])
    c = hj.compile(attention_mlp, p, x)
    assert c.onednn == [] and "+onednn" not in c.choice
    leaves_equal(c(p, x), jax.jit(attention_mlp)(p, x)) if c.choice == "default" else None


def test_measuring_all_includes_the_onednn_choices():
    from hlo_opt import onednn

    if onednn.supported():
        pytest.skip(onednn.supported())
    p, x = attention_inputs(jnp.bfloat16)
    c = hj.compile(attention_mlp, p, x, measure="all")
    names = c.measured["candidates"]
    assert any(n.endswith("(every op)") or "+onednn:" in n for n in names), names
    assert xla_cpu.measuring._same(c(p, x), jax.jit(attention_mlp)(p, x))
    if "+onednn:" in c.choice:
        assert c.onednn and "__onednn$matmul" in c._exe.as_text()


@pytest.mark.parametrize("screened,confirmed,kept", [(0.5, 0.5, True), (0.5, 1.0, False), (1.5, None, False)])
def test_verify_keeps_the_fastest_only_when_timed_again_faster(monkeypatch, screened, confirmed, kept):
    from hlo_opt import onednn

    if onednn.supported():
        pytest.skip(onednn.supported())
    p, x = attention_inputs(jnp.bfloat16)
    sigs = tuple(sorted({d.signature for d in onednn.contractions(jax.jit(attention_mlp).lower(p, x).as_text())
                         if d.eligible}))
    monkeypatch.setattr(xla_cpu.compiling, "_model_pick", lambda decision, notes: ("default+onednn:9", {}, sigs))
    screens, confirms = [], []

    # The model's choice (first in the space) screens fastest, the rest far
    # behind; the last stage times it again.
    def timing(exes, base, a, budget):
        if not screens:
            screens.append(len(exes))
            return [screened] + [1.2] * (len(exes) - 1)
        confirms.append((len(exes), budget))
        return [confirmed] * len(exes)

    monkeypatch.setattr(xla_cpu.verify, "_paired_ratios", timing)
    c = hj.compile(attention_mlp, p, x)
    v = c.decision["verified"]
    assert screens and screens[0] >= 1 and v["candidates"][0] == "default+onednn:9", v
    assert confirms == ([] if screened > 1 else [(1, 0.5)]), "only a fast screen is timed again, alone"
    assert f"verified default+onednn:9{' ' * 16} x{screened:.3f} of the default" in c.explain(), c.explain()
    assert ("again    default+onednn:9" in c.explain()) == (screened < 1), c.explain()
    if screened < 1:
        assert f"again    default+onednn:9{' ' * 16} x{confirmed:.3f}" in c.explain(), c.explain()
    if kept:
        assert c.choice == "default+onednn:9" and c.onednn == list(sigs) and v["confirmed"] == confirmed
    else:
        assert c.choice == "default" and c.onednn == [] and "kept XLA's default" in c.decision["reason"], c.decision
        leaves_equal(c(p, x), jax.jit(attention_mlp)(p, x))
    screens.clear(), confirms.clear()
    hj.compile(attention_mlp, p, x, verify=0)
    assert screens == [] and confirms == [], "verify=0 trusts the model"


def test_verify_times_the_models_choice_the_cards_portfolio_and_every_op_once():
    from hlo_opt import onednn

    p, x = attention_inputs(jnp.bfloat16)
    lowered = jax.jit(attention_mlp).lower(p, x)
    decision, notes = xla_cpu.decide(lowered)
    assert decision["verify"], "the card's portfolio reaches the decision"
    pick = ("ynn:none+onednn:1", xla_cpu.options_of("ynn:none"), ("sig",))
    space = xla_cpu.verify._verify_space(dict(decision, verify=["ynn:none", "ynn:none", "default"]), pick, lowered)
    names = [c[0] for c in space]
    assert names[:2] == ["ynn:none+onednn:1", "ynn:none"], names
    assert "default" not in names and len(set(names)) == len(names)
    if not onednn.supported():
        assert names[-1].endswith("(every op)"), names


def test_paired_ratios_time_each_against_the_base_on_copies():
    f = jax.jit(lambda a: a * 2.0)
    g = jax.jit(lambda a: jnp.sort(a) * 2.0)
    r = xla_cpu.verify._paired_ratios([g, f], f, ((jnp.ones((1 << 16,)),), {}), 0.05)
    assert r[0] > 1.0, "a sort costs more than a multiply"


def test_op_labels_are_collected_resumably_on_one_device(tmp_path, monkeypatch):
    from hlo_opt import onednn
    from hlo_opt.xla_cpu import ops

    if onednn.supported():
        pytest.skip(onednn.supported())
    sigs = ["f32[8,16]x[16,32] b[]x[] c[1]x[0]", "bf16[2,4,8]x[2,8,4] b[0]x[0] c[2]x[1]"]
    out = ops.collect(sigs, tmp_path / "ops.npz", budget_s=0.01)
    with np.load(out) as z:
        assert list(z["signatures"]) == sigs and z["ok"].all() and (z["ratio"] > 0).all()
        assert all("dot(" in str(h) for h in z["hlo"])
    measured, real = [], ops.measure_op
    monkeypatch.setattr(ops, "measure_op", lambda s, budget_s: measured.append(s) or {
        "signature": s, "ratio": 1.0, "control": 1.0, "default_ns": 1.0, "rounds": 9, "ok": True, "hlo": ""})
    ops.collect(sigs + ["f32[4,4]x[4,4] b[]x[] c[1]x[0]"], out, budget_s=0.01)
    assert measured == ["f32[4,4]x[4,4] b[]x[] c[1]x[0]"], "what was measured is not measured again"
    monkeypatch.setattr(ops, "fingerprint", lambda: {"cpu": "another"})
    with pytest.raises(RuntimeError, match="was measured on"):
        ops.collect(sigs, out)
    with pytest.raises(ValueError, match="not a dot signature"):
        ops.parse_signature("f32[8]x")
    with pytest.raises(ValueError, match="oneDNN does not take this form"):
        real("f32[16,8]x[16,32] b[]x[] c[0]x[0]")


def test_verify_times_only_other_valid_executables_that_are_not_far_slower():
    import time as _time

    class Exe:
        # Every run takes at least 2 ms: ratios of microsecond runs are noise
        # on a loaded machine (this test once failed so).
        def __init__(self, text, value=1.0, sleep=0.002, first_sleep=0.0):
            self.text, self.value, self.sleep, self.first_sleep = text, value, sleep, first_sleep

        def as_text(self):
            return f"HloModule m\n{self.text}"

        def __call__(self, x):
            _time.sleep(self.sleep + self.first_sleep)
            self.first_sleep = 0.0
            return x * self.value

    # The default, slow at its first call only: it is measured warm.
    base = Exe("A", first_sleep=0.06)
    cands = [(n, {}, ()) for n in ["same", "slow", "wrong", "broken", "slow again", "fine", "slow once"]]
    exes = [Exe("A"), Exe("B", sleep=0.06), Exe("C", value=2.0), RuntimeError("refused"), Exe("B"), Exe("D"),
            Exe("E", first_sleep=0.06)]
    args = ((np.ones((4,), np.float32),), {})  # numpy: no first-call compile in the timing
    st = xla_cpu.verify._verify_check(base, cands, exes, args, check=True)
    assert st["status"] == ["the default's executable", "slow in two runs", "other results",
                            "did not compile: refused", "slow's executable", "timed", "timed"], st["status"]
    assert st["same_as"] == {0: -1, 4: 1} and st["first"][1] > xla_cpu.verify.FIRST_RUN_CUT
    # A slow first run alone cuts nothing: its faster (second) run is what
    # is kept (about 2 ms, not the first run's 62 ms; seconds, not a ratio
    # of two short runs, which a loaded machine moves by 2x).
    assert st["first"][6] * st["took"] < 0.03, "the faster run is kept"
    # Given the state of a prefix, only the rest runs: a twin of an earlier
    # one is found without running it again.
    more = xla_cpu.verify._verify_check(base, cands + [("later", {}, ())], exes + [Exe("D")], args, True,
                                        dict(st, status=list(st["status"]), first=list(st["first"]),
                                             same_as=dict(st["same_as"]), seen=dict(st["seen"])))
    assert more["status"][7:] == ["fine's executable"] and more["same_as"][7] == 5
    # Only "fine" is timed; the shared ones take their twin's ratio.
    pick, record, exe = xla_cpu.verify._verify(base, cands, exes, args, 0.01, check=True)
    assert record["ratio"][0] == 1.0 and record["ratio"][4] == record["ratio"][1]
    assert pick[0] in ("fine", "slow once", "default")
    assert exe is {"fine": exes[5], "slow once": exes[6], "default": None}[pick[0]]


def test_the_decision_reads_the_stablehlo_as_xla_would_convert_it():
    import jaxlib

    from hlo_opt import _native

    p, x = attention_inputs(jnp.bfloat16)
    lowered = jax.jit(attention_mlp).lower(p, x)
    text = lowered.compiler_ir().operation.get_asm(print_generic_op_form=True)
    from_mlir = hlo_opt.parse_stablehlo(text)
    from_hlo = hlo_opt.parse(lowered.as_text(dialect="hlo"))

    def decision(m):
        return json.loads(_native.xla_cpu_decide(m, jaxlib=jaxlib.__version__, model=None)[0])

    assert decision(from_mlir) == decision(from_hlo)
    assert decision(xla_cpu.decision._module_of(lowered)) == decision(from_hlo)
    with pytest.raises(hlo_opt.HloError, match=r":1:"):
        hlo_opt.parse_stablehlo('"builtin.module"() ({ %0 = "stablehlo.nope"(')
    # jax prints it as bytes for the decision (no decode in Python): the
    # same module, and bytes that are not UTF-8, or other types, refused.
    assert str(hlo_opt.parse_stablehlo(text.encode())) == str(from_mlir)
    with pytest.raises(ValueError, match="not UTF-8"):
        hlo_opt.parse_stablehlo(text.encode()[:40] + b"\xff" + text.encode()[40:])
    with pytest.raises(TypeError, match="str or UTF-8 bytes"):
        hlo_opt.parse_stablehlo(["not", "text"])


def _unusual(name):
    """Small programs with the constructs the StableHLO reader learned from
    a sweep of unusual programs (they were read from jax's HLO before)."""
    f32 = lambda *s: jnp.asarray(np.random.default_rng(len(s)).standard_normal(s), jnp.float32)
    return {
        "cond": (lambda p, x, w: jax.lax.cond(p > 0, lambda y: (y @ w, jnp.tanh(y)), lambda y: (y.T, y), x),
                 (jnp.float32(1.0), f32(16, 16), f32(16, 16))),
        "switch": (lambda i, x: jax.lax.switch(i, [lambda y: y @ y, lambda y: y + 1.0, lambda y: y], x),
                   (jnp.int32(2), f32(8, 8))),
        "checkpoint": (jax.grad(lambda w, x: jax.checkpoint(lambda w: jnp.tanh(x @ w) @ w)(w).sum()),
                       (f32(16, 16), f32(4, 16))),
        "top_k_erf": (lambda x: jax.lax.top_k(jax.lax.erf(x @ x.T), 3), (f32(16, 32),)),
        "bits": (lambda x: (jax.lax.clz(x) + jax.lax.population_count(x)).sum(), (jnp.arange(64, dtype=jnp.int32),)),
        "fft": (lambda x: jnp.fft.fft(x).real @ x.T, (f32(8, 32),)),
        "reduce_precision": (lambda x: jax.lax.reduce_precision(x @ x, 5, 10), (f32(16, 16),)),
        "scatter_scalar_index": (lambda t, i: t.at[i].set(0.0) @ t.T, (f32(8, 8), jnp.int32(3))),
        "random_normal": (lambda k, x: x @ jax.random.normal(k, (16, 8)), (jax.random.PRNGKey(1), f32(4, 16))),
        "erf_inv_bf16": (lambda x: jax.lax.erf_inv(jnp.tanh(x) * 0.5).astype(jnp.float32),
                         (f32(8, 16).astype(jnp.bfloat16),)),
        "shard_map": (_psum_pmax, (f32(8, 8), f32(8))),
    }[name]


def _psum_pmax(a, b):
    """``shard_map`` with ``psum`` and ``pmax`` (collectives) over the test's
    one CPU device."""
    from jax.sharding import Mesh, PartitionSpec as PS

    try:
        from jax import shard_map
    except ImportError:
        from jax.experimental.shard_map import shard_map
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))
    return shard_map(lambda a, b: (jax.lax.psum(a @ a.T, "x"), jax.lax.pmax(jnp.tanh(b), "x")), mesh=mesh,
                     in_specs=(PS("x"), PS("x")), out_specs=(PS(), PS()))(a, b)


@pytest.mark.parametrize("name", ["cond", "switch", "checkpoint", "top_k_erf", "bits", "fft", "reduce_precision",
                                  "scatter_scalar_index", "random_normal", "erf_inv_bf16", "shard_map"])
def test_the_stablehlo_reader_reads_control_flow_barriers_and_complex_as_xla_converts_them(name):
    """Under the jaxlib that runs the test: read from its StableHLO (no
    fallback to jax's HLO text), the module gives the decision jax's own
    conversion gives."""
    import jaxlib

    from hlo_opt import _native

    f, args = _unusual(name)
    lowered = jax.jit(f).lower(*args)
    text = lowered.compiler_ir().operation.get_asm(print_generic_op_form=True)
    from_mlir = hlo_opt.parse_stablehlo(text)
    from_hlo = hlo_opt.parse(lowered.as_text(dialect="hlo"))
    decide = lambda m: json.loads(_native.xla_cpu_decide(m, jaxlib=jaxlib.__version__, model=None)[0])
    assert decide(from_mlir) == decide(from_hlo)
    # And the one-liner runs it, with jax.jit's results.
    want, got = jax.jit(f)(*args), hj.compile(f, *args, backend="cpu", verify=0)(*args)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_the_decision_does_not_read_the_elements_of_closed_over_weights():
    """Weights closed over by the function are constants of the module: the
    decision reads their shapes only (XLA's elided literal), and decides as
    from jax's HLO text, which holds every element."""
    import jaxlib

    from hlo_opt import _native

    w1 = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
    w2 = np.random.default_rng(1).standard_normal((512, 64)).astype(np.float32)
    lowered = jax.jit(lambda x: jnp.tanh(x @ w1) @ w2 + 1.0).lower(jnp.ones((8, 256), jnp.float32))
    module = xla_cpu.decision._module_of(lowered)
    text = str(module)
    assert text.count("constant({...})") == 2 and len(text) < 4000, "the weights' elements were read"
    decide = lambda m: json.loads(_native.xla_cpu_decide(m, jaxlib=jaxlib.__version__, model=None)[0])
    assert decide(module) == decide(hlo_opt.parse(lowered.as_text(dialect="hlo")))


class _Fake:
    """An executable of a given optimized module that returns its input."""

    def __init__(self, text):
        self.text = text

    def as_text(self):
        return f"HloModule m\n{self.text}"

    def __call__(self, x):
        return x


@pytest.mark.parametrize("eltwise,searched", [(0.99, True), (1.05, False)])
def test_verify_searches_one_kind_away_from_the_fastest_module_wide_candidate(monkeypatch, eltwise, searched):
    """The neighbours of the fastest module-wide candidate are compiled and
    timed with it, and one of them is kept when it is the fastest; none
    when that candidate ran beyond LOCAL_SEARCH_WITHIN of the default."""
    cands = [("default+onednn:1", {}, ("sig",)), ("ynn:eltwise", {}, ()), ("ynn:dot", {}, ())]
    exes = [_Fake(c[0]) for c in cands]
    built, screens = [], []
    # First screen: oneDNN 0.95, ynn:eltwise as given, ynn:dot 1.10; then the
    # centre and its neighbours ynn:none, ynn:dot+eltwise, ynn:eltwise+reduce.
    # The last stage times the one contender again: 0.91.
    timings = iter([[0.95, eltwise, 1.10]] + ([[0.97, 1.30, 0.90, 1.00]] if searched else []) + [[0.91]])
    monkeypatch.setattr(xla_cpu.verify, "_paired_ratios",
                        lambda ex, base, a, budget: screens.append([e.text for e in ex]) or next(timings))

    def expand(new):
        built.append([c[0] for c in new])
        return [_Fake(c[0]) for c in new]

    args = ((np.ones((4,), np.float32),), {})
    pick, record, exe = xla_cpu.verify._verify(_Fake("default"), cands, exes, args, 0.01, True, expand=expand)
    if searched:
        assert built == [["ynn:none", "ynn:dot+eltwise", "ynn:eltwise+reduce"]], built
        assert screens[1] == ["ynn:eltwise", "ynn:none", "ynn:dot+eltwise", "ynn:eltwise+reduce"], screens
        assert pick[0] == "ynn:dot+eltwise" and exe.text == "ynn:dot+eltwise" and record["confirmed"] == 0.91
        assert record["searched"] == built[0] and record["ratio"][1] == 0.97, record
    else:
        assert built == [] and len(screens) == 2 and record["searched"] == []
        assert pick[0] == "default+onednn:1", "the fastest screened, confirmed"
    assert screens[-1] == [pick[0]] and record["contenders"] == [pick[0]] and record["final"] == [0.91]


@pytest.mark.parametrize("final,chosen", [([0.93, 0.88], "b"), ([0.93, 0.99], "a"), ([0.985, 0.99], "default")])
def test_verify_times_the_close_candidates_again_and_keeps_the_fastest_of_that_stage(monkeypatch, final, chosen):
    """Candidates within CONTEND_WITHIN of the fastest screened one run again
    together; the fastest of that stage is kept when it is at VERIFY_KEEP
    or better; one further behind is not timed again."""
    cands = [(n, {}, ("sig",)) for n in ["a", "b", "far"]]
    exes = [_Fake(n) for n in ["a", "b", "far"]]
    stages = []
    timings = iter([[0.90, 0.93, 0.96], final])
    monkeypatch.setattr(xla_cpu.verify, "_paired_ratios",
                        lambda ex, base, a, budget: stages.append(([e.text for e in ex], budget)) or next(timings))
    pick, record, exe = xla_cpu.verify._verify(_Fake("default"), cands, exes, ((np.ones((4,), np.float32),), {}),
                                               0.5, True)
    assert stages[1] == (["a", "b"], 0.75), "the two close ones, with the rounds one alone would get"
    assert record["contenders"] == ["a", "b"] and record["final"] == final
    assert pick[0] == chosen and (exe is None) == (chosen == "default"), record
    assert record["confirmed"] == min(final) and ("fastest of 2 timed again" in record["why"]), record


def test_a_kept_choice_is_taken_again_without_deciding_or_timing(tmp_path, monkeypatch):
    """With a cache folder, a verified choice is written there; the same
    program compiled again takes it (no decision, no candidates compiled,
    nothing timed) with the same results, and another shape, CPU or model
    is a miss. An unreadable entry is a warning and a miss, then written
    anew; HLO_OPT_CACHE_DIR names the folder too."""
    params, x = inputs()
    first = hj.compile(block, params, x, 0.5, verify=0.05, cache_dir=tmp_path)
    files = list(tmp_path.glob("xla_cpu-*.json"))
    assert len(files) == 1 and "cached" not in first.decision
    kept = json.loads(files[0].read_text())
    assert kept["choice"] == first.choice and kept["decision"]["verified"]

    def refuse(*a, **k):
        raise AssertionError("decided again")

    with monkeypatch.context() as m:
        m.setattr(xla_cpu.compiling, "decide", refuse)
        m.setattr(xla_cpu.compiling, "_verify", refuse)
        again = hj.compile(block, params, x, 0.5, verify=0.05, cache_dir=tmp_path)
        assert again.choice == first.choice and again.onednn == first.onednn
        assert again.decision["cached"] == str(files[0])
        assert "not made again" in again.explain()
        assert xla_cpu.measuring._same(again(params, x, 0.5), jax.jit(block)(params, x, 0.5))
        m.setenv("HLO_OPT_CACHE_DIR", str(tmp_path))
        assert hj.compile(block, params, x, 0.5).decision["cached"] == str(files[0])
        # Another shape, another CPU, another model: another key.
        with pytest.raises(AssertionError, match="decided again"):
            hj.compile(block, params, x[:4], 0.5, cache_dir=tmp_path)
        with pytest.raises(AssertionError, match="decided again"):
            hj.compile(block, params, x, 0.5, cache_dir=tmp_path, model=str(files[0]))
        cpu = xla_cpu.fingerprint()
        m.setattr(xla_cpu.cache, "fingerprint", lambda: dict(cpu, cpu="another CPU"))
        with pytest.raises(AssertionError, match="decided again"):
            hj.compile(block, params, x, 0.5, cache_dir=tmp_path)
    files[0].write_text('{"format": 1, "key": "')
    with pytest.warns(UserWarning, match="ignoring the cached choice"):
        remade = hj.compile(block, params, x, 0.5, verify=0.05, cache_dir=tmp_path)
    assert "cached" not in remade.decision
    assert json.loads(files[0].read_text())["choice"] == remade.choice
    # A kept choice that XLA no longer compiles is a warning and a miss.
    entry = json.loads(files[0].read_text())
    files[0].write_text(json.dumps(dict(entry, choice="ynn:none", onednn=[])))
    real, calls = xla_cpu.cache._compile, []

    def fails_once(*a, **k):
        calls.append(a[1:])
        if len(calls) == 1:
            raise RuntimeError("INVALID_ARGUMENT: an option this XLA does not take")
        return real(*a, **k)

    monkeypatch.setattr(xla_cpu.cache, "_compile", fails_once)
    with pytest.warns(UserWarning, match="cached choice ynn:none .* no longer compiles"):
        remade = hj.compile(block, params, x, 0.5, verify=0.05, cache_dir=tmp_path)
    assert "cached" not in remade.decision and calls[0] == (xla_cpu.options_of("ynn:none"), ())
    assert xla_cpu.measuring._same(remade(params, x, 0.5), jax.jit(block)(params, x, 0.5))
    # Without verify or measure nothing is kept.
    hj.compile(block, params, x * 2, 0.5, verify=0, cache_dir=tmp_path / "none")
    assert not (tmp_path / "none").exists()
