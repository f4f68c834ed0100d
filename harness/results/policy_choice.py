"""Which policy development data chooses at each cost (seeds 000 and 002): the best nested
development utility, unless the runner-up is within noise, and what held-out says of it."""

from __future__ import annotations

import math

from harness.markdown import md_escape
from harness.results.cite import Page
from harness.results.sweeps import SweepView, metric_value as _m
from harness.results.wording import interval_words

NOT_CANDIDATES = ("oracle",)  # a policy that reads the outcomes cannot be chosen on development


def nested_dev_noise(run) -> float:
    """How far apart two nested development utilities must be to mean anything: the standard
    error of the mean over repeats (sd / sqrt(R)), at least one development question's worth
    (1 / n_dev) of utility."""
    sd = _m(run, "dev/nested_utility_std")
    reps = _m(run, "n/repeats")
    n_dev = _m(run, "n/dev")
    se = sd / math.sqrt(reps) if math.isfinite(sd) and math.isfinite(reps) and reps > 0 else 0.0
    return max(se, 1.0 / n_dev if math.isfinite(n_dev) and n_dev > 0 else 0.0)


def best_by_development(page: Page, view: SweepView, costs: list[str], heads: list[str], base: str) -> None:
    """Per cost, the policy with the best nested development utility (chosen before held-out),
    unless the runner-up is within noise (``nested_dev_noise``: then development data cannot
    choose); what held-out says of it against ``base``; whether the measured cost changes a
    clear choice."""
    picks = []
    for c, head in zip(costs, heads):
        cands = [(p, view.find(p, c)) for p in view.policies() if p not in NOT_CANDIDATES]
        cands = [(p, r) for p, r in cands if r is not None and math.isfinite(_m(r, "dev/nested_utility"))]
        if not cands:
            continue
        cands.sort(key=lambda pr: (-_m(pr[1], "dev/nested_utility"), pr[0]))
        picks.append(_pick_at_cost(page, cands, head.split(" (")[0], base))
    if len(picks) == 2:
        page.add(_does_the_measured_cost_change_it(picks))
    page.add("Fixed decisions (always-keep, always-extra) are not candidates here: their development utility is not "
             "logged; the held-out intervals above compare the chosen policy with them.", "")


def _pick_at_cost(page: Page, cands: list, label: str, base: str) -> str | None:
    """One cost's line: the clear development choice (returned), or the leaders within noise of
    each other (None: development data cannot choose)."""
    (best, r), rest = cands[0], cands[1:]
    verdict = interval_words(_m(r, "heldout/diff_vs_base/utility/ci_low"), _m(r, "heldout/diff_vs_base/utility/ci_high"),
                             md_escape(best), base)
    if rest:
        _, r2 = rest[0]
        margin = _m(r, "dev/nested_utility") - _m(r2, "dev/nested_utility")
        noise = math.sqrt(nested_dev_noise(r) ** 2 + nested_dev_noise(r2) ** 2)
        if margin <= noise:
            close = [p for p, q in rest if _m(r, "dev/nested_utility") - _m(q, "dev/nested_utility") <= noise]
            page.add(f"- {label}: highest nested development utility: {md_escape(best)}, but "
                     f"{', '.join(md_escape(p) for p in close)} "
                     f"{'is' if len(close) == 1 else 'are'} within noise of it (closer than the standard error "
                     "over repeats, or one development question's worth of utility): development data cannot "
                     f"choose between them; on held-out, {verdict}.")
            return None
    page.add(f"- {label}: best by nested development utility: **{md_escape(best)}** (ahead of the runner-up by more than the "
             f"noise); on held-out, {verdict}.")
    return best


def _does_the_measured_cost_change_it(picks: list) -> str:
    """The sentence comparing the choice at the abstract and at the measured cost."""
    if None in picks:
        return ("- Whether the measured cost changes the choice cannot be said: at one cost or both, development "
                "data cannot choose between the leading policies.")
    return "- The measured cost " + ("does not change the policy chosen on development data."
                                     if picks[0] == picks[1] else "changes the policy chosen on development "
                                     f"data: {md_escape(picks[0])} at the abstract cost, {md_escape(picks[1])} "
                                     "at the measured one.")
