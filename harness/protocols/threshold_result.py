"""Protocol A's result: the metrics, the held-out decisions and the frozen folder, and the summary
text that reads them (verdict sentences, what the held-out set can resolve).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from harness.paired import equivalence_words, interval_words, p_words, plan_words, resolution_words
from harness.protocols.ceiling import ceiling_warning
from harness.protocols.common import fmt, text_table
from harness.protocols.threshold_freeze import STATE_FILE


@dataclass
class ThresholdResult:
    """Plain data: metrics (stable names), held-out decisions, frozen paths and digests.

    ``frozen`` is repeat 0's freeze; ``extras`` holds ``repeat_seeds``, ``per_repeat`` (each
    repeat's own metrics), ``frozen_per_repeat`` (every repeat's freeze, index = repeat) and
    ``fixed_route`` (the policy's fixed decision, or None)."""

    metrics: dict[str, float]
    decisions: pd.DataFrame
    frozen: dict[str, Any]
    policy: str = "policy"
    metric: str = "hit@10"
    extras: dict[str, Any] = field(default_factory=dict)
    alpha: float = 0.05
    power: float = 0.8
    repeats: int = 1
    equivalence_margin: float = 0.01

    def _count(self, value: float) -> str:
        """A count: an integer for one split, a mean (2 decimals) over repeats."""
        return str(int(value)) if self.repeats == 1 else f"{float(value):.2f}"

    def _direction(self, name: str) -> float:
        """The mean utility difference the sign-flip test is on: the point estimate for R = 1,
        the pooled mean of the decisions for R > 1 (docs/protocols.md)."""
        if self.repeats == 1:
            return float(self.metrics[f"heldout/diff_vs_{name}/utility"])
        d = self.decisions
        other = d["base"] if name == "base" else d["extra"] - self.metrics["cost"]
        return float((d["utility"] - other).mean())

    def _comparison(self, name: str) -> dict:
        """The logged numbers of ``policy - <name>`` as ``harness.paired``'s word helpers read them."""
        m, pre = self.metrics, f"heldout/diff_vs_{name}/utility"
        c = {k: m.get(f"{pre}/{k}", math.nan) for k in (
            "ci_low", "ci_high", "mdd", "p", "max_diff", "min_p", "plan_questions", "plan_docs", "n_patterns")}
        for k in ("detectable", "p_exact", "cost_only", "plan_capped", "equivalent"):
            c[k] = bool(m.get(f"{pre}/{k}", 0))
        c.update(same=bool(m[f"{pre}/all_zero"]), discordant_docs=int(m[f"{pre}/discordant_docs"]),
                 discordant_questions=int(m.get(f"{pre}/discordant_questions", 0)))
        c["plan_why"] = "" if c["plan_questions"] == c["plan_questions"] else (
            "no discordant document to plan from" if c["discordant_docs"] == 0 else
            "the discordant documents split evenly: no number of questions gives the power")
        return c

    def _verdict(self, name: str) -> str:
        """One plain sentence per comparison (unadjusted: each job's two comparisons are not
        corrected for the other jobs of a sweep): which side is better (only when the sign-flip
        p < alpha), else what the held-out questions can resolve and how many would."""
        ref, a = f"always-{name}", self.alpha
        c = self._comparison(name)
        k = c["discordant_docs"]
        if c["same"]:
            return f"policy - {name}: the same utility as {ref} on every held-out question; no difference can be resolved"
        pooled = "" if self.repeats == 1 else ", pooled over repeats"
        test = f"{p_words(c)} p = {fmt(c['p'])}"
        on = f"unadjusted, {k} discordant documents{pooled}"
        cost = "; the difference is the cost alone (0 discordant questions)" if c["cost_only"] else ""
        if c["p"] < a:
            detail = f"({test} < alpha = {a:g}, {on}; {interval_words(c, a)}{cost})"
            if self._direction(name) > 0:
                return f"policy - {name}: the policy is better than {ref} {detail}"
            return f"policy - {name}: {ref} is better than the policy {detail}"
        return (f"policy - {name}: cannot be told from {ref} ({test} >= alpha = {a:g}, {on}; {interval_words(c, a)}); "
                f"{equivalence_words(c, self.equivalence_margin)}; {resolution_words(c, a, self.power)}; "
                f"{plan_words(c, a, self.power, f'policy vs {ref}')}")

    def _heldout_resolution(self) -> str:
        """What the held-out set itself can resolve: always-extra vs always-base."""
        m, a = self.metrics, self.alpha
        rescues, harms = m["heldout/extra_vs_base/rescues"], m["heldout/extra_vs_base/harms"]
        min_p = m["heldout/extra_vs_base/min_p"]
        if math.isnan(min_p):
            return (
                f"held-out set: the arms differ on {self._count(m['heldout/extra_vs_base/discordant'])} questions"
                f"{'' if self.repeats == 1 else ' per split on average'} (continuous outcome, no McNemar test)"
            )
        if self.repeats == 1:
            line = (
                f"held-out set: always-extra vs always-base rests on {self._count(rescues)} rescues + "
                f"{self._count(harms)} harms; the smallest reachable McNemar p is {fmt(min_p)}"
            )
            if min_p > a:
                line += (
                    " > alpha: no policy can be shown to differ from always-base in hits on this held-out set "
                    f"at alpha = {a:g}"
                )
            return line
        per = [r["heldout/extra_vs_base/min_p"] for r in self.extras.get("per_repeat", [])]
        blind = sum(p > a for p in per)
        line = (
            f"held-out sets: always-extra vs always-base rests on {self._count(rescues)} rescues + "
            f"{self._count(harms)} harms per split on average; in {blind} of {self.repeats} splits the "
            f"smallest reachable McNemar p exceeds alpha = {a:g}"
        )
        if per and blind == len(per):
            line += (
                ": no policy can be shown to differ from always-base in hits on any of these held-out sets "
                f"at alpha = {a:g}"
            )
        elif blind:
            line += " (on those, no policy can be shown to differ from always-base in hits)"
        return line

    def summary(self) -> str:
        m, k, R = self.metrics, self.metric, self.repeats
        n_held = int(m["n/heldout"]) if R == 1 else m["n/heldout"]
        rows = [
            ["policy", m[f"heldout/{k}"], m["heldout/utility"], m["heldout/extra_calls"], m["heldout/extra_share"]],
            ["always-base", m[f"heldout/base/{k}"], m["heldout/base/utility"], 0, 0.0],
            ["always-extra", m[f"heldout/extra/{k}"], m["heldout/extra/utility"], n_held, 1.0],
        ]
        head = text_table(["held-out", k, "utility", "extra calls", "share"], rows)
        diffs = text_table(
            [
                "utility difference", "point", f"{1 - self.alpha:.0%} CI low", f"{1 - self.alpha:.0%} CI high",
                "sign-flip p", "P(better)", "McNemar p", "discordant", "min p", "MDD",
            ],
            [
                [
                    f"policy - {name}",
                    m[f"heldout/diff_vs_{name}/utility"],
                    m[f"heldout/diff_vs_{name}/utility/ci_low"],
                    m[f"heldout/diff_vs_{name}/utility/ci_high"],
                    m[f"heldout/diff_vs_{name}/utility/p"],
                    m.get(f"heldout/diff_vs_{name}/utility/p_better", float("nan")),
                    m[f"heldout/mcnemar_vs_{name}/p"],
                    m[f"heldout/mcnemar_vs_{name}/discordant"],
                    m[f"heldout/mcnemar_vs_{name}/min_p"],
                    m[f"heldout/diff_vs_{name}/utility/mdd"],
                ]
                for name in ("base", "extra")
            ],
        )
        if self.extras.get("fixed_route") is not None:
            oof = f"OOF utility (fixed decision, not tuned)={fmt(m['dev/oof_utility'])}"
        else:
            oof = f"OOF utility (optimistic: maximum over thresholds)={fmt(m['dev/oof_utility'])}"
        if "dev/nested_utility" in m:
            nested = (
                f"nested utility={fmt(m['dev/nested_utility'])} (extra share {fmt(m['dev/nested_extra_share'])})"
            )
        else:
            nested = "nested estimate off"
        lines = [f"Protocol A (frozen threshold) - {self.policy}"]
        warning = ceiling_warning(k, m[f"heldout/base/{k}"])
        if warning:
            lines.append(warning)
        if R > 1:
            lines.append(
                f"repeats: {R} document-level dev/held-out splits (split seeds {self.extras.get('repeat_seeds')}); "
                "every number is the mean over repeats (sd: <name>_std metrics) except tau (median over repeats); "
                "CIs, MDD and sign-flip p from the pooled decisions with documents as clusters (the point is the "
                "mean over repeats, the CI that of the pooled mean: they can differ slightly); "
                "McNemar p not reported (nan)"
            )
        tau = f"tau={fmt(m['dev/tau'])}" if R == 1 else f"tau median={fmt(m['dev/tau_median'])}"
        lines += [
            f"dev: n={self._count(m['n/dev'])}  {tau}  {oof}  {nested}",
            f"held-out: n={self._count(m['n/heldout'])}  rescues={self._count(m['heldout/rescues'])}"
            f"  harms={self._count(m['heldout/harms'])}",
            head,
            "",
            diffs,
            self._verdict("base"),
            self._verdict("extra"),
            self._heldout_resolution(),
            f"frozen: {self.frozen.get('shown_as', self.frozen['dir'])}  state sha256={self.frozen['sha256'][STATE_FILE][:16]}"
            + ("" if R == 1 else f"  (repeat 0 of {R})"),
        ]
        return "\n".join(lines)
