"""Cross-validation of the XLA:CPU kernel model (costmodel/training/
xla_cpu_model.py) by program: leave-one-program-out, which issue 37 asks
for beside the stricter leave-one-family-out the card records."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import ROOT

pytest.importorskip("lightgbm")
sys.path.insert(0, str(ROOT / "costmodel" / "training"))
import xla_cpu_model as M  # noqa: E402


def programs(n=24):
    """One family; ``ynn:none`` runs 2x faster than the default where the
    first feature is positive and 2x slower elsewhere; every other
    candidate is the default's speed."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        x = float(rng.uniform(-1, 1))
        ratio = np.ones(len(M.CANDIDATES))
        ratio[M.CANDIDATES.index("ynn:none")] = 0.5 if x > 0 else 2.0
        out.append(dict(name=f"p{i}", family="one", features=[x, float(rng.uniform())] + [0.0] * 30,
                        ratio=ratio, ok=np.ones(len(M.CANDIDATES), bool), meta={}))
    return out


def test_leave_one_program_out_learns_what_the_other_programs_show(monkeypatch):
    progs = programs()
    seen = []
    fit = M.fit
    monkeypatch.setattr(M, "fit", lambda train, variant: seen.append({p["name"] for p in train}) or fit(train, variant))
    preds = M.lofo_predictions(progs, "gbm-small", group="name")
    # One model per program, trained on every other program and not on it.
    names = {p["name"] for p in progs}
    assert sorted(map(sorted, seen)) == sorted(sorted(names - {n}) for n in names)
    assert set(preds) == {p["name"] for p in progs}
    errs = M.candidate_errors(progs, preds)
    r = M.evaluate(progs, preds, errs, 0.0)
    default = M.baseline(progs)["default_mean"]
    assert default > 0.4, "half the programs run 2x faster on ynn:none"
    assert r["mean"] < 0.1 * default, r
    # Its portfolio of one is ynn:none, chosen without the program.
    cv = M.portfolio_cv(progs, k=1, group="name")
    assert cv["portfolio_mean"] == pytest.approx(0.0)




def test_local_search_finds_the_best_one_kind_from_the_portfolios_best():
    """Families A and B run 2x faster on ynn:reduce, so each fold's portfolio
    of one is ynn:reduce; C runs ynn:reduce at 0.95x and its best,
    ynn:dot+reduce (one kind away), at 0.5x: only the search finds it. D
    runs every candidate 1.5x slower: its portfolio's best is beyond
    LOCAL_SEARCH_WITHIN, so nothing is searched."""
    def prog(family, **ratios):
        ratio = np.full(len(M.CANDIDATES), ratios.pop("rest", 1.0))
        ratio[0] = 1.0
        for name, r in ratios.items():
            ratio[M.CANDIDATES.index("ynn:" + name.replace("_", "+"))] = r
        return dict(name=family.lower(), family=family, features=[0.0] * 32, ratio=ratio,
                    ok=np.ones(len(M.CANDIDATES), bool), meta={})

    progs = [prog("A", reduce=0.5), prog("B", reduce=0.5), prog("C", reduce=0.95, dot_reduce=0.5),
             prog("D", rest=1.5)]
    assert sorted(M.neighbours(M.CANDIDATES.index("ynn:reduce"))) == sorted(
        M.CANDIDATES.index(n) for n in ("ynn:dot+reduce", "ynn:eltwise+reduce", "ynn:none"))
    assert M.portfolio_cv(progs, k=1)["portfolio_mean"] == pytest.approx(0.9 / 4), "C stays at 0.95x"
    slow, extra = M.local_search_cv(progs, k=1)
    assert slow == pytest.approx(0.0), "the search reaches C's best"
    assert extra == pytest.approx(9 / 4), "three neighbours each for A, B and C; none for D"


def test_the_search_cross_validated_here_is_the_one_verify_runs():
    """The training script keeps its own copy of verify's local search (it
    runs without the native package's models): the same candidates in the
    same order, the same threshold, and the same neighbours of every
    module-wide candidate as ``hlo_opt.xla_cpu.verify._neighbours``."""
    from hlo_opt import xla_cpu

    assert M.CANDIDATES == list(xla_cpu.CANDIDATE_NAMES)
    assert M.LOCAL_SEARCH_WITHIN == xla_cpu.verify.LOCAL_SEARCH_WITHIN
    for i, name in enumerate(M.CANDIDATES[1:], start=1):
        cands = [(name, xla_cpu.options_of(name), ())]
        centre, near = xla_cpu.verify._neighbours(cands, [1.0], ["timed"])
        assert centre == 0, name
        assert sorted(n for n, _, _ in near) == sorted(M.CANDIDATES[j] for j in M.neighbours(i)), name


