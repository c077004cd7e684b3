"""`hlo_opt.jax`: a jitted function's module, and the function compiled
through hlo-opt's passes and the PJRT path of `--measure` (layouts kept),
giving what `jax.jit(f)` gives, on three small models on XLA's CPU plugin.
Skipped (and recorded as skipped) without jax or the CPU plugin."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

import hlo_opt  # noqa: E402
import hlo_opt.jax as hj  # noqa: E402
from conftest import plugin_available  # noqa: E402


needs_plugin = pytest.mark.skipif(not plugin_available(), reason="XLA's CPU PJRT plugin (pip install xla-cpu-pjrt) is not installed")


def mlp(params, x):
    for w, b in params:
        x = jax.nn.relu(x @ w + b)
    return x.sum(axis=-1), x


def convnet(kernel1, kernel2, x):
    dn = ("NHWC", "HWIO", "NHWC")
    y = jax.lax.conv_general_dilated(x, kernel1, (1, 1), "SAME", dimension_numbers=dn)
    y = jnp.tanh(y)
    y = jax.lax.conv_general_dilated(y, kernel2, (2, 2), "SAME", dimension_numbers=dn)
    return y.mean(axis=(1, 2))


def attention(q, k, v):
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


def inputs(seed: int, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


MODELS = {
    "mlp": (mlp, lambda: ([tuple(inputs(0, (16, 32), (32,))), tuple(inputs(1, (32, 8), (8,)))], inputs(2, (4, 16))[0])),
    "convnet": (convnet, lambda: tuple(inputs(3, (3, 3, 4, 8), (3, 3, 8, 8), (2, 16, 16, 4)))),
    "attention": (attention, lambda: tuple(inputs(4, (2, 4, 16, 8), (2, 4, 16, 8), (2, 4, 16, 8)))),
}


def test_the_module_of_a_jitted_function_prints_as_hlo_opt_prints_it() -> None:
    args = MODELS["convnet"][1]()
    m = hj.module(convnet, *args)
    assert isinstance(m, hlo_opt.Module)
    assert "convolution(" in str(m)
    again = hlo_opt.parse(str(m))
    assert str(again) == str(m)
    assert hlo_opt.featurize(m)["node_config_ids"].size >= 2, "both convolutions are configurable"


@needs_plugin
@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_through_the_passes_gives_what_jax_jit_gives(name: str) -> None:
    f, make = MODELS[name]
    args = make()
    # An unbounded search acting on any predicted gain, so that layouts
    # other than XLA's default run (the mlp and the attention block get
    # copies and relaid-out instructions; the convnet's best is rejected for
    # the price of its copies).
    c = hj.compile(f, *args, passes=["layout"], trust_radius="all", budget=300, min_gain=0, check=False)
    assert c.result.changed or name == "convnet", c.result.explain
    got = c(*args)
    want = jax.jit(f)(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-5)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    assert c.result is not None and c.result.decisions[0]["pass"] == "layout"
    # Called again with other values: the same executable, new results.
    other = jax.tree_util.tree_map(lambda a: a * 0.5, args)
    for g, w in zip(jax.tree_util.tree_leaves(c(*other)), jax.tree_util.tree_leaves(jax.jit(f)(*other))):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-5)


@needs_plugin
def test_a_result_that_differs_from_jax_jit_raises() -> None:
    args = MODELS["attention"][1]()
    c = hj.compile(attention, *args, passes=[], check=True)
    c(*args)  # the first call checks, and agrees
    c._check = True
    c._f = lambda q, k, v: attention(q, k, v) + 1.0  # planted: jax now disagrees
    with pytest.raises(hlo_opt.BackendError, match="differs from jax.jit"):
        c(*args)


@needs_plugin
def test_wrong_arguments_are_refused() -> None:
    args = MODELS["attention"][1]()
    c = hj.compile(attention, *args, passes=[], check=False)
    with pytest.raises(ValueError, match="shape"):
        c(args[0][:1], args[1], args[2])
    with pytest.raises(TypeError):
        c(args[0], args[1])


def test_the_example_of_docs_python_md_runs_as_written(capsys) -> None:
    import re
    from conftest import ROOT

    doc = (ROOT / "docs" / "python.md").read_text()
    # The one ```python block runs here; ```py blocks need a GPU and are not run.
    [example] = re.findall(r"```python\n(.*?)```", doc, re.S)
    exec(compile(example, "docs/python.md", "exec"), {})
    out = capsys.readouterr().out
    assert "layout: decision: applied" in out, out[-2000:]


@needs_plugin
def test_measured_candidates_come_with_their_times() -> None:
    f, make = MODELS["attention"]
    m = hj.module(f, *make())
    r = m.run_passes(["layout"], measure="xla-cpu", measure_budget=0.2, trust_radius="all", min_gain=0, explain=True)
    measured = r.decisions[0].get("measurement")
    assert measured is not None, r.explain
    seconds = measured["seconds"]
    assert len(seconds) >= 2 and all(s is not None and s > 0 for s in seconds), measured
    assert 0 <= measured["default"] < len(seconds) and 0 <= measured["kept"] < len(seconds)
    assert measured["report"] in r.explain and "compiler default:" in measured["report"]
