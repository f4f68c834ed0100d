"""Protocol C (docs/metrics.md §7): how well a score predicts the gain of the extra arm.

Why: a router is useful when its score orders questions by gain; correlations measure that
directly, and "selective use" (run the extra arm above a threshold) turns it into answer
quality. The threshold must be on the policy's own scale: a fixed 0 makes a random router
(scores in [0, 1)) run the extra arm everywhere and a router whose scores are never positive
never run it, so their "selective" numbers would just be always-extra / always-keep.

Choices where docs/metrics.md is silent:
- Split: ``stats.stratified_grouped_halves(groups, delta_class, seed)``; the first half is the
  development ("fit") half: the policy is fitted on it (trainable policies only) and the
  threshold is chosen on it. Everything else is reported on the second half (test).
- Correlations are with ``task.gain`` (delta for hits, the log ratio for continuous quality);
  they are nan for a constant score (e.g. always-keep), see ``stats.pearson``.
- Selective-use threshold, first matching rule wins (``gain/selective/rule``; as a metric it is
  the code in ``RULE_CODES``, since MLflow metrics are numbers; ``GainResult.rule`` holds the
  name, the summary and the decision table show it):
  1. ``given``: an explicit ``threshold`` number (config ``protocol.gain_threshold``)
     overrides everything; extra runs when score > threshold (strict).
  2. ``fixed``: a fixed-decision policy (``fixed_route``) keeps its decision: "base" gets
     threshold +inf, "extra" -inf, applied as score >= threshold (scores are finite, so
     always-keep never runs the extra arm and always-extra always does), as protocol A does.
  3. ``zero``: a policy whose score estimates the gain (``estimates_gain``: expected delta,
     or the true delta for the oracle) uses 0; extra runs when score > 0 (strict: a predicted
     gain of exactly 0 keeps the cheaper base arm, docs/metrics.md §7's "score > a threshold").
  4. ``dev_tau``: any other policy (random, single signals, plugins) gets the cost-0
     protocol-A threshold of the fit half: ``select_tau(oof_scores(fit, factory, n_folds,
     seed), fit.base, fit.delta, 0.0)`` on document-grouped out-of-fold scores of the fit half
     (so the chosen tau maximises mean fit-half quality; ties go to fewer extra calls; +inf =
     never). It is applied as score >= tau, the comparison ``select_tau`` optimised.
  ``gain/selective/threshold`` is the threshold used and ``gain/selective/run_at_threshold``
  is 1 when a score equal to it runs the extra arm (>=, rules fixed and dev_tau), 0 when not
  (>, rules given and zero).
- Decision accuracy: running extra is correct when extra >= base, keeping base is correct when
  base >= extra (so ties count as correct both ways, as docs/metrics.md §7 says). Because a neutral
  question (base == extra) is correct whatever the policy does, the share is also reported on
  non-neutral questions only (``decision_accuracy_nonneutral``, count ``n_nonneutral``;
  nan when there is none).
- Gap closed = (Q(policy) - Q(always-extra)) / (Q(oracle) - Q(always-extra)), Q(oracle) =
  mean of max(base, extra). Its denominator is non-zero only on questions where base beats
  extra (the harms of extra; for continuous quality base > extra), so it rests on that many
  questions. With fewer than ``min_discordant`` of them (config ``protocol.min_discordant``,
  default 10) gap closed is undefined: nan, ``gain/selective/gap_closed_defined`` = 0, and the
  summary says "undefined: the gap rests on N questions (< min_discordant)"; its interval is
  then nan and its usable-resample count 0.
- Intervals (``..._ci_low``, ``..._ci_high``): document bootstrap on the test half, the draws
  of ``stats.bootstrap_draws(n_docs, n_boot, seed)`` over the sorted unique test documents
  (as ``stats.doc_bootstrap_ci``); each resample takes all questions of the drawn documents
  with multiplicity and recomputes the statistic (a ratio of resample means, not a mean of
  per-question values); percentile interval (numpy 'linear'), level 1 - alpha (0.95). A
  resample whose denominator is 0 (no harm of extra for gap closed, no non-neutral question
  for the non-neutral accuracy) is skipped; ``..._n_boot_used`` counts the usable resamples
  (nan interval when none). ``n_boot`` >= 1 (docs/metrics.md §5's floor of 1,000 is protocol A's; the
  config default is 1,000).
- Power: ``gain/discordant/rescues`` / ``harms`` count the test questions where extra beats /
  loses to base. The policy's choice is compared with always-extra on the questions where the
  two outcomes differ (``gain/selective/vs_extra/discordant``: kept base on a non-neutral
  question); ``gain/selective/vs_extra/mdd`` is ``stats.min_detectable_difference`` of the
  per-question differences chosen - extra, grouped by document (alpha, power = 0.05, 0.8 by
  default), and ``gain/selective/vs_extra/min_mcnemar_p`` the smallest McNemar p-value those
  discordant questions allow (hits only; nan for continuous quality).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.errors import ConfigError, HarnessError
from harness.protocols.common import PolicyFactory, fit_policy, policy_label, score_task
from harness.protocols.gain_result import GainResult
from harness.paired import document_totals, max_showable_difference, min_reachable_p, sample_size_plan
from harness.protocols.threshold_select import oof_scores, select_tau
from harness.stats import (
    bootstrap_draws,
    kendall,
    min_detectable_difference,
    min_mcnemar_p,
    pearson,
    spearman,
    stratified_grouped_halves,
    williams_test,
)
from harness.task import RoutingTask

RULE_CODES = {"zero": 0, "dev_tau": 1, "fixed": 2, "given": 3}


@dataclass(frozen=True)
class SelectiveRule:
    """Which threshold selective use applies, and how: extra runs when score >= threshold
    (``inclusive``) or score > threshold (not inclusive)."""

    rule: str
    threshold: float
    inclusive: bool

    def decide(self, scores) -> np.ndarray:
        scores = np.asarray(scores, dtype=float)
        return scores >= self.threshold if self.inclusive else scores > self.threshold

    @property
    def comparison(self) -> str:
        return ">=" if self.inclusive else ">"


def choose_rule(
    policy_factory: PolicyFactory,
    fit_part: RoutingTask,
    *,
    threshold: float | None = None,
    n_folds: int = 5,
    seed: int = 0,
) -> SelectiveRule:
    """The selective-use rule of the module docstring; reads only the fit half."""
    if threshold is not None:
        threshold = float(threshold)
        if not math.isfinite(threshold):
            raise ConfigError("protocol.gain_threshold", f"must be a finite number or null, got {threshold}")
        return SelectiveRule("given", threshold, inclusive=False)
    probe = policy_factory()
    route = getattr(probe, "fixed_route", None)
    if route is not None:
        if route not in ("base", "extra"):
            raise ConfigError("policy", f"fixed_route must be 'base' or 'extra', got {route!r}")
        return SelectiveRule("fixed", math.inf if route == "base" else -math.inf, inclusive=True)
    if getattr(probe, "estimates_gain", False):
        return SelectiveRule("zero", 0.0, inclusive=False)
    oof = oof_scores(fit_part, policy_factory, n_folds=n_folds, seed=seed)
    tau, _, _ = select_tau(oof, fit_part.base, fit_part.delta, 0.0)
    return SelectiveRule("dev_tau", float(tau), inclusive=True)


def _ratio(num: float, den: float) -> float:
    return num / den if den != 0 else math.nan


def selective_metrics_from_decisions(ran, base, extra) -> dict[str, float]:
    """Mean quality, decision accuracy (all and non-neutral), gap closed of the decisions
    ``ran`` (True = the extra arm ran)."""
    ran = np.asarray(ran, dtype=bool)
    base = np.asarray(base, dtype=float)
    extra = np.asarray(extra, dtype=float)
    chosen = np.where(ran, extra, base)
    correct = np.where(ran, extra >= base, base >= extra)
    nonneutral = base != extra
    q_pol, q_extra = float(chosen.mean()), float(extra.mean())
    q_oracle = float(np.maximum(base, extra).mean())
    n_nn = int(nonneutral.sum())
    return {
        "quality": q_pol,
        "decision_accuracy": float(correct.mean()),
        "decision_accuracy_nonneutral": float(correct[nonneutral].mean()) if n_nn else math.nan,
        "n_nonneutral": n_nn,
        "gap_closed": _ratio(q_pol - q_extra, q_oracle - q_extra),
        "extra_share": float(ran.mean()),
        "base_quality": float(base.mean()),
        "extra_quality": q_extra,
        "oracle_quality": q_oracle,
    }


def selective_metrics(scores, base, extra, threshold: float = 0.0, *, inclusive: bool = False) -> dict[str, float]:
    """``selective_metrics_from_decisions`` of "run extra when score > threshold" (or >= with
    ``inclusive``)."""
    rule = SelectiveRule("given", float(threshold), inclusive)
    return selective_metrics_from_decisions(rule.decide(scores), base, extra)


def selective_bootstrap(
    ran, base, extra, groups, *, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> dict[str, float]:
    """Document-bootstrap percentile intervals of decision accuracy (all, non-neutral) and gap
    closed: ``<stat>_ci_low``, ``<stat>_ci_high``, ``<stat>_n_boot_used``.

    Resample b takes C[b, d] copies of document d (``stats.bootstrap_draws`` over the sorted
    unique documents, as ``doc_bootstrap_ci``); every statistic is a ratio of sums over the
    resample, so it is computed from per-document sums without a loop. Resamples whose
    denominator is 0 are skipped.
    """
    ran = np.asarray(ran, dtype=bool)
    base = np.asarray(base, dtype=float)
    extra = np.asarray(extra, dtype=float)
    groups = np.asarray(groups)
    if not (len(ran) == len(base) == len(extra) == len(groups)) or len(ran) == 0:
        raise HarnessError("selective_bootstrap: decisions, outcomes and groups must align and be non-empty")
    if n_boot < 1:
        raise ConfigError("protocol.n_boot", f"must be >= 1, got {n_boot}")
    if not 0 < alpha < 1:
        raise ConfigError("alpha", f"must be in (0, 1), got {alpha}")
    docs, doc_of = np.unique(groups.astype(str), return_inverse=True)
    n_docs = len(docs)
    draws = bootstrap_draws(n_docs, n_boot, seed)
    offsets = (np.arange(n_boot) * n_docs)[:, None]
    counts = np.bincount((draws + offsets).ravel(), minlength=n_boot * n_docs).reshape(n_boot, n_docs).astype(float)

    def resampled(values) -> np.ndarray:
        return counts @ np.bincount(doc_of, weights=np.asarray(values, dtype=float), minlength=n_docs)

    chosen = np.where(ran, extra, base)
    correct = np.where(ran, extra >= base, base >= extra).astype(float)
    nonneutral = (base != extra).astype(float)
    n_q = resampled(np.ones(len(ran)))
    parts = {
        "decision_accuracy": (resampled(correct), n_q),
        "decision_accuracy_nonneutral": (resampled(correct * nonneutral), resampled(nonneutral)),
        # mean(chosen) - mean(extra) over mean(max(base, extra)) - mean(extra): the question
        # counts cancel; per-question terms keep an exact 0 denominator exactly 0
        "gap_closed": (resampled(chosen - extra), resampled(np.maximum(base - extra, 0.0))),
    }
    out: dict[str, float] = {}
    for name, (num, den) in parts.items():
        ok = den != 0
        boot = num[ok] / den[ok]
        out[f"{name}_n_boot_used"] = int(ok.sum())
        if ok.any():
            lo, hi = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)])
            out[f"{name}_ci_low"], out[f"{name}_ci_high"] = float(lo), float(hi)
        else:
            out[f"{name}_ci_low"] = out[f"{name}_ci_high"] = math.nan
    return out


def pearson_bootstrap(scores, gain, groups, *, n_boot: int = 1000, seed: int = 0,
                      alpha: float = 0.05) -> dict[str, float]:
    """Document-bootstrap percentile interval of the Pearson correlation between the scores and
    the gain: ``pearson_ci_low``, ``pearson_ci_high``, ``pearson_n_boot_used``.

    Questions of one document are not independent, so the interval resamples documents (the
    draws of ``selective_bootstrap``: same seed, same documents), not questions; a Fisher-z
    interval would assume independent questions. Each resample's r comes from per-document sums
    of x, y, x^2, y^2 and xy (x, y centred on their means first, which r ignores); resamples
    where either side is constant are skipped."""
    x = np.asarray(scores, dtype=float)
    y = np.asarray(gain, dtype=float)
    groups = np.asarray(groups)
    if not (len(x) == len(y) == len(groups)) or len(x) == 0:
        raise HarnessError("pearson_bootstrap: scores, gain and groups must align and be non-empty")
    if n_boot < 1:
        raise ConfigError("protocol.n_boot", f"must be >= 1, got {n_boot}")
    if not 0 < alpha < 1:
        raise ConfigError("alpha", f"must be in (0, 1), got {alpha}")
    x, y = x - x.mean(), y - y.mean()
    docs, doc_of = np.unique(groups.astype(str), return_inverse=True)
    n_docs = len(docs)
    draws = bootstrap_draws(n_docs, n_boot, seed)
    offsets = (np.arange(n_boot) * n_docs)[:, None]
    counts = np.bincount((draws + offsets).ravel(), minlength=n_boot * n_docs).reshape(n_boot, n_docs).astype(float)
    n, sx, sy, sxx, syy, sxy = (counts @ np.bincount(doc_of, weights=w, minlength=n_docs)
                                for w in (np.ones(len(x)), x, y, x * x, y * y, x * y))
    vx, vy = sxx - sx * sx / n, syy - sy * sy / n
    ok = (vx > 1e-12 * np.maximum(sxx, 1e-300)) & (vy > 1e-12 * np.maximum(syy, 1e-300))
    r = (sxy[ok] - sx[ok] * sy[ok] / n[ok]) / np.sqrt(vx[ok] * vy[ok])
    out = {"pearson_n_boot_used": int(ok.sum())}
    if ok.any():
        lo, hi = np.percentile(np.clip(r, -1.0, 1.0), [100 * alpha / 2, 100 * (1 - alpha / 2)])
        out["pearson_ci_low"], out["pearson_ci_high"] = float(lo), float(hi)
    else:
        out["pearson_ci_low"] = out["pearson_ci_high"] = math.nan
    return out


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


def run_gain_protocol(
    task: RoutingTask,
    policy_factory: PolicyFactory,
    *,
    seed: int = 0,
    threshold: float | None = None,
    n_folds: int = 5,
    n_boot: int = 1000,
    min_discordant: int = 10,
    alpha: float = 0.05,
    power: float = 0.8,
) -> GainResult:
    """Protocol C: fit and choose the selective threshold on one grouped half, report the
    correlations with the gain and selective use (with intervals and power) on the other."""
    if isinstance(min_discordant, bool) or int(min_discordant) != min_discordant or min_discordant < 0:
        raise ConfigError("protocol.min_discordant", f"must be an integer >= 0, got {min_discordant!r}")
    if n_boot < 1:
        raise ConfigError("protocol.n_boot", f"must be >= 1, got {n_boot}")
    min_discordant = int(min_discordant)
    fit_idx, test_idx = stratified_grouped_halves(task.groups, task.delta_class, seed)
    fit_part, test = task.take(fit_idx), task.take(test_idx)
    rule = choose_rule(policy_factory, fit_part, threshold=threshold, n_folds=n_folds, seed=seed)
    policy = fit_policy(policy_factory(), fit_part, seed)
    scores = score_task(policy, test, seed)
    gain = test.gain
    metrics: dict[str, float] = {"n/fit": fit_part.n, "n/test": test.n}
    metrics.update(_correlation_metrics(scores, gain, test.groups, n_boot=n_boot, seed=seed, alpha=alpha))
    ran = rule.decide(scores)
    metrics.update(_selective_use_metrics(rule, ran, test, n_boot=n_boot, seed=seed, alpha=alpha))
    notes = _gap_closed_definition(metrics, ran, test.delta, min_discordant)
    chosen = np.where(ran, test.extra, test.base)
    metrics.update(_vs_extra_power(chosen - test.extra, test, alpha=alpha, power=power))
    decisions = pd.DataFrame(
        {
            "qid": test.qids,
            "doc_id": test.groups,
            "score": scores,
            "gain": gain,
            "ran_extra": ran,
            "base": test.base,
            "extra": test.extra,
            "chosen": chosen,
            "correct": np.where(ran, test.extra >= test.base, test.base >= test.extra),
            "neutral": test.base == test.extra,
        }
    )
    return GainResult(
        metrics,
        {"decisions": decisions},
        policy=policy_label(policy),
        metric=task.metric,
        rule=rule.rule,
        comparison=rule.comparison,
        notes=notes,
        alpha=float(alpha),
        power=float(power),
    )


def _correlation_metrics(scores, gain, groups, *, n_boot: int, seed: int, alpha: float) -> dict[str, float]:
    """Pearson, Spearman and Kendall correlations of the test scores with the gain (with their
    p-values), and the document-bootstrap interval of Pearson's r."""
    metrics: dict[str, float] = {}
    for name, fn in (("pearson", pearson), ("spearman", spearman), ("kendall", kendall)):
        r, p = fn(scores, gain)
        metrics[f"gain/{name}"] = r
        metrics[f"gain/{name}_p"] = p
    ci = pearson_bootstrap(scores, gain, groups, n_boot=n_boot, seed=seed, alpha=alpha)
    metrics.update({f"gain/{k}": v for k, v in ci.items()})
    return metrics