def test_the_variant_is_chosen_by_program_and_the_margin_is_never_below_trusted(monkeypatch, capsys):
    """The variant is the best ranker by leave-one-program-out; the margin is
    chosen by leave-one-family-out among margins of at least ``TRUSTED``,
    even where a smaller one scores best (the issue's trust rule: a choice
    leaves the default only when its predicted gain beats the error)."""
    import argparse

    progs = [dict(p, family=f"f{i % 3}", meta={"device": {"cpu": "test"}}) for i, p in enumerate(programs(18))]
    monkeypatch.setattr(M, "lopo_top1", lambda ps, v: {"gbm-small": 0.01}.get(v, 0.20))
    real = M.evaluate

    def evaluate(ps, preds, errs, margin):
        r = dict(real(ps, preds, errs, margin))
        r["mean"] = 0.0 if margin < M.TRUSTED else 0.5 + (0.001 if margin == 1.0 else 0.0)
        return r

    monkeypatch.setattr(M, "evaluate", evaluate)
    M.run(argparse.Namespace(variant=None, nested=False, lopo=False, export=None), progs)
    out = capsys.readouterr().out
    assert "gbm-small    leave-one-program-out, margin 0: mean top-1 slowdown 1.00%" in out
    chosen = next(line for line in out.splitlines() if line.startswith("chosen: "))
    # Margins 1.5 and up tie (within SAFETY) at the trusted floor: the largest.
    assert chosen.startswith(f"chosen: gbm-small, margin {max(M.MARGINS)}:"), chosen
    assert "'lopo_top1': 0.01" in chosen, chosen


def test_leave_one_program_out_leaves_out_every_copy_of_the_program(monkeypatch):
    """The corpus draws some programs twice (the same HLO): a copy in the
    training set would be the program itself. ``group="module"`` leaves out
    every program with the same module hash."""
    progs = programs(6)
    for p in progs:
        p["module"] = p["name"]
    progs[3]["module"] = progs[1]["module"]  # p3 is a copy of p1
    seen = {}
    fit = M.fit

    def spy(train, variant):
        model = fit(train, variant)
        seen[len(seen)] = {p["name"] for p in train}
        return model

    monkeypatch.setattr(M, "fit", spy)
    preds = M.lofo_predictions(progs, "knn-3", group="module")
    assert set(preds) == {p["name"] for p in progs}
    assert sorted(map(sorted, seen.values())) == sorted(
        sorted({p["name"] for p in progs} - drop) for drop in ({"p0"}, {"p1", "p3"}, {"p2"}, {"p4"}, {"p5"}))


def test_nearest_programs_average_their_neighbours_and_onnx_runs_the_same():
    """``knn-K`` predicts each candidate's log ratio as the mean over the K
    training programs nearest in standardized features; its ONNX graph
    (what the pass runs) gives the same value for every candidate's row,
    the candidate read from the row's encoding."""
    onnxruntime = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from knn_onnx import knn_onnx

    rng = np.random.default_rng(1)
    progs = []
    for i in range(12):
        ratio = np.exp(rng.normal(0, 0.3, len(M.CANDIDATES)))
        ratio[0] = 1.0
        ok = np.ones(len(M.CANDIDATES), bool)
        ok[5] = i != 4  # one candidate failed on one program
        progs.append(dict(name=f"p{i}", family="one", ratio=ratio, ok=ok, meta={},
                          features=list(rng.normal(0, 1, 32) * np.linspace(1, 50, 32))))
    model = M.fit(progs, "knn-3")
    query = dict(progs[0], features=list(np.asarray(progs[4]["features"]) * 1.001 + 0.01))
    x = M.predict_rows(query)
    pred = model.predict(x)
    # By hand: the three nearest in standardized distance, their mean labels.
    feats = np.asarray([p["features"] for p in progs])
    z = (feats - feats.mean(0)) / feats.std(0)
    q = (np.asarray(query["features"]) - feats.mean(0)) / feats.std(0)
    near = np.argsort(((z - q) ** 2).sum(1))[:3]
    assert 4 in near
    want = np.mean([M.labels(progs[j]) for j in near], axis=0)
    assert M.labels(progs[4])[5] == pytest.approx(np.log(20.0)), "the failed candidate counts as 20x slower"
    np.testing.assert_allclose(pred, want, atol=1e-5)
    assert pred[0] == 0.0
    onnx = knn_onnx(model.mean, model.scale, model.points, model.labels, model.k, M.KIND_BITS, x.shape[1],
                    "test", "test")
    sess = onnxruntime.InferenceSession(onnx, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"features": x[::-1].astype(np.float32)})[0]
    np.testing.assert_allclose(got, pred[::-1], atol=1e-5)
    M.check_onnx(onnx, progs, model)


def test_a_nearest_programs_variant_needs_more_programs_than_its_k(monkeypatch, capsys):
    """Too few programs for ``knn-K`` (leave-one-out keeps K of them): the
    search skips it, and asking for it is a clear error, not an ONNX graph
    that fails at run time."""
    import argparse

    progs = [dict(p, family=f"f{i}", meta={"device": {"cpu": "test"}}) for i, p in enumerate(programs(4))]
    with pytest.raises(SystemExit, match="knn-5 needs more than 5 programs; the data has 4"):
        M.run(argparse.Namespace(variant="knn-5", nested=False, lopo=False, export=None), progs)
    tried = []
    monkeypatch.setattr(M, "lopo_top1", lambda ps, v: tried.append(v) or (0.0 if v == "knn-3" else 0.1))
    M.run(argparse.Namespace(variant=None, nested=False, lopo=False, export=None), progs)
    assert "knn-3" in tried and "knn-5" not in tried, tried
