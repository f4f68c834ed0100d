"""One verdict cell: its hypotheses, the family they are decided in, and its sentence.

Why: a cell's verdict rests on three claims, each a hypothesis of the sweep's family: the
router differs from a fixed decision (sign-flip test), the router is as good as one (two
one-sided tests against a margin that can fail), and there is no room to route at all (the
best possible rule, the oracle, is itself within the margin that matters). They are decided
together by one step-down procedure (``verdict_stats.stepdown_levels``), and every interval and
plan a cell prints is at the level its claim was decided at (docs/metrics.md §9).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from harness.paired import equivalence_interval, sample_size_plan, sign_flip_interval
from harness.protocols.verdict_stats import MAX_TIE_ALTERNATIVES, stepdown_levels, tost_p

COLUMNS = (
    "cost", "budget", "kind", "verdict", "policy", "chosen", "arm", "diff", "diff_outcome", "diff_cost", "ci_low",
    "ci_high", "p", "p_holm", "level", "equivalent", "margin", "headroom", "plan_questions", "dataset_questions",
    "usage", "violation_rate", "violations", "overspent", "splits", "flag", "note", "cell",
)
REF_NAMES = {"calibration": "best on calibration", "test (optimistic)": "best on test (optimistic)"}


def ref_name(reference_from: str) -> str:
    """How the reference (the router of a verdict) was chosen, in words."""
    return REF_NAMES.get(str(reference_from), f"best on {reference_from}" if reference_from else "reference")


@dataclass(frozen=True)
class Setting:
    """The sweep's verdict settings: ``margin`` (protocol.equivalence_margin, the difference that
    matters), ``fraction`` (protocol.equivalence_fraction: the router's margin is at most this
    share of the oracle's headroom over the fixed decision) and ``power`` of the plans."""

    margin: float = 0.01
    fraction: float = 0.5
    power: float = 0.8


def _num(x: float, digits: int = 3) -> str:
    if not math.isfinite(x):
        return "undefined"  # as the report and the protocols' tables print it
    if x != 0 and abs(x) < 0.5 * 10 ** -digits:
        return f"{x:.2g}"
    return f"{x:.{digits}f}"


def _interval(lo: float, hi: float) -> str:
    return f"[{_num(lo)}, {_num(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else "[no informative interval]"


def arm_name(c: dict) -> str:
    """A fixed decision by its arm ("always keep", "always no_retrieval")."""
    return str(c.get("arm_name") or c["arm"])


def _fits(c: dict, budget: float) -> bool:
    return float(c["arm_usage"]) <= budget + 1e-9


def _direction_p(comps: list[dict]) -> float:
    if all(c["diff"] > 0 and not c["same"] for c in comps):
        return max(c["p"] for c in comps)
    trailing = [c["p"] for c in comps if c["diff"] < 0 and not c["same"]]
    return min(trailing) if trailing else 1.0


@dataclass
class CellTest:
    """A cell's row (``COLUMNS``), the router's comparisons with the fixed decisions that fit
    the budget (one list per equally valid router: ``alts[0]`` the calibration choice), the
    oracle's, and the p of its three hypotheses (keys name them across costs)."""

    row: dict
    alts: list = field(default_factory=list)
    oracle: dict = field(default_factory=dict)
    level: float = 0.05
    setting: Setting = Setting()
    router: dict | None = None
    hyps: dict = field(default_factory=dict)  # "diff" / "eq" / "room" -> (key, p, slot)
    margins: dict = field(default_factory=dict)

    @classmethod
    def build(cls, row: dict, router: dict | None, comps: list[dict], part: pd.DataFrame, level: float,
              setting: Setting) -> "CellTest":
        budget = float(row["budget"])
        cell = cls(row=row, level=level, setting=setting, router=router)
        if router is None:
            row.update(kind="cannot tell", verdict="cannot tell: no deployable router at this budget")
            return cell
        row.update(policy=router["policy"], chosen=ref_name(part["reference_from"].iat[0]),
                   usage=router["usage"], splits=router["splits"], violations=router["violations"],
                   overspent=router["overspent"],
                   violation_rate=router["violations"] / router["splits"] if router["splits"] else math.nan)
        if router["overspent"] * 2 > router["splits"] > 0:
            row["flag"] = f"overspends the budget beyond sampling error in {router['overspent']} of {router['splits']} splits"
        ties = next((c for c in comps if c.get("role") == "ties"), None)
        by_alt: dict[int, list[dict]] = {}
        for c in comps:
            if c.get("role", "router") == "router" and _fits(c, budget):
                by_alt.setdefault(int(c.get("alternative", 0)), []).append(c)
            elif c.get("role") == "oracle" and _fits(c, budget):
                cell.oracle[c["arm"]] = c
        cell.alts = [by_alt[i] for i in sorted(by_alt)]
        if ties is not None:  # too many equally valid routers to test: only "no room" can be decided
            row.update(kind="cannot tell", verdict=f"cannot tell ({router['policy']}): the calibration choice ties in "
                                                   f"{ties['alternatives']} ways, more than the {MAX_TIE_ALTERNATIVES} "
                                                   "that are tested")
            row["note"] = f"the calibration choice tied in {ties['alternatives']} ways: too many to test each"
            cell._room_hypothesis()
            return cell
        if not cell.alts:
            row.update(kind="cannot tell", verdict=f"cannot tell ({router['policy']}): no per-question decisions")
            return cell
        if len(cell.alts) > 1:
            row["note"] = f"the calibration choice tied: {len(cell.alts)} equally valid routers tested"
        cell._hypotheses()
        return cell

    def _hypotheses(self) -> None:
        """The cell's difference, equivalence and room hypotheses with their p."""
        m = self.setting.margin
        for arm, o in self.oracle.items():
            self.margins[arm] = min(m, self.setting.fraction * max(float(o["diff"]), 0.0))
        diff_key = tuple(sorted(c["key"] for cs in self.alts for c in cs))
        self.hyps["diff"] = (diff_key, max(_direction_p(cs) for cs in self.alts), ("router", diff_key))
        eq = []
        for cs in self.alts:
            ps = [0.0 if c["same"] else tost_p(c["data"][0], c["data"][2], self.margins.get(c["arm"], m),
                                                       seed=c.get("seed", 0)) for c in cs]
            eq.append(min(1.0, len(cs) * min(ps)))
        self.hyps["eq"] = (("eq", diff_key, tuple(sorted(self.margins.items()))), max(eq), ("router", diff_key))
        self._room_hypothesis()

    def _room_hypothesis(self) -> None:
        """The claim that even the oracle is within the margin of the best fixed decision."""
        m = self.setting.margin
        if self.oracle:
            best = min(self.oracle.values(), key=lambda o: float(o["diff"]))  # the best fixed decision
            p = 0.0 if best["same"] else tost_p(best["data"][0], best["data"][2], m, seed=best.get("seed", 0))
            self.hyps["room"] = (("room", best["key"], m), p, ("oracle", best["key"]))

    def keys(self) -> list:
        return [k for k, _, _ in self.hyps.values()]

    # ------------------------------------------------------------------ deciding

    def decide(self, adjusted: dict, levels: dict, alpha: float) -> None:
        """The verdict from the family's adjusted p (``adjusted``) and levels, in place."""
        if not self.hyps:
            return
        if not self.alts:  # a tie too wide to test: only the room claim
            room = self.hyps["room"]
            if adjusted[room[0]] < alpha:
                self._room(levels[room[0]])
            return
        key = self.hyps["diff"][0]
        p_adj, lvl = adjusted[key], levels[key]
        self.row.update(p=self.hyps["diff"][1], p_holm=p_adj, level=lvl)
        kinds = {self._kind(cs, p_adj < alpha) for cs in self.alts}
        first = self._kind(self.alts[0], p_adj < alpha)
        # each router of a tie on its own (its p scaled as the cell's was): do they disagree?
        scale = p_adj / self.hyps["diff"][1] if self.hyps["diff"][1] > 0 else 1.0
        alone = {("same",) if all(c["same"] for c in cs) else self._kind(cs, _direction_p(cs) * scale < alpha)
                 for cs in self.alts}
        if len(kinds) == 1 and first[0] in ("deploy", "better"):  # every router of a tie agrees
            return self._different(first[0], self._decisive(self.alts[0], first[0]), lvl)
        room = self.hyps.get("room")
        if room is not None and adjusted[room[0]] < alpha and self._room(levels[room[0]]):
            return  # no router can gain what matters, whichever of a tie was chosen
        if len(kinds) > 1 or (len(alone) > 1 and first[0] == "open"):
            self._numbers(self._decisive(self.alts[0], first[0]), lvl)
            self.row.update(kind="cannot tell", verdict=f"cannot tell ({self.row['policy']}): the {len(self.alts)} "
                                                        "equally valid routers of a calibration tie reach different "
                                                        "verdicts")
            return
        eq = self.hyps["eq"][0]
        if adjusted[eq] < alpha and self._as_good(levels[eq]):
            return
        self._open(lvl)

    def _kind(self, cs: list[dict], rejected: bool) -> tuple[str, str]:
        if rejected and all(c["diff"] > 0 and not c["same"] for c in cs):
            return "deploy", ""
        trailing = [c for c in cs if c["diff"] < 0 and not c["same"]]
        if rejected and trailing:
            return "better", min(trailing, key=lambda c: c["p"])["arm"]
        return "open", ""

    @staticmethod
    def _decisive(cs: list[dict], kind: str) -> dict:
        if kind == "better":
            return min((c for c in cs if c["diff"] < 0 and not c["same"]), key=lambda c: c["p"])
        return max(cs, key=lambda c: c["p"])

    def _numbers(self, c: dict, lvl: float) -> tuple[float, float]:
        lo, hi = (0.0, 0.0) if c["same"] else sign_flip_interval(c["data"][0], c["data"][2], alpha=lvl,
                                                                  p_at_zero=c["p"], seed=c.get("seed", 0))
        o = self.oracle.get(c["arm"])
        self.row.update(arm=arm_name(c), equivalent=False, diff=c["diff"], diff_outcome=c["diff_outcome"], diff_cost=c["diff_cost"],
                        ci_low=lo, ci_high=hi, margin=self.margins.get(c["arm"], self.setting.margin),
                        headroom=float(o["diff"]) if o else math.nan, dataset_questions=c["n_questions"])
        return lo, hi

    def _parts(self, c: dict, sign: float) -> str:
        if c["cost_only"]:
            return " (cost alone: 0 discordant questions)"
        if abs(c["diff_cost"]) > 1e-12:
            return f" (outcome part {sign * c['diff_outcome']:+.4f}, cost part {sign * -c['diff_cost']:+.4f})"
        return ""

    def _different(self, kind: str, c: dict, lvl: float) -> None:
        lo, hi = self._numbers(c, lvl)
        r, f, row = self.row["policy"], arm_name(c), self.row
        at = f"at level {lvl:.2g}"
        if kind == "better":
            row.update(kind="no router", verdict=f"deploy no router: {f} is better than {r} by {_num(-c['diff'])} "
                                                 f"{_interval(-hi, -lo)} {at}{self._parts(c, -1.0)}")
            return
        text = (f"{r} beats {f} by {_num(c['diff'])} {_interval(lo, hi)} {at}{self._parts(c, 1.0)}, usage "
                f"{_num(row['usage'], 2)}, violations {row['violations']} of {row['splits']}")
        if row["flag"]:
            row.update(kind="over budget", verdict=f"over budget: {text}; but it {row['flag']} (the conservative "
                                                   "frontier's verdict: protocol.verdict_frontier=conservative)")
        else:
            row.update(kind="deploy", verdict=f"deploy {r}: {text}")

    def _room(self, lvl: float) -> bool:
        best = min(self.oracle.values(), key=lambda o: float(o["diff"]))
        m = self.setting.margin
        if best["same"]:
            lo = hi = 0.0
        else:
            lo, hi = equivalence_interval(best["data"][0], best["data"][2], alpha=lvl, p_at_zero=best["p"],
                                          seed=best.get("seed", 0))
            if not (math.isfinite(lo) and math.isfinite(hi) and -m < lo and hi < m):
                return False
        if self.alts:
            self._numbers(self._decisive(self.alts[0], "open"), self.row.get("level", lvl))
        else:  # a tie too wide to test: the oracle's claim is the only one decided
            self.row.update(level=lvl, arm=arm_name(best), headroom=float(best["diff"]))
        gain = (f"the oracle itself makes {arm_name(best)}'s decisions" if best["same"] else
                f"even the oracle gains only {_num(float(best['diff']))} {_interval(lo, hi)} over {arm_name(best)}, "
                f"within +-{m:g} at level {lvl:.2g}")
        self.row.update(kind="no router", equivalent=False, headroom=float(best["diff"]),
                        verdict=f"deploy no router: no room to route: {gain} (so {self.row['policy']} cannot gain "
                                "what matters)")
        return True

    def _as_good(self, lvl: float) -> bool:
        """Every equally valid router is equivalent to one fixed decision (or makes its
        decisions), its TOST interval at the family's level inside its margin."""
        found = []
        for cs in self.alts:
            hit = None
            for c in sorted(cs, key=lambda c: (not c["same"], c["arm_usage"])):
                m = self.margins.get(c["arm"], self.setting.margin)
                if c["same"]:
                    hit = (c, 0.0, 0.0, m)
                    break
                lo, hi = equivalence_interval(c["data"][0], c["data"][2], alpha=lvl, p_at_zero=c["p"],
                                              seed=c.get("seed", 0))
                if math.isfinite(lo) and math.isfinite(hi) and -m < lo and hi < m:
                    hit = (c, lo, hi, m)
                    break
            if hit is None:
                return False
            found.append(hit)
        c, lo, hi, m = found[0]
        self._numbers(c, self.row.get("level", lvl))
        why = "the same decisions" if c["same"] else (f"equivalent within +-{m:.2g} "
                                                       f"{_interval(lo, hi)} at level {lvl:.2g}")
        self.row.update(kind="no router", equivalent=True, ci_low=lo, ci_high=hi,
                        verdict=f"deploy no router: {arm_name(c)} is as good as {self.row['policy']} ({why})")
        return True

    def _open(self, lvl: float) -> None:
        c = max(self.alts[0], key=lambda c: c["p"])
        self._numbers(c, lvl)
        diffs, outcome, groups = c["data"]
        basis = outcome if c["discordant_questions"] > 0 else diffs
        plan = sample_size_plan(basis, groups, alpha=lvl, power=self.setting.power, n_questions=c["n_questions"])
        self.row.update(kind="cannot tell", plan_questions=plan["questions"],
                        verdict=f"cannot tell ({self.row['policy']} vs {arm_name(c)}): "
                                f"{plan_text(plan, c['n_questions'], lvl, self.setting.power)}")


def plan_text(plan: dict, have: int, level: float, power: float) -> str:
    """The plan in the dataset's questions at the verdict's level, or why there is none; a
    plan at or below the questions already here says why on the same line."""
    if plan["why"] or not math.isfinite(float(plan["questions"])):
        return f"no plan ({plan['why'] or 'no discordant document to plan from'})"
    n = int(plan["questions"])
    more = "more than" if plan["capped"] else "about"
    text = f"{more} {n:,} questions needed for {power:.0%} power at level {level:.2g} (here {have:,})"
    if n <= have:
        text += (f"; a sample that size has {power:.0%} power at the planned effect, so this one fell short by "
                 "chance or its effect is smaller")
    return text


def decide_all(cells: list[CellTest], alpha: float) -> None:
    """Decide every cell's claims in one step-down family (``stepdown_levels``: a cell's
    difference and equivalence claims share a slot, since at most one of their nulls can be
    true, the room claim is the oracle's own), a hypothesis met at several costs counted once with its
    largest p; then each cell's verdict."""
    p: dict = {}
    slot: dict = {}
    for cell in cells:
        for key, value, s in cell.hyps.values():
            p[key] = max(p.get(key, 0.0), value)
            slot[key] = s
    keys = list(p)
    adjusted, levels = stepdown_levels([p[k] for k in keys], [slot[k] for k in keys], alpha)
    adj = dict(zip(keys, map(float, adjusted)))
    lvl = dict(zip(keys, map(float, levels)))
    for cell in cells:
        cell.decide(adj, lvl, alpha)
