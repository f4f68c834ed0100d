"""Cost by router family (seed 003): what a routing policy costs per question, by what it must
compute before it can decide.

Why: two routers at the same usage can cost very different amounts. A router that reads only
the question decides for free; one that reads the no-retrieval answer's uncertainty must
generate that answer first (and keeps it when it skips retrieval); one that reads retrieval
scores must run a probe retrieval first (and reuses it when it retrieves); a full-feature router
pays both. Protocol B's per-question run probabilities (its deployable and exact rules on the
test halves) turn that into an expected cost per question, next to the outcome it buys.

For an answer pair (base ``no_retrieval``, extra ``rag_<retrieval arm>``), with per question
G0 the no-retrieval generation, G1 the RAG generation, R the probe retrieval (the retrieval
arm's ``cost.total_ms``; no tokens) and p the probability the rule retrieves:

| family | reads | expected cost |
| --- | --- | --- |
| query-only (also random, fixed decisions) | question features | (1 - p) G0 + p (R + G1) |
| uncertainty | the no-retrieval answer | G0 + p (R + G1) |
| retrieval-score | retrieval scores | R + (1 - p) G0 + p G1 |
| full | both | G0 + R + p G1 |
| post-generation | the RAG answer itself (e.g. seed 002's drop in entropy) | G0 + R + G1 |
| probe | the model's state on the memory and RAG prompts (seed 002's Internal Prober) | see below |
| probe-memory | the model's state on the memory prompt only | see below |
| oracle | the true outcome (an upper bound) | as query-only |

A probe processes prompts without decoding, and the answer it then chooses continues from its
processed prompt: in prompt tokens ``probe`` costs P0 + P1 (both prompts, after the retrieval)
and ``probe-memory`` P0 + p P1; in output tokens both cost (1 - p) O0 + p O1 (P, O: the prompt
and output tokens of G0, G1). Milliseconds are not measured split into prompt and output, so
for milliseconds ``probe`` is costed as ``post-generation`` (G0 + R + G1) and ``probe-memory``
as ``uncertainty`` (G0 + p (R + G1)): upper bounds, since a probe never decodes the answer it
does not keep. A probe's features read together with another family's are costed as the
dearer of the two (``probe-memory`` with uncertainty features: ``uncertainty``; with retrieval
scores: ``full``; ``probe`` with either: ``post-generation``).

in prompt tokens, output tokens and milliseconds (tokens are the same on every machine;
milliseconds are this machine's measurement, frozen in the cached blocks). The family follows
from the policy's declared features (``UNCERTAINTY`` and the retrieval feature sets of
``harness.retrieval.feature_names``). Protocol B is computed once per policy and seed
(``protocols.common.reused``), so this protocol costs only the bookkeeping.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.errors import ConfigError
from harness.protocols.common import fmt, text_table
from harness.protocols.registry import Protocol, ProtocolContext, ProtocolResult, Table
from harness.retrieval.feature_names import FEATURE_SETS, PROBE_MEMORY, PROBE_RAG
from harness.store_schema import TAG_ROUTER_FAMILY

UNITS = ("prompt_tokens", "output_tokens", "ms")
RETRIEVAL_FEATURES = frozenset(FEATURE_SETS["baseline"] + FEATURE_SETS["bm25"] + FEATURE_SETS["qpp"])


def router_family(policy) -> str:
    """The family a policy's pre-decision cost follows from (module docstring)."""
    if getattr(policy, "oracle", False):
        return "oracle"
    feats = set(getattr(policy, "features", ()) or ())
    if any(f.startswith("rag_") and "_unc_" in f for f in feats):  # a RAG answer's own features
        return "post-generation"
    unc = bool(feats & set(FEATURE_SETS["uncertainty"]))
    ret = bool(feats & RETRIEVAL_FEATURES)
    if any(f.startswith(PROBE_RAG[0][:-1]) for f in feats):
        return "post-generation" if unc or ret else "probe"
    if any(f.startswith(PROBE_MEMORY[0][:-1]) for f in feats) and not unc:
        return "full" if ret else "probe-memory"
    return "full" if unc and ret else "uncertainty" if unc else "retrieval-score" if ret else "query-only"


def expected_cost(family: str, p: np.ndarray, g0: np.ndarray, g1: np.ndarray, r: np.ndarray,
                  unit: str = "ms") -> np.ndarray:
    """Per question expected cost of one unit (module docstring's table)."""
    if family in ("probe", "probe-memory"):
        if unit == "prompt_tokens":
            return g0 + g1 if family == "probe" else g0 + p * g1
        if unit == "output_tokens":
            return (1 - p) * g0 + p * g1
        family = "post-generation" if family == "probe" else "uncertainty"  # milliseconds: the upper bound
    if family in ("query-only", "oracle"):
        return (1 - p) * g0 + p * (r + g1)
    if family == "uncertainty":
        return g0 + p * (r + g1)
    if family == "retrieval-score":
        return r + (1 - p) * g0 + p * g1
    if family == "full":
        return g0 + r + p * g1
    if family == "post-generation":  # both answers exist before it decides: it saves nothing
        return g0 + r + g1
    raise ValueError(f"unknown router family {family!r}")


