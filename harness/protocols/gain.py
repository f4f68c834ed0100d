"""Protocol C (SPEC 7): how well a score predicts the gain of the extra arm.

Why: a router is useful when its score orders questions by gain; correlations measure that
directly, and "selective use" (extra when score > threshold) turns it into answer quality.

Choices where the SPEC is silent:
- Split: ``stats.stratified_grouped_halves(groups, delta_class, seed)``; the policy is fitted
  on the first half (trainable policies only) and everything is reported on the second (test).
- Correlations are with ``task.gain`` (delta for hits, the log ratio for continuous quality);
  they are nan for a constant score (e.g. always-keep), see ``stats.pearson``.
- Decision accuracy: running extra is correct when extra >= base, keeping base is correct when
  base >= extra (so ties count as correct both ways, as SPEC 7 says).
- Gap closed = (Q(policy) - Q(always-extra)) / (Q(oracle) - Q(always-extra)), Q(oracle) =
  mean of max(base, extra); nan when the denominator is 0 (extra is already optimal on every
  question, so there is no gap to close).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.errors import HarnessError
from harness.protocols.common import PolicyFactory, fit_policy, fmt, policy_label, score_task, text_table
from harness.stats import kendall, pearson, spearman, stratified_grouped_halves, williams_test
from harness.task import RoutingTask


def selective_metrics(scores, base, extra, threshold: float = 0.0) -> dict[str, float]:
    """Mean quality, decision accuracy, gap closed of "run extra when score > threshold"."""
    scores = np.asarray(scores, dtype=float)
    base = np.asarray(base, dtype=float)
    extra = np.asarray(extra, dtype=float)
    ran = scores > threshold
    chosen = np.where(ran, extra, base)
    correct = np.where(ran, extra >= base, base >= extra)
    q_pol, q_extra = float(chosen.mean()), float(extra.mean())
    q_oracle = float(np.maximum(base, extra).mean())
    denom = q_oracle - q_extra
    return {
        "quality": q_pol,
        "decision_accuracy": float(correct.mean()),
        "gap_closed": (q_pol - q_extra) / denom if denom != 0 else math.nan,
        "extra_share": float(ran.mean()),
        "base_quality": float(base.mean()),
        "extra_quality": q_extra,
        "oracle_quality": q_oracle,
    }


def compare_policies_williams(scores_a, scores_b, gain) -> dict[str, float]:
    """Williams' test: is corr(score_a, gain) different from corr(score_b, gain) on the same
    questions? Uses Pearson correlations; t > 0 means policy A predicts the gain better."""
    scores_a = np.asarray(scores_a, dtype=float)
    scores_b = np.asarray(scores_b, dtype=float)
    gain = np.asarray(gain, dtype=float)
    if not (len(scores_a) == len(scores_b) == len(gain)):
        raise HarnessError("compare_policies_williams: scores and gain must cover the same questions")
    r_a, _ = pearson(scores_a, gain)
    r_b, _ = pearson(scores_b, gain)
    r_ab, _ = pearson(scores_a, scores_b)
    t, p = williams_test(r_a, r_b, r_ab, len(gain))
    return {"r_a": r_a, "r_b": r_b, "r_ab": r_ab, "t": t, "p": p, "n": len(gain)}


@dataclass
class GainResult:
    """metrics (stable names) and ``tables`` (``decisions``: per test question)."""

    metrics: dict[str, float]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    policy: str = "policy"
    metric: str = "hit@10"

    def summary(self) -> str:
        m = self.metrics
        corr = text_table(
            ["correlation with gain", "r", "p"],
            [[name, m[f"gain/{name}"], m[f"gain/{name}_p"]] for name in ("pearson", "spearman", "kendall")],
        )
        sel = text_table(
            ["selective use", self.metric],
            [
                [f"policy (score > {fmt(m['gain/selective/threshold'])})", m["gain/selective/quality"]],
                ["always-base", m["gain/selective/base_quality"]],
                ["always-extra", m["gain/selective/extra_quality"]],
                ["oracle", m["gain/selective/oracle_quality"]],
            ],
        )
        return (
            f"Protocol C (gain prediction, test n={int(m['n/test'])}) - {self.policy}\n{corr}\n\n{sel}\n"
            f"decision accuracy {fmt(m['gain/selective/decision_accuracy'])}  gap closed "
            f"{fmt(m['gain/selective/gap_closed'])}  extra share {fmt(m['gain/selective/extra_share'])}"
        )


def run_gain_protocol(
    task: RoutingTask, policy_factory: PolicyFactory, *, seed: int = 0, threshold: float = 0.0
) -> GainResult:
    """Protocol C: fit on one grouped half, correlate scores with the gain on the other."""
    fit_idx, test_idx = stratified_grouped_halves(task.groups, task.delta_class, seed)
    fit_part, test = task.take(fit_idx), task.take(test_idx)
    policy = fit_policy(policy_factory(), fit_part, seed)
    scores = score_task(policy, test, seed)
    gain = test.gain
    metrics: dict[str, float] = {"n/fit": fit_part.n, "n/test": test.n}
    for name, fn in (("pearson", pearson), ("spearman", spearman), ("kendall", kendall)):
        r, p = fn(scores, gain)
        metrics[f"gain/{name}"] = r
        metrics[f"gain/{name}_p"] = p
    metrics["gain/selective/threshold"] = float(threshold)
    for key, value in selective_metrics(scores, test.base, test.extra, threshold).items():
        metrics[f"gain/selective/{key}"] = value
    decisions = pd.DataFrame(
        {
            "qid": test.qids,
            "doc_id": test.groups,
            "score": scores,
            "gain": gain,
            "ran_extra": scores > threshold,
            "base": test.base,
            "extra": test.extra,
        }
    )
    return GainResult(metrics, {"decisions": decisions}, policy=policy_label(policy), metric=task.metric)
