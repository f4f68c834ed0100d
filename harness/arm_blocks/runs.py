"""Run files as arms: ``arms.runs: {NAME: PATH}`` (docs/own_arms.md).

Why: a team's own retriever (Elasticsearch, a vendor's search, a fine-tuned dense model) is
routed against the harness's arms without writing code: its TREC run file becomes an arm of the
outcome table, scored against the dataset's gold units with the same definitions as the
harness's own arms (``harness.retrieval.ranking_metrics``, equal to trec_eval's numbers). Each
run is one arm block (``run_<NAME>``): it needs no other block's column, and its key holds the
run file's content hash (and the cost sidecar's), never its path, so a changed file rebuilds
the arm and a moved one does not.

Columns, for arm NAME and depth k = ``arms.k``:

- outcomes: ``NAME.hit@1..k``, ``NAME.recall@1..k``, ``NAME.all@1..k``, ``NAME.mrr@k``,
  ``NAME.ndcg@k``, ``NAME.first_gold_rank``; the ranking ``NAME.top<k>`` and its scores
  ``NAME.scores<k>``; ``NAME.n_retrieved`` (0: the query is absent from the run, an empty
  ranking that scores 0 on every metric);
- cost (only when configured): ``NAME.cost.total_ms`` (``unit: ms``) or ``NAME.cost.tokens``
  (``unit: tokens``), from a number (every question the same) or a sidecar ``qid cost`` file;
- features from the run's own scores (all the scores it gave the query, not only the top k),
  with the harness's own functions (``harness.retrieval.features``): ``feat.run_NAME_top1``,
  ``feat.run_NAME_margin12`` and the QPP predictors ``feat.run_NAME_qpp_<wig|uwig|nqc|qc|smv|usmv>``
  over the top ``arms.qpp_k``, the run's returned list standing for the pool (its mean score is
  the corpus score C). An empty ranking gives NaN features (policies impute them).

What is skipped is counted, what cannot be meant is refused (``harness.data.trec_run`` refuses
malformed lines): run lines of queries that are not questions of the table are skipped (a run
over every query of the corpus, a split is a subset), a docid the corpus lacks stays in the
ranking and is never relevant (as trec_eval sees it); a run none of whose queries is a question,
or none of whose docids is in the corpus, is refused (the files do not belong together).
"""

from __future__ import annotations

import math
import re
from numbers import Real
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from harness.arm_blocks import ArmBlock
from harness.data.trec_run import Run, read_costs, read_run
from harness.data.validate import read_bytes
from harness.errors import ConfigError, DataError
from harness.io import sha256_bytes
from harness.retrieval.feature_names import QPP_BASE
from harness.retrieval.features import QPP_TOP_K, bm25_features, qpp
from harness.retrieval.ranking_metrics import ranking_outcomes

KEY = "arms.runs"
_PARSED: dict[tuple[str, str], Run] = {}  # the last run files parsed, by (path, content hash)
KEPT_RUNS = 4
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
COST_COLUMNS = {"ms": "total_ms", "tokens": "tokens"}  # cost unit -> the cost column harness.app reads


def feature_names(arm: str) -> tuple[str, ...]:
    """The ``feat.`` names (without the prefix) a run arm writes."""
    return (f"run_{arm}_top1", f"run_{arm}_margin12", *(f"run_{arm}_qpp_{p}" for p in QPP_BASE))


