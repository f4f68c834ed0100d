"""Protocol C's result: the metrics, the per-question decisions and the selective rule, and the
summary text that reads them (correlations, selective use, gap closed, power against always-extra).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from harness.protocols.common import fmt, text_table

RULE_TEXT = {
    "zero": "0: the score estimates the gain",
    "dev_tau": "cost-0 protocol-A tau on out-of-fold scores of the fit half",
    "fixed": "the policy's fixed route",
    "given": "protocol.gain_threshold",
}


@dataclass
class GainResult:
    """metrics (stable names), ``tables`` (``decisions``: per test question), the selective
    rule's name and comparison, and ``notes`` (reasons, e.g. why gap closed is undefined)."""

    metrics: dict[str, float]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    policy: str = "policy"
    metric: str = "hit@10"
    rule: str = "given"
    comparison: str = ">"
    notes: dict[str, str] = field(default_factory=dict)
    alpha: float = 0.05
    power: float = 0.8

    def summary(self) -> str:
        m = self.metrics
        s = "gain/selective/"
        corr = text_table(
            ["correlation with gain", "r", "p"],
            [[name, m[f"gain/{name}"], m[f"gain/{name}_p"]] for name in ("pearson", "spearman", "kendall")],
        )
        sel = text_table(
            ["selective use", self.metric],
            [
                [f"policy (extra when score {self.comparison} {fmt(m[s + 'threshold'])})", m[s + "quality"]],
                ["always-base", m[s + "base_quality"]],
                ["always-extra", m[s + "extra_quality"]],
                ["oracle", m[s + "oracle_quality"]],
            ],
        )

        def ci(name: str) -> str:
            return (
                f"{fmt(m[s + name])} [95% CI {fmt(m[s + name + '_ci_low'])}, {fmt(m[s + name + '_ci_high'])}; "
                f"{int(m[s + name + '_n_boot_used'])} usable resamples]"
            )

        gap = ci("gap_closed") if m[s + "gap_closed_defined"] else self.notes["gap_closed"]
        largest = m.get(s + "vs_extra/max_diff", math.nan)
        mdd_line = f"policy vs always-extra: {int(m[s + 'vs_extra/discordant'])} discordant questions, "
        if m.get(s + "vs_extra/detectable", 1):
            mdd_line += (f"largest difference they could show {fmt(largest)}, minimum detectable difference in mean "
                         f"{self.metric} {fmt(m[s + 'vs_extra/mdd'])}")
        else:
            mdd_line += (f"largest difference they could show {fmt(largest)}: no difference is detectable with these "
                         "questions")
        plan = m.get(s + "vs_extra/plan_questions", math.nan)
        if plan == plan:
            mdd_line += (f" (about {plan:.0f} test questions for {self.power:.0%} power at alpha {self.alpha:g}, "
                         "policy vs always-extra)")
        if m[s + "vs_extra/discordant"] == 0:
            mdd_line = "policy vs always-extra: no discordant questions (the same outcome on every test question)"
        elif not math.isnan(m[s + "vs_extra/min_mcnemar_p"]):
            mdd_line += f", smallest McNemar p {fmt(m[s + 'vs_extra/min_mcnemar_p'])}"
        return (
            f"Protocol C (gain prediction, fit n={int(m['n/fit'])}, test n={int(m['n/test'])}) - {self.policy}\n"
            f"{corr}\n\n{sel}\n"
            f"threshold rule: {self.rule} ({RULE_TEXT.get(self.rule, self.rule)}); "
            f"extra share {fmt(m[s + 'extra_share'])}\n"
            f"decision accuracy {ci('decision_accuracy')}\n"
            f"decision accuracy on non-neutral questions (n={int(m[s + 'n_nonneutral'])}) "
            f"{ci('decision_accuracy_nonneutral')}\n"
            f"gap closed {gap}\n"
            f"discordant test questions (extra vs base): {int(m['gain/discordant/rescues'])} rescues, "
            f"{int(m['gain/discordant/harms'])} harms; the policy's extra calls: {int(m[s + 'rescues'])} "
            f"rescues, {int(m[s + 'harms'])} harms\n{mdd_line}"
        )