def _selective_use_metrics(
    rule: SelectiveRule, ran, test: RoutingTask, *, n_boot: int, seed: int, alpha: float
) -> dict[str, float]:
    """The rule (threshold, code, inclusive) and selective use's numbers on the test half, with
    their document-bootstrap intervals."""
    s = "gain/selective/"
    metrics: dict[str, float] = {}
    metrics[s + "threshold"] = float(rule.threshold)
    metrics[s + "rule"] = RULE_CODES[rule.rule]
    metrics[s + "run_at_threshold"] = int(rule.inclusive)
    for key, value in selective_metrics_from_decisions(ran, test.base, test.extra).items():
        metrics[s + key] = value
    boot = selective_bootstrap(ran, test.base, test.extra, test.groups, n_boot=n_boot, seed=seed, alpha=alpha)
    metrics.update({s + k: v for k, v in boot.items()})
    return metrics


def _gap_closed_definition(metrics: dict[str, float], ran, delta, min_discordant: int) -> dict[str, str]:
    """Adds the discordant counts (of the arms and of the policy's extra calls) to ``metrics``
    and blanks gap closed when it rests on fewer than ``min_discordant`` harms of extra; returns
    the notes that say why."""
    s = "gain/selective/"
    rescues, harms = int(np.sum(delta > 0)), int(np.sum(delta < 0))
    metrics["gain/discordant/rescues"] = rescues
    metrics["gain/discordant/harms"] = harms
    metrics[s + "rescues"] = int(np.sum(ran & (delta > 0)))
    metrics[s + "harms"] = int(np.sum(ran & (delta < 0)))
    notes: dict[str, str] = {}
    # the oracle-minus-extra gap is non-zero exactly on the harms of extra (base > extra)
    defined = harms >= min_discordant and harms > 0
    metrics[s + "gap_closed_defined"] = int(defined)
    if not defined:
        notes["gap_closed"] = (
            f"undefined: the gap rests on {harms} questions (< min_discordant = {min_discordant})"
            if harms < min_discordant
            else "undefined: no gap (always-extra is never beaten by base)"
        )
        metrics[s + "gap_closed"] = math.nan
        metrics[s + "gap_closed_ci_low"] = metrics[s + "gap_closed_ci_high"] = math.nan
        metrics[s + "gap_closed_n_boot_used"] = 0
    return notes