class RunFileArm(ArmBlock):
    """One run file as the arm ``arm`` (module docstring)."""

    requires = ()
    version = "1"
    chunk_size = 1 << 30  # one chunk: computing a run's metrics takes well under a second

    def __init__(self, arm: str, path: str, k: int = 10, qpp_k: int = QPP_TOP_K, cost: Any = None,
                 unit: str = "ms"):
        self.arm, self.path, self.k, self.qpp_k, self.cost, self.unit = arm, str(path), int(k), int(qpp_k), cost, unit
        self.name = f"run_{arm}"
        self.arms = (arm,)
        self.feature_sets = {f"run_{arm}": feature_names(arm)}
        self.sha256 = sha256_bytes(read_bytes(Path(self.path).expanduser(), "run file"))
        self.cost_sha256 = (sha256_bytes(read_bytes(Path(str(cost)).expanduser(), "cost file"))
                            if isinstance(cost, str) else None)
        self._counts: dict | None = None

    def identity(self) -> dict[str, Any]:
        """The contents, never the paths: a changed file rebuilds, a moved one does not."""
        cost = {"sidecar_sha256": self.cost_sha256} if self.cost_sha256 else self.cost
        return {"class": f"{type(self).__module__}.{type(self).__qualname__}", "version": self.version,
                "arm": self.arm, "k": self.k, "qpp_k": self.qpp_k, "run_sha256": self.sha256,
                "cost": cost, "unit": self.unit if cost is not None else None}

    def built_with(self) -> dict | None:
        return self._counts

    def read(self) -> Run:
        """The run file parsed (kept per content, so the pre-flight check and the build parse it once)."""
        key = (str(Path(self.path).expanduser().resolve()), self.sha256)
        if key not in _PARSED:
            while len(_PARSED) >= KEPT_RUNS:  # a large run holds a few hundred MB of tuples
                _PARSED.pop(next(iter(_PARSED)))
            _PARSED[key] = read_run(self.path)
        return _PARSED[key]

    def check_files(self) -> None:
        """Every line of the run (and of the cost sidecar) read now: a bad line is refused before
        any table is built (docs/own_arms.md)."""
        self.read()
        if isinstance(self.cost, str):
            read_costs(self.cost)

    def compute(self, rows: pd.DataFrame, dataset: Any) -> pd.DataFrame:
        if dataset is None or not getattr(dataset, "questions", None):
            raise ConfigError(f"{KEY}.{self.arm}", "a run file is scored against a dataset's gold passages: use a "
                                                   "real dataset (e.g. dataset=beir dataset.path=DIR), not the "
                                                   "synthetic table")
        run = self.read()
        if run.sha256 != self.sha256:
            raise DataError(run.name, None, "changed while the table was built; run the command again")
        gold = {q.qid: {str(u) for u in q.gold_unit_ids} for q in dataset.questions}
        self._counts = check_against(run, gold, {u.unit_id for units in dataset.documents.values() for u in units})
        costs = self._costs([str(q) for q in rows["qid"]])
        out: dict[str, list] = {"qid": list(rows["qid"])}
        records = [self._row(run.rankings.get(str(q), []), gold.get(str(q), set())) for q in rows["qid"]]
        for name in records[0] if records else ():
            out[name] = [r[name] for r in records]
        if costs is not None:
            out[f"{self.arm}.cost.{COST_COLUMNS[self.unit]}"] = costs
        print(f"[route-bench] run file {run.name} as arm {self.arm}: " + ", ".join(
            f"{k.replace('_', ' ')} {v}" for k, v in self._counts.items() if k != "file"), flush=True)
        return pd.DataFrame(out)

    def _row(self, docs: list[tuple[str, float]], gold: set[str]) -> dict[str, Any]:
        arm, k = self.arm, self.k
        ranked = [d for d, _ in docs]
        scores = np.array([s for _, s in docs], dtype=np.float64)
        row: dict[str, Any] = {f"{arm}.{m}": v for m, v in ranking_outcomes(ranked, gold, k).items()}
        row[f"{arm}.top{k}"] = ranked[:k]
        row[f"{arm}.scores{k}"] = [float(s) for s in scores[:k]]
        row[f"{arm}.n_retrieved"] = len(ranked)
        top = bm25_features(scores)
        row[f"feat.run_{arm}_top1"] = top["bm25_top1"]
        row[f"feat.run_{arm}_margin12"] = top["bm25_margin12"]
        for p, v in qpp(scores, self.qpp_k).items():
            row[f"feat.run_{arm}_qpp_{p}"] = float(v)
        return row

    def _costs(self, qids: list[str]) -> list[float] | None:
        if self.cost is None:
            return None
        if not isinstance(self.cost, str):
            return [float(self.cost)] * len(qids)
        costs, digest = read_costs(self.cost)
        if digest != self.cost_sha256:
            raise DataError(Path(self.cost).name, None, "changed while the table was built; run the command again")
        missing = [q for q in qids if q not in costs]
        if missing:
            raise DataError(Path(self.cost).name, "qid", f"gives no cost for {len(missing)} question(s) of the table "
                                                         f"(first: {missing[0]!r}); every question needs one")
        return [costs[q] for q in qids]


