"""Policy-vs-policy comparison against brute-force replays of the same bootstrap draws."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness import stats
from harness.compare import compare_with_best, format_comparison
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


def test_intervals_and_p_values_replay_the_bootstrap_by_brute_force():
    docs, dec = _planted()
    n_boot, seed = 400, 3
    table = compare_with_best(dec, n_boot=n_boot, seed=seed).set_index("policy")
    assert table.loc["good", "verdict"] == "best"
    # replay: same document draws, a python loop over resamples
    uniq = sorted(set(docs.tolist()))
    draws = stats.bootstrap_draws(len(uniq), n_boot, seed)
    raw_p = {}
    for other in ("base", "close"):
        d = dec["good"]["utility"].to_numpy() - dec[other]["utility"].to_numpy()
        boot = []
        for b in range(n_boot):
            idx = np.concatenate([np.flatnonzero(docs == uniq[j]) for j in draws[b]])
            boot.append(d[idx].mean())
        boot = np.array(boot)
        lo, hi = np.percentile(boot, [2.5, 97.5])
        assert table.loc[other, "ci_low"] == pytest.approx(lo)
        assert table.loc[other, "ci_high"] == pytest.approx(hi)
        assert table.loc[other, "diff_vs_best"] == pytest.approx(d.mean())
        p = min(1.0, 2 * min(np.mean(boot <= 0), np.mean(boot >= 0)))
        assert table.loc[other, "p"] == pytest.approx(p)
        raw_p[other] = p
        assert table.loc[other, "mdd"] == pytest.approx(stats.min_detectable_difference(d, docs))
    # Holm over the two comparisons, by hand
    small, large = sorted(raw_p.values())
    adj_small = min(1.0, 2 * small)
    adj_large = max(adj_small, min(1.0, large))
    holm = sorted(table.loc[["base", "close"], "p_holm"])
    assert holm == pytest.approx([adj_small, adj_large])
    assert table.loc["base", "verdict"] == "worse than best"


def test_ties_never_decide_the_best():
    docs = np.array(["a", "a", "b", "c", "d", "e"])
    u1 = [1, 0, 1, 0, 1, 0]
    u2 = [0, 1, 1, 0, 0, 1]  # same mean, other questions
    table = compare_with_best({"zeta": _decisions(u2, docs), "alpha": _decisions(u1, docs)}).set_index("policy")
    assert table.loc["alpha", "verdict"] == "best (tied)"
    assert table.loc["zeta", "verdict"] == "tied with best"
    assert "best" != table.loc["alpha", "verdict"]


def test_oracle_is_compared_but_never_the_best():
    docs = np.array(["a", "b", "c", "d"])
    table = compare_with_best(
        {"oracle": _decisions([1, 1, 1, 1], docs), "ridge": _decisions([1, 0, 1, 0], docs)}
    ).set_index("policy")
    assert table.loc["ridge", "verdict"] == "best"
    assert table.loc["oracle", "verdict"].endswith("(upper bound, not deployable)")
    assert table.loc["oracle", "diff_vs_best"] == pytest.approx(-0.5)


def test_identical_decisions_and_small_samples_say_so():
    docs = np.array(["a", "b", "c", "d", "e"])
    dec = {
        "p1": _decisions([1, 0, 1, 1, 0.98], docs),
        "p2": _decisions([1, 0, 1, 1, 0.98], docs),
        "p3": _decisions([1, 0, 1, 0, 0.98], docs),
    }
    table = compare_with_best(dec).set_index("policy")
    assert table.loc["p2", "verdict"] == "tied with best"
    assert table.loc["p3", "verdict"] == "cannot be told from best"  # one question of five
    text = format_comparison(table.reset_index())
    assert "cannot be told from it" in text and "cannot be resolved" in text


def test_seeds_are_paired_and_stacked():
    docs = np.array(["a", "b", "c"])
    a = pd.concat([_decisions([1, 0, 1], docs, seed=[0] * 3), _decisions([0, 0, 1], docs, seed=[1] * 3)])
    b = pd.concat([_decisions([0, 0, 1], docs, seed=[1] * 3), _decisions([1, 0, 0], docs, seed=[0] * 3)])
    table = compare_with_best({"a": a, "b": b}).set_index("policy")
    # pairs: seed 0 -> (1,1),(0,0),(1,0); seed 1 -> equal: mean difference 1/6
    assert table.loc["b", "diff_vs_best"] == pytest.approx(1 / 6)
    assert table.loc["a", "n_questions"] == 6


def test_different_questions_are_refused():
    docs = np.array(["a", "b"])
    with pytest.raises(HarnessError, match="other held-out questions"):
        compare_with_best({"a": _decisions([1, 0], docs), "b": _decisions([1, 0], docs, qids=["x", "y"])})
    with pytest.raises(HarnessError, match="lack column"):
        compare_with_best({"a": pd.DataFrame({"qid": ["x"]})})