def _vs_extra_power(diffs, test: RoutingTask, *, alpha: float, power: float) -> dict[str, float]:
    """Policy vs always-extra on the test half (``diffs`` = chosen - extra): discordant questions,
    MDD, what the half could show at all and how many questions would (docs/metrics.md §12)."""
    s = "gain/selective/"
    metrics: dict[str, float] = {}
    metrics[s + "vs_extra/discordant"] = int(np.sum(diffs != 0))
    metrics[s + "vs_extra/mdd"] = min_detectable_difference(diffs, test.groups, alpha=alpha, power=power)
    # what the test half could show at all and how many questions would (docs/metrics.md §12)
    metrics[s + "vs_extra/max_diff"] = max_showable_difference(diffs, test.groups)
    k_docs = int(np.sum(np.abs(document_totals(diffs, test.groups)[0]) > 1e-12))
    metrics[s + "vs_extra/detectable"] = int(min_reachable_p(k_docs) < alpha
                                             and metrics[s + "vs_extra/mdd"] < metrics[s + "vs_extra/max_diff"])
    metrics[s + "vs_extra/plan_questions"] = sample_size_plan(diffs, test.groups, alpha=alpha, power=power)["questions"]
    metrics[s + "vs_extra/min_mcnemar_p"] = math.nan if test.continuous else min_mcnemar_p(int(np.sum(diffs != 0)))
    return metrics