def check_against(run: Run, gold: Mapping[str, set[str]], corpus: set[str]) -> dict[str, Any]:
    """What of ``run`` the table uses (counts), or a DataError when nothing of it belongs to the
    dataset: none of its queries is a question, or none of its docids is in the corpus."""
    used = [q for q in run.rankings if q in gold]
    if not used:
        first = min(run.lines.values())
        qid = next(q for (q, _), n in run.lines.items() if n == first)
        raise DataError(f"{run.name}:{first}", "qid", f"{qid!r} is not a question of the dataset, and neither is any "
                                                      f"other of the run's {len(run.rankings)} query id(s): is this a "
                                                      "run over this dataset's queries?")
    docs = [(d, run.lines[(q, d)]) for q in used for d, _ in run.rankings[q]]
    unknown = [(d, n) for d, n in docs if d not in corpus]
    if len(unknown) == len(docs):
        raise DataError(f"{run.name}:{min(n for _, n in unknown)}", "docid",
                        f"no docid of the run's {len(docs)} line(s) for the dataset's questions is in the corpus "
                        f"(e.g. {unknown[0][0]!r}): is this a run over this corpus?")
    return {"file": run.name, "questions": len(gold), "questions_in_run": len(used),
            "questions_absent_from_run": len(gold) - len(used),
            "run_queries_not_in_table": len(run.rankings) - len(used),
            "lines_of_queries_not_in_table": len(run.lines) - len(docs),
            "docids_not_in_corpus": len(unknown)}


# ---- the config ---------------------------------------------------------------------------------
def _spec(name: str, value: Any) -> dict[str, Any]:
    """``arms.runs.NAME``: a path, or {path, cost, unit}; a ConfigError names the key."""
    key = f"{KEY}.{name}"
    if isinstance(value, str):
        value = {"path": value}
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"expected a run file's path or a mapping {{path, cost, unit}}, got {value!r}")
    extra = sorted(set(value) - {"path", "cost", "unit"})
    if extra:
        raise ConfigError(f"{key}.{extra[0]}", "unknown key; a run's keys are path, cost (a number or a file of "
                                               "'qid cost' lines) and unit (ms or tokens)")
    path = value.get("path")
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"{key}.path", f"expected the run file's path, got {path!r}")
    cost, unit = value.get("cost"), value.get("unit", "ms")
    if unit not in COST_COLUMNS:
        raise ConfigError(f"{key}.unit", f"expected one of {', '.join(COST_COLUMNS)}, got {unit!r}")
    if isinstance(cost, bool) or not (cost is None or isinstance(cost, (str, Real))):
        raise ConfigError(f"{key}.cost", f"expected a number >= 0 or a cost file's path, got {cost!r}")
    if isinstance(cost, Real) and not (math.isfinite(float(cost)) and float(cost) >= 0):
        raise ConfigError(f"{key}.cost", f"expected a finite number >= 0, got {cost!r}")
    return {"path": path, "cost": cost, "unit": unit}


def run_specs(arms_cfg: Mapping) -> dict[str, dict[str, Any]]:
    """{arm: {path, cost, unit}} of ``arms.runs`` (empty without it); names and values checked."""
    runs = arms_cfg.get("runs") or {}
    if not isinstance(runs, Mapping):
        raise ConfigError(KEY, f"expected a mapping NAME: PATH (e.g. arms.runs={{es: es.run}}), got {runs!r}")
    from harness.retrieval.arms import ARMS

    out = {}
    for name, value in runs.items():
        name = str(name)
        if not NAME_RE.match(name):
            raise ConfigError(f"{KEY}.{name}", "an arm's name starts with a letter and holds only letters, digits, "
                                               "'_' and '-' (it names the table's columns NAME.<metric>)")
        if name in ARMS:
            raise ConfigError(f"{KEY}.{name}", f"{name!r} is one of the harness's own arms ({', '.join(ARMS)}); "
                                               "name the run otherwise")
        out[name] = _spec(name, value)
    return out


def run_blocks(arms_cfg: Mapping) -> list[RunFileArm]:
    """One block per run of ``arms.runs``; an unreadable run or cost file is a DataError naming it."""
    k, qpp_k = int(arms_cfg.get("k", 10)), int(arms_cfg.get("qpp_k", QPP_TOP_K))
    return [RunFileArm(name, s["path"], k=k, qpp_k=qpp_k, cost=s["cost"], unit=s["unit"])
            for name, s in run_specs(arms_cfg).items()]


def run_cost_column(arms_cfg: Mapping, pair: tuple[str, str]) -> str | None:
    """The cost column (``total_ms`` or ``tokens``) of the first arm of ``pair`` that is a run
    with a configured cost, else None (the routing task reads ``<arm>.cost.<column>``)."""
    specs = run_specs(arms_cfg)
    units = [specs[a]["unit"] for a in pair if a in specs and specs[a]["cost"] is not None]
    return COST_COLUMNS[units[0]] if units else None
