"""Policy-vs-policy comparison: policy - reference everywhere, intervals that invert the test,
exact sign-flip p-values, Holm by hand, the reference chosen on development data, ties never
decisive, what the questions can resolve and how many would."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from harness import paired, stats
from harness.protocols.compare import compare_with_reference, format_comparison
from harness.errors import HarnessError


def _decisions(utility, docs, qids=None, **extra):
    n = len(utility)
    qids = qids if qids is not None else [f"q{i:03d}" for i in range(n)]
    return pd.DataFrame({"qid": qids, "doc_id": docs, "utility": np.asarray(utility, dtype=float), **extra})


def _planted(seed=0, n_docs=40):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 4, size=n_docs)
    docs = np.repeat([f"d{i:02d}" for i in range(n_docs)], sizes)
    n = len(docs)
    base = rng.integers(0, 2, size=n).astype(float)
    good = base.copy()
    good[rng.random(n) < 0.4] = 1.0  # clearly better
    close = base.copy()
    close[rng.random(n) < 0.03] = 1.0  # barely different from base
    return docs, {"good": _decisions(good, docs), "base": _decisions(base, docs), "close": _decisions(close, docs)}


def _brute_sign_flip(d, docs):
    uniq = sorted(set(docs.tolist()))
    totals = np.array([d[docs == u].sum() for u in uniq])
    totals = totals[totals != 0]
    obs = abs(totals.sum())
    if len(totals) > 16:
        return None
    hits = sum(abs(np.dot(s, totals)) >= obs - 1e-9 for s in itertools.product((-1, 1), repeat=len(totals)))
    return hits / 2 ** len(totals)


def test_intervals_invert_the_test_and_p_values_are_exact_sign_flips():
    docs, dec = _planted()
    seed = 3
    dev = {"good": 0.9, "base": 0.5, "close": 0.6}
    table = compare_with_reference(dec, dev_scores=dev, seed=seed)
    assert table.attrs["reference"] == "good" and table.attrs["reference_from"] == "development"
    table = table.set_index("policy")
    assert table.loc["good", "verdict"] == "reference"
    raw_p = {}
    for other in ("base", "close"):
        d = dec[other]["utility"].to_numpy() - dec["good"]["utility"].to_numpy()  # policy - reference
        # the interval inverts the test at the level of the policy's Holm step
        level = table.loc[other, "level"]
        assert 0 < level <= 0.05
        lo, hi = paired.sign_flip_interval(d, docs, alpha=level, seed=seed)
        assert table.loc[other, "ci_low"] == pytest.approx(lo)
        assert table.loc[other, "ci_high"] == pytest.approx(hi)
        assert (lo <= 0 <= hi) == (table.loc[other, "p_holm"] >= 0.05)  # it agrees with the Holm decision
        assert table.loc[other, "diff_vs_ref"] == pytest.approx(d.mean())
        assert table.loc[other, "max_diff"] == pytest.approx(paired.max_showable_difference(d, docs))
        assert table.loc[other, "mdd"] == pytest.approx(stats.min_detectable_difference(d, docs))
        brute = _brute_sign_flip(d, docs)
        if brute is not None:
            assert table.loc[other, "p"] == pytest.approx(brute)
        raw_p[other] = table.loc[other, "p"]
    small, large = sorted(raw_p.values())
    assert sorted(table.loc[["base", "close"], "p_holm"]) == pytest.approx([min(1, 2 * small), max(min(1, 2 * small), large)])
    assert table.loc["base", "verdict"] == "worse than reference"


def test_four_one_sided_questions_are_not_significant():
    """The bootstrap never crosses 0 here; the exact test says 2 * 0.5^4 = 0.125."""
    docs = np.array([f"d{i}" for i in range(200)])
    a = np.zeros(200)
    a[:4] = 1.0
    table = compare_with_reference({"a": _decisions(a, docs), "b": _decisions(np.zeros(200), docs)},
                                   dev_scores={"a": 1.0, "b": 0.0}).set_index("policy")
    assert table.loc["b", "p"] == pytest.approx(0.125)  # the exact test: 2 * 0.5^4
    assert table.loc["b", "ci_low"] <= 0 <= table.loc["b", "ci_high"]  # the interval agrees (no bootstrap 0 %)
    assert table.loc["b", "verdict"] == "cannot be told from reference"
    assert table.loc["b", "diff_vs_ref"] == pytest.approx(-4 / 200)
    assert table.loc["b", "max_diff"] == pytest.approx(4 / 200)  # all four discordant documents one way
    text = format_comparison(table.reset_index())
    assert "no difference is detectable with these questions (4 discordant documents reach p >= 0.125)" in text
    assert "exact sign-flip p on 4 discordant documents (4 discordant questions)" in text
    # the plan: 4 of 200 documents discordant, all one way
    plan = paired.sample_size_plan(a - 0, docs)
    ref = table.attrs["reference"]
    assert (f"about {int(plan['questions'])} questions ({int(plan['docs'])} documents) for 80% power at alpha 0.05 "
            f"(b vs {ref})") in text


def test_reference_comes_from_development_not_held_out():
    docs = np.array(list("abcdefgh"))
    held_best = _decisions([1, 1, 1, 1, 1, 1, 0, 0], docs)
    dev_best = _decisions([1, 1, 1, 1, 0, 0, 0, 0], docs)
    table = compare_with_reference({"held": held_best, "dev": dev_best}, dev_scores={"held": 0.1, "dev": 0.2})
    assert table.attrs["reference"] == "dev"
    assert table.set_index("policy").loc["held", "diff_vs_ref"] == pytest.approx(0.25)  # policy - reference
    # without development estimates: the held-out best, and the table says it is optimistic
    table = compare_with_reference({"held": held_best, "dev": dev_best})
    assert table.attrs["reference"] == "held" and table.attrs["reference_from"] == "held-out (optimistic)"
    assert "chosen on held-out (optimistic) data" in format_comparison(table)


def test_ties_never_decide_the_reference_silently():
    docs = np.array(["a", "a", "b", "c", "d", "e"])
    u1 = [1, 0, 1, 0, 1, 0]
    u2 = [0, 1, 1, 0, 0, 1]
    table = compare_with_reference({"zeta": _decisions(u2, docs), "alpha": _decisions(u1, docs)},
                                   dev_scores={"zeta": 0.5, "alpha": 0.5}).set_index("policy")
    assert table.loc["alpha", "verdict"] == "reference (tied on development with zeta)"
    assert table.loc["zeta", "verdict"] == "cannot be told from reference"


def test_oracle_is_compared_but_never_the_reference_nor_in_the_holm_family():
    docs = np.array(["a", "b", "c", "d"])
    table = compare_with_reference(
        {"oracle": _decisions([1, 1, 1, 1], docs), "ridge": _decisions([1, 0, 1, 0], docs),
         "keep": _decisions([1, 0, 0, 0], docs)},
        dev_scores={"oracle": 1.0, "ridge": 0.6, "keep": 0.5},
    ).set_index("policy")
    assert table.loc["ridge", "verdict"] == "reference"
    assert table.loc["oracle", "verdict"] == "upper bound, not deployable"
    assert np.isnan(table.loc["oracle", "p_holm"])
    assert table.loc["keep", "p_holm"] == pytest.approx(table.loc["keep", "p"])  # a family of one
    assert table.loc["oracle", "diff_vs_ref"] == pytest.approx(0.5)


def test_identical_decisions_and_small_samples_say_so():
    docs = np.array(["a", "b", "c", "d", "e"])
    dec = {
        "p1": _decisions([1, 0, 1, 1, 0.98], docs),
        "p2": _decisions([1, 0, 1, 1, 0.98], docs),
        "p3": _decisions([1, 0, 1, 0, 0.98], docs),
    }
    table = compare_with_reference(dec, dev_scores={"p1": 3, "p2": 2, "p3": 1}).set_index("policy")
    assert table.loc["p2", "verdict"] == "same decisions"
    assert table.loc["p3", "verdict"] == "cannot be told from reference"  # one question of five
    text = format_comparison(table.reset_index())
    assert "cannot be told from it" in text and "no difference is detectable with these questions" in text
    assert "no informative interval" in text  # five documents: no shift can be rejected


def test_seeds_are_paired_and_stacked():
    docs = np.array(["a", "b", "c"])
    a = pd.concat([_decisions([1, 0, 1], docs, seed=[0] * 3), _decisions([0, 0, 1], docs, seed=[1] * 3)])
    b = pd.concat([_decisions([0, 0, 1], docs, seed=[1] * 3), _decisions([1, 0, 0], docs, seed=[0] * 3)])
    table = compare_with_reference({"a": a, "b": b}, dev_scores={"a": 1, "b": 0}).set_index("policy")
    # pairs: seed 0 -> (1,1),(0,0),(1,0); seed 1 -> equal: mean difference 1/6
    assert table.loc["b", "diff_vs_ref"] == pytest.approx(-1 / 6)
    assert table.loc["a", "n_questions"] == 6


def test_different_questions_are_refused():
    docs = np.array(["a", "b"])
    with pytest.raises(HarnessError, match="other held-out questions"):
        compare_with_reference({"a": _decisions([1, 0], docs), "b": _decisions([1, 0], docs, qids=["x", "y"])})
    with pytest.raises(HarnessError, match="lack column"):
        compare_with_reference({"a": pd.DataFrame({"qid": ["x"]})})


def test_a_cost_alone_is_named_and_the_conclusion_line_plans():
    """A policy that pays the cost on questions where the outcome does not change: its
    difference is the cost alone, said in words; the sweep's line states that nothing is
    detectable for the others and how many questions would be needed."""
    from harness.protocols.compare import conclusion

    n = 60
    docs = np.array([f"d{i:02d}" for i in range(n)])
    hits = (np.arange(n) % 3 == 0).astype(float)
    paid = hits - 0.01 * (np.arange(n) < 20)  # extra called on 20 questions, no outcome changed
    close = hits.copy()
    close[:3] = 1.0  # three rescues (two new: questions 1 and 2)
    dec = {"keep": _decisions(hits, docs, chosen=hits), "paid": _decisions(paid, docs, chosen=hits),
           "close": _decisions(close, docs, chosen=close)}
    table = compare_with_reference(dec, dev_scores={"keep": 1.0, "paid": 0.5, "close": 0.0})
    rows = table.set_index("policy")
    assert rows.loc["paid", "discordant_questions"] == 0 and rows.loc["paid", "discordant_docs"] == 20
    assert rows.loc["paid", "verdict"] == "worse than reference"
    text = format_comparison(table)
    assert "paid: sampled sign-flip, 20000 patterns p on 20 discordant documents (0 discordant questions)" in text
    assert "the difference is the cost alone (0 discordant questions)" in text
    line = conclusion(table, "cost.c=0.01", 0.05)
    assert line.startswith("Policy vs policy at cost.c=0.01: 1 of 2 policies told from the reference")
    assert "no difference is detectable with these questions for any of the 1 others" in line
    plan = paired.sample_size_plan(close - hits, docs)
    assert (f"the closest (close vs keep) needs about {int(plan['questions']):,} held-out questions "
            f"({int(plan['docs']):,} documents)") in line
