"""Uncertainty features on hand-computed token distributions."""

import math

import pytest

from harness.generation.types import Generation, TokenLogprob, TopLogprob
from harness.generation.uncertainty import topk_entropy, uncertainty_features


def tok(chosen_p, *alt_ps, entropy=None):
    top = tuple(TopLogprob(f"t{i}", math.log(p)) for i, p in enumerate((chosen_p,) + alt_ps))
    return TokenLogprob("t0", math.log(chosen_p), top, entropy)


def test_entropy_of_a_full_distribution():
    # p = (1/2, 1/4, 1/4): H = 1/2 ln 2 + 2 * 1/4 ln 4 = 1.5 ln 2 = 1.0397208
    assert topk_entropy([math.log(0.5), math.log(0.25), math.log(0.25)]) == pytest.approx(1.5 * math.log(2))
    # a point mass has entropy 0
    assert topk_entropy([0.0]) == 0.0


def test_renormalised_over_top_k():
    # two alternatives with p = 0.3 each (mass 0.6): renormalised (0.5, 0.5) -> H = ln 2
    assert topk_entropy([math.log(0.3), math.log(0.3)]) == pytest.approx(math.log(2))


def test_features_by_hand():
    t1 = tok(0.5, 0.25, 0.25)  # H1 = 1.5 ln 2 = 1.0397208; top-1 p = 0.5; mass 1
    t2 = tok(0.9, 0.1)  # H2 = -(0.9 ln 0.9 + 0.1 ln 0.1) = 0.0948245 + 0.2302585 = 0.3250830
    f = uncertainty_features([t1, t2])
    h1 = 1.5 * math.log(2)
    h2 = -(0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    assert h2 == pytest.approx(0.3250830, abs=1e-7)
    assert f.mean_entropy == pytest.approx((h1 + h2) / 2)  # = 0.6824019
    assert f.max_entropy == pytest.approx(h1)
    assert f.min_confidence == pytest.approx(1 - 0.5)  # 1 - min(0.5, 0.9)
    assert f.answer_tokens == 2
    assert f.mean_top_mass == pytest.approx(1.0)
    assert f.mean_entropy_exact is None  # no exact entropies given


def test_top1_probability_is_not_renormalised():
    # top-2 of (0.3, 0.3, 0.4 spread over the tail): top-1 p = 0.3, so 1 - min = 0.7,
    # while the renormalised entropy is ln 2 and the mass seen is 0.6
    f = uncertainty_features([tok(0.3, 0.3)])
    assert f.min_confidence == pytest.approx(0.7)
    assert f.mean_entropy == pytest.approx(math.log(2))
    assert f.mean_top_mass == pytest.approx(0.6)


def test_exact_entropies_are_averaged_when_given():
    f = uncertainty_features([tok(0.5, 0.25, entropy=1.2), tok(0.9, 0.1, entropy=0.4)])
    assert f.mean_entropy_exact == pytest.approx(0.8)
    assert f.max_entropy_exact == pytest.approx(1.2)


def test_empty_answer_and_generation_input():
    f = uncertainty_features([])
    assert f.answer_tokens == 0 and math.isnan(f.mean_entropy) and math.isnan(f.min_confidence)
    g = Generation(text="x", tokens=(tok(0.9, 0.1),), prompt_tokens=3, output_tokens=2, ms=1.0)
    assert uncertainty_features(g).answer_tokens == 1
    d = uncertainty_features(g).to_dict(prefix="unc_")
    assert set(d) >= {"unc_mean_entropy", "unc_max_entropy", "unc_min_confidence", "unc_answer_tokens"}
