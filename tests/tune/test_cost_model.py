"""Cost models on synthetic records: a hidden cost function of the analytical metrics of ResNet-18 conv workloads
and random direct-conv configs. Learned models rank held-out records far better than random; transfer from a
correlated device beats learning from the few records of the new one; models round-trip through save/load."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adreno.schedules._conv import ConvWorkload
from adreno.schedules.conv2d_direct import KNOBS
from adreno.costmodel import features as feats
from adreno.costmodel import (
    AnalyticalModel,
    CostModel,
    LearnedModel,
    RandomModel,
    TransferModel,
    make_model,
    ranking_quality,
)
from adreno.costmodel.base import SavedModelError, speed_targets
from adreno.costmodel.learned import relevance

LIMITS = {"compute_units": 4, "max_threads": 256, "local_memory_bytes": 32768}


def conv(c, hw, o, k, s):
    p = k // 2
    oh = (hw + 2 * p - k) // s + 1
    return ConvWorkload(1, c, hw, hw, o, k, k, oh, oh, (s, s), (1, 1), (p, p, p, p), 1, "float32")


RESNET18 = [conv(3, 224, 64, 7, 2), conv(64, 56, 64, 3, 1), conv(64, 56, 128, 3, 2), conv(64, 56, 128, 1, 2),
            conv(128, 28, 128, 3, 1), conv(128, 28, 256, 3, 2), conv(128, 28, 256, 1, 2), conv(256, 14, 256, 3, 1),
            conv(256, 14, 512, 3, 2), conv(256, 14, 512, 1, 2), conv(512, 7, 512, 3, 1)]

# Two "devices": exponents of the metrics in their time, register budgets before spilling, and a preference for
# staging on 3x3 kernels. B is correlated with A, not equal to it.
DEVICE_A = {"w": {"parallelism": 1.0, "occupancy": 0.4, "memory_efficiency": 0.6, "register_reuse": 0.7,
                  "local_reuse": 0.2, "bank_conflict": 0.3, "branch_efficiency": 1.0, "local_fit": 1.0},
            "registers": 64, "stage_gain": 0.2}
DEVICE_B = {"w": {"parallelism": 0.8, "occupancy": 0.7, "memory_efficiency": 0.9, "register_reuse": 0.4,
                  "local_reuse": 0.4, "bank_conflict": 0.1, "branch_efficiency": 1.0, "local_fit": 1.0},
            "registers": 96, "stage_gain": -0.1}


def random_config(rng) -> dict:
    """A random unsplit direct-conv config (the space these statistical checks were calibrated on: split-K's
    `threads_k` came later)."""
    while True:
        cfg = {k: v[int(rng.integers(len(v)))] for k, v in KNOBS.items() if k != "threads_k"}
        if cfg["threads_f"] * cfg["threads_y"] * cfg["threads_x"] <= 256:
            return cfg


def hidden_seconds(wl, cfg, device, rng, noise=0.15) -> float:
    """Log-linear in the metrics, plus a register-spill cliff, a knob interaction and log-normal noise."""
    m = feats.conv_metrics(wl, cfg, LIMITS)
    log_t = math.log(wl.flops) - 20 - sum(w * math.log(m[k]) for k, w in device["w"].items())
    log_t += 1.5 * max(0.0, math.log(m["registers"] / device["registers"]))
    log_t -= device["stage_gain"] * cfg["stage"] * (wl.kh > 1)
    return math.exp(log_t + noise * rng.normal())


def make_records(device, per_task, seed):
    rng = np.random.default_rng(seed)
    xs, seconds, groups = [], [], []
    for task, wl in enumerate(RESNET18):
        cfgs = [random_config(rng) for _ in range(per_task)]
        xs.append(feats.featurize(wl, cfgs, LIMITS))
        seconds += [hidden_seconds(wl, c, device, rng) for c in cfgs]
        groups += [wl.key("conv2d_direct")] * per_task
    return np.vstack(xs), np.array(seconds), np.array(groups, dtype=object)


@pytest.fixture(scope="module")
def device_a():
    return make_records(DEVICE_A, 60, seed=0)


@pytest.fixture(scope="module")
def device_b():
    return make_records(DEVICE_B, 60, seed=5)


def split(n, frac, seed):
    idx = np.random.default_rng(seed).permutation(n)
    cut = int(frac * n)
    return idx[:cut], idx[cut:]


def quality(model, x, s, g):
    return ranking_quality(model.predict(x), s, g)


# ------------------------------------------------------------------------------------------- ranking_quality


def test_ranking_quality_extremes_and_failures():
    seconds = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 2.0, 3.0])
    groups = np.array(["a"] * 6 + ["b"] * 3)
    perfect = ranking_quality(-np.log(seconds), seconds, groups)
    assert perfect["pearson"] == pytest.approx(1.0) and perfect["spearman"] == pytest.approx(1.0)
    assert perfect["top1"] == 1.0 and perfect["top5"] == 1.0 and perfect["groups"] == 2
    reverse = ranking_quality(np.log(seconds), seconds, groups)
    assert reverse["spearman"] == pytest.approx(-1.0) and reverse["top1"] == 0.0
    # a failed candidate counts as the slowest: scoring it lowest is still perfect
    failed = np.array([1.0, 2.0, np.inf, float("nan")])
    assert ranking_quality([4.0, 3.0, 2.0, 1.0], failed)["spearman"] > 0.9
    assert ranking_quality([1.0, 2.0, 3.0, 4.0], failed)["spearman"] < -0.5


def test_relevance_labels_follow_speed_within_tasks():
    s = np.array([3.0, 1.0, 2.0, np.inf, 10.0, 20.0])
    codes = np.array([0, 0, 0, 0, 1, 1])
    rel = relevance(s, codes)
    assert rel[1] > rel[2] > rel[0] and rel[3] == 0  # fastest highest, failed lowest
    assert rel[4] > rel[5]                          # task 1 ranked on its own


# ------------------------------------------------------------------------------------------ ranking quality


def test_learned_and_analytical_rank_held_out_records_far_better_than_random(device_a):
    x, s, g = device_a
    train, test = split(len(s), 0.7, seed=1)
    results = {}
    for name in ("random", "analytical", "learned", "learned-regression"):
        model = make_model(name)
        model.update(x[train], s[train], g[train])
        results[name] = quality(model, x[test], s[test], g[test])
    rand, learned, analytical = results["random"], results["learned"], results["analytical"]
    assert abs(rand["spearman"]) < 0.2 and abs(rand["pearson"]) < 0.2
    for q in (learned, analytical, results["learned-regression"]):
        assert q["spearman"] > 0.7 and q["pearson"] > 0.6
        assert q["spearman"] > rand["spearman"] + 0.5
        assert q["top5"] > rand["top5"]
    assert learned["top1"] > rand["top1"]


def test_regression_labels_are_standardised_speed_within_tasks():
    s = np.array([1.0, 2.0, 4.0, np.inf, 3.0, 3.0])
    codes = np.array([0, 0, 0, 0, 1, 1])
    y = speed_targets(s, codes)
    assert y[0] > y[1] > y[2] > y[3]  # faster is higher; a failure lies below the slowest success
    assert abs(y[:4].mean()) < 1e-12 and abs(y[:4].std() - 1) < 1e-12
    assert (y[4:] == 0).all()  # a task whose times are all equal teaches nothing


def test_analytical_fit_beats_its_prior_when_the_prior_is_wrong():
    """A device where register pressure is what matters (the prior gives it little weight): fitting fixes it."""
    rng = np.random.default_rng(3)
    xs, s, g = [], [], []
    for task, wl in enumerate(RESNET18[:6]):
        cfgs = [random_config(rng) for _ in range(50)]
        xs.append(feats.featurize(wl, cfgs, LIMITS))
        s += [math.exp(2.0 * math.log(feats.conv_metrics(wl, c, LIMITS)["registers"]) + 0.1 * rng.normal())
              for c in cfgs]
        g += [task] * 50
    x, s, g = np.vstack(xs), np.array(s), np.array(g)
    train, test = split(len(s), 0.7, seed=2)
    prior = AnalyticalModel()
    fitted = AnalyticalModel()
    fitted.update(x[train], s[train], g[train])
    assert quality(fitted, x[test], s[test], g[test])["spearman"] > 0.9
    assert quality(fitted, x[test], s[test], g[test])["spearman"] > quality(prior, x[test], s[test], g[test])[
        "spearman"] + 0.3
    assert fitted.weights[feats.METRIC_NAMES.index("registers")] > 1.5


def test_learned_model_uses_the_analytical_ranking_until_it_has_records(device_a):
    x, s, g = device_a
    model = LearnedModel(min_records=8)
    analytical = AnalyticalModel()
    np.testing.assert_array_equal(model.predict(x[:20]), analytical.predict(x[:20]))
    model.update(x[:5], s[:5], g[:5])  # 5 records: below min_records
    assert model.booster is None
    analytical.update(x[:5], s[:5], g[:5])
    np.testing.assert_allclose(model.predict(x[:20]), analytical.predict(x[:20]))
    model.update(x[5:40], s[5:40], g[5:40])
    assert model.booster is not None
    assert not np.allclose(model.predict(x[:20]), analytical.predict(x[:20]))


def test_anchored_model_corrects_the_analytical_ranking_instead_of_jumping_away_from_it(device_a):
    """The first boosters, trained on a few records of many tasks, rank worse than the analytical model they replace;
    anchored on it (make_model("learned")) the ranking stays close to it early and passes it with more records."""
    x, s, g = device_a
    assert make_model("learned").anchored and not make_model("learned-regression").anchored
    spearman = {}
    for n in (20, 100):
        idx = np.random.default_rng(n).permutation(len(s))
        train, test = idx[:n], idx[n:]
        for name, model in (("plain", LearnedModel()), ("anchored", LearnedModel(anchored=True)),
                            ("analytical", AnalyticalModel())):
            model.update(x[train], s[train], g[train])
            spearman[name, n] = quality(model, x[test], s[test], g[test])["spearman"]
            if name == "anchored":  # the trees' scores on top of the fitted analytical model's
                np.testing.assert_allclose(model.predict(x[test]), model.booster.predict(x[test])
                                           + model.fallback.predict(x[test]))
    assert spearman["anchored", 20] > spearman["plain", 20] + 0.15
    assert spearman["anchored", 20] > spearman["analytical", 20] - 0.1
    assert spearman["anchored", 100] > spearman["analytical", 100] > spearman["plain", 100]


@pytest.mark.parametrize("spec", ["learned", "learned-regression"])
def test_failed_records_are_ranked_worst(spec):
    """Candidates with a high `tile_f` fail; the learned model learns to score them below the rest."""
    rng = np.random.default_rng(4)
    wl = RESNET18[4]
    cfgs = [random_config(rng) for _ in range(120)]
    x = feats.featurize(wl, cfgs, LIMITS)
    s = np.array([np.inf if c["tile_f"] >= 8 else hidden_seconds(wl, c, DEVICE_A, rng) for c in cfgs])
    model = make_model(spec)
    model.update(x[:80], s[:80], np.zeros(80))
    scores = model.predict(x[80:])
    failed = ~np.isfinite(s[80:])
    assert failed.any() and (~failed).any()
    assert scores[failed].mean() < scores[~failed].mean()


# ---------------------------------------------------------------------------------------------------- transfer


def test_transfer_from_a_correlated_device_beats_learning_from_few_records(device_a, device_b):
    xa, sa, ga = device_a
    xb, sb, gb = device_b
    rng = np.random.default_rng(2)
    transfer_q, learned_q = [], []
    for _ in range(3):
        few = np.concatenate([rng.choice(np.flatnonzero(gb == task), 4, replace=False) for task in np.unique(gb)])
        rest = np.setdiff1d(np.arange(len(sb)), few)
        transfer = TransferModel.from_records(xa, sa, ga)
        before = quality(transfer, xb[rest], sb[rest], gb[rest])["spearman"]  # source only: already informed
        transfer.update(xb[few], sb[few], gb[few])
        learned = LearnedModel(min_records=8)
        learned.update(xb[few], sb[few], gb[few])
        assert learned.booster is not None  # 44 records: it really is the B-only booster being compared
        transfer_q.append(quality(transfer, xb[rest], sb[rest], gb[rest])["spearman"])
        learned_q.append(quality(learned, xb[rest], sb[rest], gb[rest])["spearman"])
        assert before > 0.6
    assert np.mean(transfer_q) > np.mean(learned_q) + 0.05  # measured: ~0.89 vs ~0.76
    assert min(transfer_q) > 0.75


def test_transfer_sources_and_mismatches(device_a, tmp_path):
    xa, sa, ga = device_a
    learned = LearnedModel()
    learned.update(xa, sa, ga)
    learned.save(tmp_path / "a.json")
    # a saved LearnedModel becomes the source of a fresh TransferModel (through load and make_model)
    for model in (TransferModel.load(tmp_path / "a.json"), make_model(f"transfer:{tmp_path / 'a.json'}")):
        assert isinstance(model, TransferModel) and model.booster is None and len(model.records) == 0
        np.testing.assert_allclose(model.predict(xa[:30]), learned.predict(xa[:30]))
    with pytest.raises(ValueError, match="columns"):
        TransferModel.from_model(learned).update(xa[:5, :10], sa[:5])
    with pytest.raises(ValueError, match="no trained booster"):
        TransferModel.from_model(LearnedModel())
    regression = make_model("learned-regression")
    regression.update(xa, sa, ga)
    transfer = TransferModel.from_model(regression)  # keeps boosting with the source's objective
    assert transfer.params["objective"] == "regression"
    transfer.update(xa[:40], sa[:40], ga[:40])
    assert transfer.booster is not None


# ------------------------------------------------------------------------------------------ save / load / make


def test_save_load_round_trips_give_identical_predictions(device_a, device_b, tmp_path):
    xa, sa, ga = device_a
    xb, sb, gb = device_b
    learned_fallback = LearnedModel()
    learned_fallback.update(xa[:4], sa[:4], ga[:4])  # still on its analytical fallback
    models = [RandomModel(seed=5), AnalyticalModel(), learned_fallback]
    fitted = AnalyticalModel()
    fitted.update(xa, np.where(np.arange(len(sa)) % 7 == 0, np.inf, sa), ga)  # with failed records
    learned = LearnedModel()
    learned.update(xa, sa, ga)
    transfer = TransferModel.from_records(xa, sa, ga)
    transfer_trained = TransferModel.from_model(learned)
    transfer_trained.update(xb[:40], sb[:40], gb[:40])
    regression = make_model("learned-regression")
    regression.update(xa, sa, ga)
    anchored = make_model("learned")
    anchored.update(xa, sa, ga)
    models += [fitted, learned, transfer, transfer_trained, regression, anchored]
    for i, model in enumerate(models):
        path = tmp_path / f"m{i}.json"
        model.save(path)
        loaded = CostModel.load(path)
        assert type(loaded) is type(model)
        np.testing.assert_array_equal(loaded.predict(xb), model.predict(xb))
        assert type(model).load(path).predict(xb[:3]).shape == (3,)
    # a loaded model keeps its records: updating it equals updating the original
    loaded = CostModel.load(tmp_path / "m4.json")
    learned.update(xb[:30], sb[:30], gb[:30])
    loaded.update(xb[:30], sb[:30], gb[:30])
    np.testing.assert_array_equal(loaded.predict(xb), learned.predict(xb))
    with pytest.raises(SavedModelError, match="holds a LearnedModel, not a AnalyticalModel"):
        AnalyticalModel.load(tmp_path / "m4.json")


@pytest.mark.parametrize("text", [b"\x08\x8e\x01binary onnx", b"", b"not json", b'{"a": 1}', b"[1, 2]", b"null",
                                  b'{"class": "RandomModel", "state": {}}', b'{"class": "LearnedModel", "state": "x"}',
                                  b'{"class": "LearnedModel"}', b'{"class": "LearnedModel", "state": {"params": 1}}',
                                  b'{"class": "Nonesuch", "state": {}}'])
def test_a_malformed_saved_model_is_one_line(text, tmp_path, capsys):
    """Whatever file --model transfer:FILE names, a malformed one is one line naming it, exit status 2."""
    from adreno.cli.main import main

    path = tmp_path / "model.json"
    path.write_bytes(text)
    with pytest.raises(SavedModelError, match=str(path)):
        CostModel.load(path)
    assert main(["tune", "tiny", "--model", f"transfer:{path}", "--records", str(tmp_path / "r.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}") and len(err.splitlines()) == 1, err


def test_random_model_is_seeded_and_uninformative(device_a):
    x, s, g = device_a
    a, b, c = RandomModel(1).predict(x), RandomModel(1).predict(x), RandomModel(2).predict(x)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert ((a >= 0) & (a < 1)).all() and len(np.unique(a)) == len(np.unique(x, axis=0))


def test_make_model_specs():
    assert isinstance(make_model("random"), RandomModel)
    assert isinstance(make_model("analytical"), AnalyticalModel)
    assert type(make_model("learned")) is LearnedModel
    assert make_model("learned").params["objective"] == "lambdarank"
    assert make_model("learned-regression").params["objective"] == "regression"
    from adreno.errors import AdrenoError

    with pytest.raises(AdrenoError, match="random.*analytical.*learned.*transfer"):  # a user's --model: one line
        make_model("xgboost")
    with pytest.raises(AdrenoError, match="no such file"):
        make_model("transfer:/nonexistent")


def test_empty_batches_are_harmless(device_a):
    x, s, g = device_a
    for model in (RandomModel(), AnalyticalModel(), LearnedModel(), TransferModel.from_records(x, s, g)):
        model.update(np.zeros((0, x.shape[1])), np.zeros(0), [])
        model.update([], [], None)
        assert model.predict(np.zeros((0, x.shape[1]))).shape == (0,)
        assert model.predict(x[:3]).shape == (3,)


def test_resending_all_records_each_round_equals_sending_each_once(device_a):
    """The tuner may pass every record so far at each update: exact repeats are ignored, so the model is the one
    trained on each record once; fit() trains on exactly the records given."""
    x, s, g = device_a
    s = np.where(np.arange(len(s)) % 9 == 0, np.inf, s)
    cuts = [0, 40, 120, 250]
    for make in (AnalyticalModel, LearnedModel):
        once, again = make(), make()
        for a, b in zip(cuts, cuts[1:]):
            once.update(x[a:b], s[a:b], g[a:b])
            again.update(x[:b], s[:b], g[:b])
        assert len(again.records) == len(once.records) == 250
        np.testing.assert_array_equal(again.predict(x), once.predict(x))
        refit = make()
        refit.update(x[250:400], s[250:400], g[250:400])
        refit.fit(x[:250], s[:250], g[:250])
        assert len(refit.records) == 250
        np.testing.assert_allclose(refit.predict(x), once.predict(x))


def test_large_tasks_are_split_into_queries(device_a, monkeypatch):
    """LightGBM refuses lambdarank queries over 10,000 rows: large tasks are cut into queries of MAX_QUERY rows."""
    from adreno.costmodel import learned as cost_model

    monkeypatch.setattr(cost_model, "MAX_QUERY", 50)
    x, s, g = device_a
    model = LearnedModel()
    model.update(x, s, g)  # 11 tasks of 60 rows -> 22 queries of 30
    _, labels, sizes, _, _ = model._dataset()
    assert sizes.max() <= 50 and sizes.sum() == len(s) and len(sizes) == 22
    train, test = split(len(s), 0.7, seed=1)
    model = LearnedModel()
    model.update(x[train], s[train], g[train])
    assert quality(model, x[test], s[test], g[test])["spearman"] > 0.7