def answer_pair_costs(table: pd.DataFrame, base: str, extra: str, qids) -> dict[str, tuple]:
    """{unit: (G0, G1, R)} per question, aligned with ``qids``."""
    if base != "no_retrieval" or not extra.startswith("rag_"):
        raise ConfigError("arms", f"the cost protocol needs an answer pair (arms.base=no_retrieval, "
                                  f"arms.extra=rag_<arm>), got {base} vs {extra}")
    retrieval = extra[len("rag_"):]
    rows = table.set_index("qid").loc[list(qids)]
    out = {}
    for unit in UNITS:
        col = "total_ms" if unit == "ms" else unit
        g0 = rows[f"{base}.cost.{col}"].astype(float).to_numpy()
        g1 = rows[f"{extra}.cost.{col}"].astype(float).to_numpy()
        r = rows[f"{retrieval}.cost.total_ms"].astype(float).to_numpy() if unit == "ms" else np.zeros(len(rows))
        out[unit] = (g0, g1, r)
    return out


def check_answer_pair(cfg, protocol: str, hint: str = "") -> None:
    """A ConfigError on ``protocol.run`` unless the job routes between answering from memory and
    RAG (arms.base = no_retrieval, arms.extra = rag_<arm>): what the cost families are defined on."""
    arms = cfg.get("arms") or {}
    base, extra = str(arms.get("base", "keep")), str(arms.get("extra", "hybrid"))
    if base != "no_retrieval" or not extra.startswith("rag_"):
        raise ConfigError("protocol.run", f"protocol '{protocol}' needs an answer pair, memory vs RAG "
                                          f"(arms=noret_rag: no_retrieval vs rag_<arm>), got {base} vs {extra}{hint}")


class CostProtocol(Protocol):
    """Expected cost per question of the policy's budget rules, by its router family."""

    name = "cost"

    def check(self, cfg) -> None:
        check_answer_pair(cfg, "cost", "; use protocol=all for this pair")

    def run(self, task, factory, ctx: ProtocolContext) -> ProtocolResult:
        from harness.protocols.builtin import BudgetProtocol

        if ctx.table is None:
            raise ConfigError("protocol.run", "the cost protocol needs the outcome table's cost columns")
        family = router_family(factory())
        budget = BudgetProtocol().run(task, factory, ctx).raw  # reused: computed once per policy and seed
        costs = answer_pair_costs(ctx.table, task.base_arm, task.extra_arm, task.qids)
        position = {q: i for i, q in enumerate(task.qids)}
        rows = []
        decisions = budget.decisions
        decisions = decisions[decisions["frontier"].isin(["exact", "deployable", "fixed"])]
        for (split, rho, frontier), g in decisions.groupby(["split", "budget", "frontier"], dropna=False, sort=True):
            idx = np.array([position[q] for q in g["qid"]])
            p = g["prob"].astype(float).to_numpy()
            outcome = (1 - p) * g["base"].astype(float).to_numpy() + p * g["extra"].astype(float).to_numpy()
            row = {"split": split, "budget": rho, "frontier": frontier, "family": family,
                   "usage": float(p.mean()), "outcome": float(outcome.mean())}
            for unit, (g0, g1, r) in costs.items():
                row[unit] = float(expected_cost(family, p, g0[idx], g1[idx], r[idx], unit).mean())
            rows.append(row)
        per_split = pd.DataFrame(rows)
        table = (per_split.groupby(["frontier", "budget"], dropna=False, sort=True)
                 [["usage", "outcome", *UNITS]].mean().reset_index())
        table.insert(0, "family", family)
        metrics: dict[str, float] = {}
        series: list[tuple[str, float, int]] = []
        for _, r in table.iterrows():
            if r["frontier"] == "fixed":
                prefix = "cost/fixed"
            else:
                prefix = f"cost/{float(r['budget']):g}/{r['frontier']}"
            for unit in UNITS:
                metrics[f"{prefix}/{unit}"] = float(r[unit])
            if r["frontier"] == "deployable":
                step = int(round(float(r["budget"]) * 100))
                series += [(f"cost_frontier/deployable/{unit}", float(r[unit]), step) for unit in UNITS]
        summary = text_table(
            [f"cost by router family: {family}", "usage", task.metric, "prompt tok", "output tok", "ms"],
            [[f"{r['frontier']} @ {fmt(float(r['budget']))}" if r["frontier"] != "fixed" else "fixed decision",
              r["usage"], r["outcome"], r["prompt_tokens"], r["output_tokens"], r["ms"]] for _, r in table.iterrows()],
        )
        return ProtocolResult(
            metrics=metrics, summary=summary, series=series, tags={TAG_ROUTER_FAMILY: family},
            tables={"cost_by_family": Table(table, preview=True)}, raw=table,
        )
