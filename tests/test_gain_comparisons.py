"""Protocol C across policies: which policy's score predicts the gain better (seed 002 sections
5-6: Pearson r with the gain, Williams' two-tailed test for two dependent correlations,
Bonferroni), read back from the jobs' ``gain_decisions.parquet``; the sweep's end logs it on the
parent run. Also seed 002's Uncertainty predictor as a policy (the drop in max entropy) and the
synthetic table's RAG uncertainty columns, drawn after every existing value."""

from __future__ import annotations

import hashlib
import math
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from harness.errors import ConfigError
from harness.store_schema import TAG_POLICY
from harness.protocols.common import fmt
from harness.synthetic import synthetic_outcome_table
from harness.protocols.sweep_stage import SweepJob
from harness.protocols.sweep_gain import (
    GAIN_DECISIONS_ARTIFACT,
    format_gain_comparisons,
    gain_comparisons,
)


# ---- an independent Williams' test ------------------------------------------------------------
def williams_by_hand(x, y, gain) -> tuple[float, float]:
    """Williams (1959) as Steiger (1980) eq. 3 writes it, for r_jk = corr(gain, x), r_jh =
    corr(gain, y), r_kh = corr(x, y): t = (r_jk - r_jh) sqrt((n-1)(1+r_kh) / (2 (n-1)/(n-3) |R|
    + rbar^2 (1-r_kh)^3)), n - 3 degrees of freedom, two-sided p."""
    n = len(gain)
    r = np.corrcoef(np.vstack([gain, x, y]))
    r_jk, r_jh, r_kh = r[0, 1], r[0, 2], r[1, 2]
    det_r = np.linalg.det(r)  # |R| of the 3x3 correlation matrix
    rbar = (r_jk + r_jh) / 2
    t = (r_jk - r_jh) * math.sqrt((n - 1) * (1 + r_kh) / (2 * (n - 1) / (n - 3) * det_r + rbar**2 * (1 - r_kh) ** 3))
    return t, 2 * sps.t.sf(abs(t), n - 3)


# ---- fake job runs whose artifacts live in local folders (as a SQLite store's do) ---------------
def _run(tmp: Path, name: str, frame: pd.DataFrame | None, *, seed: int = 0, cost: str = "0.02",
         status: str = "FINISHED", run_name: str | None = None) -> SweepJob:
    run_id = f"{name}-{seed}-{cost}-{len(list(tmp.iterdir()))}"
    art = tmp / run_id / "artifacts"
    art.mkdir(parents=True)
    if frame is not None:
        frame.to_parquet(art / GAIN_DECISIONS_ARTIFACT, index=False)
    params = {"seed": str(seed), "cost.c": cost, "dataset.name": "synthetic", "arms.metric": "hit@10",
              "policy.name": name, "protocol.run": "[gain]"}
    return SweepJob(run_id=run_id, run_name=run_name or f"{name} c={cost}", status=status, params=params,
                    metrics={}, tags={TAG_POLICY: name},
                    open_artifact=lambda n: (art / n) if (art / n).is_file() else None)


N = 120


def _questions(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    qids = np.array([f"q{i:04d}" for i in range(N)])
    gain = rng.choice([-1.0, 0.0, 1.0], size=N, p=[0.15, 0.65, 0.2])
    return qids, gain, rng


def _frame(qids, score, gain) -> pd.DataFrame:
    return pd.DataFrame({"qid": qids, "doc_id": [f"d{i // 4}" for i in range(len(qids))], "score": score,
                         "gain": gain, "ran_extra": np.asarray(score) > 0})


@pytest.fixture
def cell(tmp_path):
    """One cell of four policies: strong, weak (a noisier copy of the gain), noise, constant."""
    qids, gain, rng = _questions()
    scores = {
        "strong": gain + 0.5 * rng.normal(size=N),
        "weak": gain + 3.0 * rng.normal(size=N),
        "noise": rng.normal(size=N),
        "always_keep": np.full(N, -1.0),
    }
    runs = [_run(tmp_path, name, _frame(qids, s, gain)) for name, s in scores.items()]
    return {"runs": runs, "scores": scores, "gain": gain, "qids": qids, "tmp": tmp_path}


def test_williams_t_p_and_bonferroni_match_an_independent_computation(cell):
    frame = gain_comparisons(cell["runs"])
    pairs = frame[frame["kind"] == "pair"]
    # the constant policy is not compared: 3 pairs of the 3 others
    assert {frozenset((r.policy_a, r.policy_b)) for r in pairs.itertuples()} == {
        frozenset(p) for p in combinations(("strong", "weak", "noise"), 2)}
    assert (pairs["n_pairs"] == 3).all() and (pairs["n"] == N).all()
    for r in pairs.itertuples():
        x, y, g = cell["scores"][r.policy_a], cell["scores"][r.policy_b], cell["gain"]
        t, p = williams_by_hand(x, y, g)
        assert r.t == pytest.approx(t, rel=1e-10, abs=1e-12)
        assert r.p == pytest.approx(p, rel=1e-9, abs=1e-15)
        assert r.r_a == pytest.approx(sps.pearsonr(x, g).statistic, abs=1e-12)
        assert r.r_b == pytest.approx(sps.pearsonr(y, g).statistic, abs=1e-12)
        assert r.r_ab == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
        assert r.p_adj == pytest.approx(min(1.0, 3 * p), rel=1e-9, abs=1e-15)  # Bonferroni by hand
        assert r.r_a >= r.r_b and r.t >= 0  # A is the higher correlation, so t > 0 reads "A better"
    # and one row per policy: its correlations with the gain, recomputed with scipy.stats
    pol = frame[frame["kind"] == "policy"].set_index("policy")
    assert list(pol.index) == sorted(cell["scores"])
    for name in ("strong", "weak", "noise"):
        s, g = cell["scores"][name], cell["gain"]
        assert pol.loc[name, "n"] == N
        assert pol.loc[name, "pearson"] == pytest.approx(sps.pearsonr(s, g).statistic, abs=1e-12)
        assert pol.loc[name, "spearman"] == pytest.approx(sps.spearmanr(s, g).statistic, abs=1e-12)
        assert pol.loc[name, "kendall"] == pytest.approx(sps.kendalltau(s, g).statistic, abs=1e-12)
    keep = pol.loc["always_keep"]
    assert math.isnan(keep["pearson"]) and "constant score" in keep["verdict"] and "not compared" in keep["verdict"]


def test_verdict_sentences_follow_the_adjusted_p(cell):
    frame = gain_comparisons(cell["runs"])
    pairs = frame[frame["kind"] == "pair"].set_index("policy")
    strong_noise = pairs.loc["strong vs noise"]
    assert strong_noise.p_adj < 0.05
    assert strong_noise.verdict == f"strong predicts the gain better than noise (Williams p_adj = {fmt(strong_noise.p_adj)})"
    for r in pairs.itertuples():
        if r.p_adj >= 0.05:
            assert r.verdict == f"cannot tell {r.policy_a} from {r.policy_b} apart (p_adj = {fmt(r.p_adj)})"
        else:
            assert "predicts the gain better than" in r.verdict
    # a stricter alpha turns every verdict into "cannot tell"; p_adj >= alpha is not significant
    strict = gain_comparisons(cell["runs"], alpha=1e-300)
    assert strict.loc[strict["kind"] == "pair", "verdict"].str.startswith("cannot tell").all()
    p_adj = float(pairs.loc["strong vs noise", "p_adj"])
    at = gain_comparisons(cell["runs"], alpha=p_adj)
    row = at[at["policy"] == "strong vs noise"].iloc[0]
    assert row.verdict == f"cannot tell strong from noise apart (p_adj = {fmt(p_adj)})"
    text = format_gain_comparisons(frame)
    assert "Bonferroni over 3 pair(s)" in text and "strong vs noise: strong predicts the gain better than noise" in text
    assert "always_keep: not compared: constant score" in text


def test_an_affine_copy_cannot_be_told_apart(cell):
    """r(A, B) = 1: Williams' t is 0 (or undefined); never a verdict of "better"."""
    qids, gain, strong = cell["qids"], cell["gain"], cell["scores"]["strong"]
    copy = _run(cell["tmp"], "copy", _frame(qids, 3 * strong - 0.2, gain))
    frame = gain_comparisons([cell["runs"][0], copy])
    pair = frame[frame["kind"] == "pair"].iloc[0]
    assert pair.n_pairs == 1 and pair.verdict.startswith("cannot tell")


def test_refuses_pairs_whose_test_questions_differ(cell):
    qids, gain = cell["qids"], cell["gain"]
    other = _run(cell["tmp"], "other", _frame(qids[:-5], cell["scores"]["strong"][:-5] + 0.1, gain[:-5]))
    frame = gain_comparisons([*cell["runs"], other])
    pairs = frame[frame["kind"] == "pair"]
    refused = pairs[(pairs["policy_a"] == "other") | (pairs["policy_b"] == "other")]
    assert len(refused) == 3
    assert refused["verdict"].str.startswith("not compared: the test questions differ").all()
    assert refused["t"].isna().all() and refused["p_adj"].isna().all()
    assert "5 only in" in refused["verdict"].iat[0]
    # Bonferroni counts the pairs actually tested, not the refused ones
    assert (pairs.loc[pairs["t"].notna(), "n_pairs"] == 3).all()
    # the same questions with another gain: refused too
    shifted = _run(cell["tmp"], "shifted", _frame(qids, cell["scores"]["noise"], np.roll(gain, 1)))
    frame = gain_comparisons([cell["runs"][0], shifted])
    assert frame.loc[frame["kind"] == "pair", "verdict"].str.startswith("not compared: the gain differs").all()


def test_cells_split_by_seed_and_one_policy_kept_across_costs(tmp_path):
    qids, gain, rng = _questions()
    a, b = gain + rng.normal(size=N), rng.normal(size=N)
    runs = [
        _run(tmp_path, "a", _frame(qids, a, gain), cost="0.0"),
        _run(tmp_path, "a", _frame(qids, a, gain), cost="0.02"),  # protocol C reads no cost: the same scores
        _run(tmp_path, "b", _frame(qids, b, gain), cost="0.0"),
        _run(tmp_path, "b", _frame(qids, b, gain), cost="0.02"),
        _run(tmp_path, "a", _frame(qids, b, gain), seed=1),  # another seed: another split, another cell
        _run(tmp_path, "b", _frame(qids, a, gain), seed=1),
        _run(tmp_path, "c", _frame(qids, a, gain), status="FAILED"),
    ]
    frame = gain_comparisons(runs)
    assert sorted(set(frame["cell"])) == ["seed=0", "seed=1"]
    for cell, part in frame.groupby("cell"):
        assert sorted(part.loc[part["kind"] == "policy", "policy"]) == ["a", "b"]
        assert len(part[part["kind"] == "pair"]) == 1
    # no run holds the artifact: nothing (the sweep then logs and prints nothing)
    assert gain_comparisons([_run(tmp_path, "a", None)]).empty
    assert gain_comparisons([]).empty


# ---- seed 002's Uncertainty predictor as a policy ----------------------------------------------
def test_unc_drop_policy_scores_the_drop_and_keeps_the_contract(planted_table):
    from policies import FeatureDifferencePolicy, check_policy
    from policies.registry import builtin_policy_configs, make_policy

    policy = make_policy(builtin_policy_configs()["unc_drop_rag_bm25"])
    assert isinstance(policy, FeatureDifferencePolicy) and policy.name == "unc_drop_rag_bm25"
    assert policy.features == ("unc_max_entropy", "rag_bm25_unc_max_entropy")
    assert not policy.estimates_gain and policy.fixed_route is None
    check_policy(policy, missing_values=True)
    X = planted_table[["feat.unc_max_entropy", "feat.rag_bm25_unc_max_entropy"]]
    X.columns = list(policy.features)
    from policies.base import ScoreContext

    got = policy.score(X, ScoreContext(qids=planted_table["qid"].to_numpy()))
    np.testing.assert_array_equal(got, X["unc_max_entropy"].to_numpy() - X["rag_bm25_unc_max_entropy"].to_numpy())
    with pytest.raises(ConfigError, match=r"policy\.b"):
        FeatureDifferencePolicy("unc_max_entropy", "unc_max_entropy")
    with pytest.raises(ConfigError, match=r"policy\.a"):
        FeatureDifferencePolicy("", "unc_max_entropy")


# ---- the synthetic table: new columns drawn last, every existing value bit-identical -------------
def _digest(frame: pd.DataFrame) -> str:
    h = hashlib.sha256()
    for col in frame.columns:
        h.update(col.encode() + b"\x00" + str(frame[col].dtype).encode() + b"\x00")
        values = frame[col].to_numpy()
        if values.dtype == object:
            h.update("\x00".join(map(str, values)).encode())
        else:
            h.update(np.ascontiguousarray(values).tobytes())
    return h.hexdigest()[:16]


# digests of the whole table computed BEFORE the RAG uncertainty columns were added
SYNTHETIC_BEFORE = [
    ({}, "9ccfb0386ea6ca61"),
    ({"n_docs": 40, "questions_per_doc": 5, "seed": 0}, "ff5ac9be8a6416cb"),  # check_policy's table
    ({"n_docs": 30, "questions_per_doc": 4, "seed": 0}, "7618ba802f70c6e8"),  # the sweep tests' table
    ({"seed": 3, "signal": 1.0, "arms": ("no_retrieval", "rag_bm25")}, "7886574c253f1e1b"),
]


@pytest.mark.parametrize("kwargs, before", SYNTHETIC_BEFORE)
def test_synthetic_rag_uncertainty_is_appended_without_changing_a_value(kwargs, before):
    table = synthetic_outcome_table(**kwargs)
    state = [c for c in table.columns if c.startswith(("feat.probe_", "feat.qemb_"))]  # appended after them
    assert len(state) == 3 * 8 and list(table.columns[-len(state):]) == state
    table = table.drop(columns=state)
    new = [f"feat.{arm}_unc_{f}" for arm in ("rag_keep", "rag_hybrid", "rag_bm25")
           for f in ("mean_entropy", "max_entropy", "min_confidence", "answer_tokens")]
    assert list(table.columns[-len(new):]) == new  # appended last, in draw order
    assert _digest(table.drop(columns=new)) == before
    assert np.isfinite(table[new].to_numpy()).all()


# ---- end to end: a synthetic sweep logs and prints the gain comparison -------------------------
POLICIES = ("always_keep", "ridge", "signal_dense_top1", "random", "oracle")


@pytest.mark.slow
def test_sweep_logs_gain_comparison_on_the_parent_run(tmp_path):
    from tests.helpers.sweeps import SMALL, run_cli, runs_by_role, store_uri

    proc = run_cli(["-m", *SMALL, "protocol=gain", f"policy={','.join(POLICIES)}", "cost.c=0,0.02"], tmp_path, tmp_path / "cache")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    client, parents, jobs = runs_by_role(store_uri(tmp_path))
    assert len(parents) == 1 and len(jobs) == 2 * len(POLICIES)
    parent = parents[0].info.run_id
    arts = {a.path for a in client.list_artifacts(parent)}
    assert {"gain_comparison.csv", "gain_comparison.txt"} <= arts
    table = pd.read_csv(client.download_artifacts(parent, "gain_comparison.csv", str(tmp_path / "dl")))
    # cost.c does not enter protocol C: one cell, each policy once
    assert table["cell"].isna().all() and (table["seed"] == 0).all()
    pol = table[table["kind"] == "policy"].set_index("policy")
    assert sorted(pol.index) == sorted(POLICIES)
    pairs = table[table["kind"] == "pair"]
    # the references (oracle: its score is the gain; random) are listed, never in Williams' family
    assert {frozenset((r.policy_a, r.policy_b)) for r in pairs.itertuples()} == {
        frozenset(p) for p in combinations(("ridge", "signal_dense_top1"), 2)}
    assert (pairs["n_pairs"] == 1).all()
    assert np.allclose(pairs["p_adj"], np.minimum(1.0, 1 * pairs["p"]), rtol=1e-12, atol=0)
    for ref in ("oracle", "random"):
        assert pol.loc[ref, "verdict"].startswith("a reference, not compared")
    assert "constant score" in pol.loc["always_keep", "verdict"]
    # every correlation recomputed from the artifact equals each job's own logged metric
    for job in jobs:
        name, m = job.data.tags[TAG_POLICY], job.data.metrics
        for key in ("pearson", "spearman", "kendall", "pearson_p", "spearman_p", "kendall_p"):
            want, got = m[f"gain/{key}"], pol.loc[name, key]
            assert (math.isnan(want) and math.isnan(got)) or abs(want - got) <= 1e-12, (name, key, want, got)
        assert pol.loc[name, "n"] == m["n/test"]
    # printed at the end, after the policy-vs-policy text
    out = proc.stdout
    assert "Gain prediction (protocol C) at this sweep" in out
    # each protocol of the sweep shows its own sweep stage: protocol A did not run, so no policy comparison
    assert "Policies vs the reference" not in out
    assert out.index("Gain prediction (protocol C)") < out.index("Parent run: ")
    text = client.download_artifacts(parent, "gain_comparison.txt", str(tmp_path / "dl2"))
    assert "Bonferroni over 1 pair(s)" in Path(text).read_text(encoding="utf-8")
