"""The four retrieval arms behind one interface, computed for a shard of pools at once.

Arms (docs/metrics.md §2): ``keep`` (dense top-``candidates`` -> rerank -> top k), ``hybrid`` (BM25
and dense rankings over the whole pool fused by RRF -> top-``candidates`` fused -> rerank -> top
k; a NEW top k that can lose a keep hit), ``bm25`` (BM25 top k, no rerank) and ``dense`` (dense
top k, no rerank). ``keep`` is the base arm for marginal costs.

Efficiency: each unit of a shard is encoded once, all questions of the shard once; reranker
scores are cached per (question, unit) so hybrid only scores the pairs keep did not, and all
pairs of one arm are scored in one reranker call per block of questions (a block is sized so that
its pool-sized arrays stay bounded on a global pool: ``QUESTION_BLOCK_CELLS``; a question's pairs
are always in one call, so its numbers do not depend on the block). Dense search is exact by
default or faiss HNSW (``harness.retrieval.dense_index``, its recall against exact search measured).

Numbers independent of batching: ``DenseEncoder.encode`` runs forward passes over texts of one
token length only (``harness.retrieval.encoder``), so a text's numbers depend on neither its shard,
batch nor pass order. 40 qasper_yesno questions (2,571 units) built with shard sizes 8, 16, 25:
padded batches changed 12 of 105 non-timing columns (up to 2.9e-6); now all are bit-identical.

Cost accounting (milliseconds per question; measured wall time, so it varies between builds;
the cached table freezes one measurement):
- ``encode_ms``: this question's share of encoding: the shard's unit-encoding time is split over
  units by token count, a unit's share over the pools that contain it, a pool's share evenly
  over its questions; plus the question's token share of the question-encoding call; plus its
  dense similarity search (dot products and sort).
- ``bm25_ms``: the pool's BM25 index build split evenly over its questions, plus scoring.
- ``fusion_ms``: RRF and its sort. ``rerank_ms``: per pair, a reranker call's time divided by its
  pairs; an arm's stand-alone rerank cost is the sum over all its candidate pairs (including
  pairs whose score it reused). ``rerank_pairs``: candidate pairs the arm needs stand-alone.
- ``marginal``: the work an arm adds once keep has run: stages keep does not run (BM25, fusion)
  plus pairs outside keep's candidates. keep's marginal is 0 by definition.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from harness import progress
from harness.data.schema import Dataset, Question
from harness.retrieval.bm25 import BM25Params, BM25Pool
from harness.retrieval.dense_index import DenseIndexParams, HNSWIndex, exact_scores, recall_at
from harness.retrieval.features import QPP_TOP_K, all_features
from harness.retrieval.feature_names import FEATURE_SETS, column
from harness.retrieval.fusion import RRF_K, order_by_score, rank_order, rrf_scores
from harness.retrieval.rerankers import RerankInputs

ARMS = ("keep", "hybrid", "bm25", "dense")
BASE_ARM = "keep"
COST_FIELDS = ("encode_ms", "bm25_ms", "fusion_ms", "rerank_ms", "total_ms", "rerank_pairs")


@dataclass(frozen=True)
class ArmParams:
    k: int = 10
    candidates: int = 30
    rrf_k: int = RRF_K
    bm25: BM25Params = BM25Params()
    qpp_k: int = QPP_TOP_K
    dense: DenseIndexParams = DenseIndexParams()


@dataclass
class QuestionState:
    """Everything the arms share for one question (indices are positions in its pool)."""

    qi: int  # index into the shard's questions
    question: Question
    pool_units: np.ndarray  # shard unit index of each pool position
    dense: np.ndarray
    dense_order: np.ndarray
    bm25: np.ndarray
    bm25_order: np.ndarray
    encode_ms: float
    bm25_ms: float
    fusion_ms: float = 0.0
    fused_order: np.ndarray | None = None
    dense_corpus: float | None = None  # HNSW: the exact mean score over the pool (dense_index.py)


@dataclass
class ArmResult:
    arm: str
    ranked: list[str]  # unit ids, best first, at most k
    scores: list[float]  # the arm's final scores (rerank score, BM25 score or cosine)
    outcome: dict[str, float]
    cost: dict[str, float]
    marginal: dict[str, float]
    candidates: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=int))  # pool positions


def outcome(ranked: Sequence[str], gold: set[str], k: int) -> dict[str, float]:
    """hit@1..k, recall@k, mrr@k, first gold rank (NaN when none in top k). Without gold: hits 0,
    the rest NaN (such questions are excluded from hit metrics, docs/metrics.md §1)."""
    top = list(ranked)[:k]
    first = next((r for r, u in enumerate(top, start=1) if u in gold), None)
    out: dict[str, float] = {f"hit@{j}": int(first is not None and first <= j) for j in range(1, k + 1)}
    if not gold:
        out.update({f"recall@{k}": float("nan"), f"mrr@{k}": float("nan"), "first_gold_rank": float("nan")})
        return out
    out[f"recall@{k}"] = len(gold & set(top)) / len(gold)
    out[f"mrr@{k}"] = 1.0 / first if first else 0.0
    out["first_gold_rank"] = float(first) if first else float("nan")
    return out


class PairScores:
    """Reranker scores and per-pair cost, cached per (question, unit) for one shard."""

    def __init__(self, reranker, inputs: RerankInputs):
        self.reranker = reranker
        self.inputs = inputs
        self.score: dict[tuple[int, int], float] = {}
        self.ms: dict[tuple[int, int], float] = {}
        self.calls = 0
        self.scored = 0  # pairs scored over the shard (scores of finished questions are forgotten)

    def ensure(self, pairs: Sequence[tuple[int, int]], questions: int = 0) -> int:
        """Score the pairs not yet cached in ONE reranker call; returns how many were new.
        ``questions``: the questions whose pairs these are first (the stage's declared work)."""
        new = list(dict.fromkeys(p for p in pairs if p not in self.score))
        eta = progress.current("pairs")
        eta.expect(len(new), items=questions)
        if not new:
            return 0
        t0 = time.perf_counter()
        ticked = eta.work_done
        s = self.reranker.score(self.inputs, new)
        per_pair = (time.perf_counter() - t0) * 1000.0 / len(new)
        eta.tick(0, work=max(0.0, len(new) - (eta.work_done - ticked)))  # the pairs the reranker did not tick
        self.calls += 1
        for p, v in zip(new, s):
            self.score[p] = float(v)
            self.ms[p] = per_pair
        self.scored += len(new)
        return len(new)

    def forget(self, questions: set[int]) -> None:
        """Drop the pairs of finished questions (a block of a large pool is done with them)."""
        for key in [k for k in self.score if k[0] in questions]:
            del self.score[key], self.ms[key]


class Arm:
    """An arm: which shared stages it uses, and how it ranks the pool for one question."""

    name = ""
    stages: tuple[str, ...] = ()
    reranks = False

    def candidates(self, q: QuestionState, params: ArmParams) -> np.ndarray:
        raise NotImplementedError

    def base_scores(self, q: QuestionState) -> np.ndarray:
        raise NotImplementedError


class KeepArm(Arm):
    name, stages, reranks = "keep", ("encode", "rerank"), True

    def candidates(self, q, params):
        return q.dense_order[: params.candidates]


class HybridArm(Arm):
    name, stages, reranks = "hybrid", ("encode", "bm25", "fusion", "rerank"), True

    def candidates(self, q, params):
        if q.fused_order is None:
            t0 = time.perf_counter()
            fused = rrf_scores([q.dense_order, q.bm25_order], len(q.dense), params.rrf_k)
            q.fused_order = rank_order(fused)
            q.fusion_ms = (time.perf_counter() - t0) * 1000.0
        return q.fused_order[: params.candidates]


class BM25Arm(Arm):
    name, stages = "bm25", ("bm25",)

    def candidates(self, q, params):
        return q.bm25_order[: params.k]

    def base_scores(self, q):
        return q.bm25


class DenseArm(Arm):
    name, stages = "dense", ("encode",)

    def candidates(self, q, params):
        return q.dense_order[: params.k]

    def base_scores(self, q):
        return q.dense


ARM_CLASSES: dict[str, type[Arm]] = {"keep": KeepArm, "hybrid": HybridArm, "bm25": BM25Arm, "dense": DenseArm}


def run_arm(arm: Arm, q: QuestionState, pairs: PairScores, params: ArmParams, unit_ids: Sequence[str],
            keep_candidates: np.ndarray | None) -> ArmResult:
    """Rank, score and cost one arm on one question (rerank pairs must already be ensured)."""
    cands = arm.candidates(q, params)
    if arm.reranks:
        ranked_pos, final_scores, rerank = _reranked(q, pairs, params, cands, keep_candidates)
    else:
        ranked_pos = cands[: params.k]
        base = arm.base_scores(q)
        final_scores = [float(base[c]) for c in ranked_pos]
        rerank = _Rerank()
    cost = _stage_costs(arm, q, rerank)
    ranked_ids = [unit_ids[int(q.pool_units[c])] for c in ranked_pos]
    gold = set(q.question.gold_unit_ids)
    return ArmResult(arm.name, ranked_ids, [float(x) for x in final_scores], outcome(ranked_ids, gold, params.k),
                     cost, _marginal(arm, cost, rerank), np.asarray(cands))


@dataclass
class _Rerank:
    """What reranking an arm's candidates cost: all its pairs, and those keep did not score."""

    ms: float = 0.0
    pairs: int = 0
    marginal_pairs: int = 0
    marginal_ms: float = 0.0


def _reranked(q: QuestionState, pairs: PairScores, params: ArmParams, cands: np.ndarray,
              keep_candidates: np.ndarray | None) -> tuple[Sequence, list, _Rerank]:
    """The top ``k`` of the candidates by their (already scored) rerank pairs, their scores, and
    the pairs' cost, in all and beyond keep's candidates."""
    keys = [(q.qi, int(q.pool_units[c])) for c in cands]
    s = np.array([pairs.score[k] for k in keys], dtype=np.float64)
    ranked_pos = order_by_score(cands, s)[: params.k]
    by_pos = dict(zip((int(c) for c in cands), s))
    final_scores = [by_pos[int(c)] for c in ranked_pos]
    keep_set = set() if keep_candidates is None else {int(c) for c in keep_candidates}
    new_keys = [k for c, k in zip(cands, keys) if int(c) not in keep_set]
    return ranked_pos, final_scores, _Rerank(sum(pairs.ms[k] for k in keys), len(keys), len(new_keys),
                                             sum(pairs.ms[k] for k in new_keys))


def _stage_costs(arm: Arm, q: QuestionState, rerank: _Rerank) -> dict:
    """The arm's cost on the question: the time of each stage it runs, and its rerank pairs."""
    cost = {
        "encode_ms": q.encode_ms if "encode" in arm.stages else 0.0,
        "bm25_ms": q.bm25_ms if "bm25" in arm.stages else 0.0,
        "fusion_ms": q.fusion_ms if "fusion" in arm.stages else 0.0,
        "rerank_ms": rerank.ms,
        "rerank_pairs": rerank.pairs,
    }
    cost["total_ms"] = cost["encode_ms"] + cost["bm25_ms"] + cost["fusion_ms"] + cost["rerank_ms"]
    return cost


def _marginal(arm: Arm, cost: dict, rerank: _Rerank) -> dict:
    """What the arm costs beyond the base arm: its extra stages and the rerank pairs keep did not score."""
    if arm.name == BASE_ARM:
        return {"total_ms": 0.0, "rerank_pairs": 0}
    extra_stages = set(arm.stages) - set(KeepArm.stages)
    return {
        "total_ms": sum(cost[f"{s}_ms"] for s in extra_stages if s != "rerank") + rerank.marginal_ms,
        "rerank_pairs": rerank.marginal_pairs,
    }


def batch_independent(encoder) -> bool:
    """True when ``encoder.encode`` gives each text numbers that depend on that text alone.

    The packaged :class:`DenseEncoder` in fp32 (proven by tests/test_batching.py); bf16 is not
    proven, so it is False there. Another encoder (a test fake, a plugin) says so with a
    ``batch_independent = True`` attribute.
    """
    from harness.retrieval.encoder import DenseEncoder

    if isinstance(encoder, DenseEncoder):
        return encoder.precision == "fp32"
    return bool(getattr(encoder, "batch_independent", False))


QUESTION_BLOCK_CELLS = 20_000_000  # questions per block x units of the largest pool (about 160 MB per array kind)


def _question_state(qi, q, pool_pos, unit_vectors, q_vector, pool_bm25, pool_encode_ms, pool_bm25_ms, q_ms,
                    hnsw) -> "QuestionState":
    """Dense search and BM25 scoring of one question over its pool (see dense_index.py)."""
    pos = pool_pos[q.pool_id]
    t0 = time.perf_counter()
    corpus = None
    if q.pool_id in hnsw:
        index = hnsw[q.pool_id]
        found, found_scores = index.search(q_vector[None, :])[0]
        dense = np.full(len(pos), np.nan)
        dense[found] = found_scores
        dense_order = found
        corpus = index.corpus_score(q_vector)
    else:
        dense = exact_scores(unit_vectors[pos], q_vector)
        dense_order = rank_order(dense)
    dense_ms = (time.perf_counter() - t0) * 1000.0
    t0 = time.perf_counter()
    bm = pool_bm25[q.pool_id].scores(q.text)
    bm_order = rank_order(bm)
    bm_ms = (time.perf_counter() - t0) * 1000.0
    return QuestionState(qi, q, pos, dense, dense_order, bm, bm_order,
                         encode_ms=pool_encode_ms[q.pool_id] + q_ms + dense_ms,
                         bm25_ms=pool_bm25_ms[q.pool_id] + bm_ms, dense_corpus=corpus)


def _row(s: QuestionState, arm_objs, pairs: PairScores, params: ArmParams, unit_ids, units, uidx) -> dict:
    """One question's row: every arm's ranking, outcome and cost, and the router features."""
    q = s.question
    row: dict = {"qid": q.qid, "doc_id": q.doc_id, "pool_id": q.pool_id,
                 "has_evidence": bool(q.has_evidence), "n_gold": len(q.gold_unit_ids)}
    keep_cands = arm_objs["keep"].candidates(s, params)
    results = {name: run_arm(arm, s, pairs, params, unit_ids, keep_cands) for name, arm in arm_objs.items()}
    for name in ARMS:
        r = results[name]
        for key, v in r.outcome.items():
            row[f"{name}.{key}"] = v
        row[f"{name}.top{params.k}"] = r.ranked
        row[f"{name}.scores{params.k}"] = r.scores
        for key in COST_FIELDS:
            row[f"{name}.cost.{key}"] = r.cost[key]
        row[f"{name}.marginal.total_ms"] = r.marginal["total_ms"]
        row[f"{name}.marginal.rerank_pairs"] = r.marginal["rerank_pairs"]
    keep_top_pos = [int(np.flatnonzero(s.pool_units == uidx[u])[0]) for u in results["keep"].ranked]
    kinds = _KindsOf(units, s.pool_units)
    feats = all_features(q.text, s.dense, s.dense_order, s.bm25, keep_top_pos, kinds, params.qpp_k,
                         dense_corpus=s.dense_corpus)
    for name in FEATURE_SETS["all"]:
        row[column(name)] = float(feats[name])
    return row


class _KindsOf:
    """``kinds[i]``: the kind of the unit at pool position i, without a pool-sized list per question."""

    def __init__(self, units, pool_units):
        self.units, self.pool_units = units, pool_units

    def __getitem__(self, i: int) -> str:
        return self.units[int(self.pool_units[i])].kind


@dataclass
class ShardStats:
    units: int = 0
    questions: int = 0
    encoder_calls: int = 0
    reranker_calls: int = 0
    rerank_pairs_scored: int = 0


def compute_shard(
    dataset: Dataset,
    pool_ids: Sequence[str],
    encoder,
    reranker,
    params: ArmParams,
    on_pools_encoded: Callable[[int], None] | None = None,
) -> tuple[list[dict], ShardStats]:
    """Rows of the outcome table for every question whose pool is in ``pool_ids``."""
    questions, unit_ids, uidx, units = _shard_contents(dataset, pool_ids)
    stats = ShardStats(units=len(units), questions=len(questions))

    # 1. encode questions, 2. BM25 index per pool (its build time shared by the pool's questions),
    # 3. encode units once. The passages last: a long build's last long stage, measured in its lines
    with progress.stage("encoding questions", len(questions), "texts"):  # lines only: no number moves
        enc_q = encoder.encode([q.text for q in questions])
    q_ms = _apportioned_ms(enc_q, len(questions))
    n_pools_of_unit, q_per_pool = _pool_counts(dataset, pool_ids, questions, uidx, len(units))
    pool_pos, pool_bm25, pool_bm25_ms = _index_pools(dataset, pool_ids, units, uidx, q_per_pool, params)
    with progress.stage("encoding passages", len(units), "texts"):
        enc_u = encoder.encode([u.text for u in units])
    unit_ms = _apportioned_ms(enc_u, len(units))
    if on_pools_encoded:
        on_pools_encoded(len(pool_ids))
    stats.encoder_calls = 2
    pool_encode_ms = {p: float((unit_ms[pos] / n_pools_of_unit[pos]).sum()) / q_per_pool[p] if len(pos) else 0.0
                      for p, pos in pool_pos.items()}

    # 4-6 per block of questions (memory: a few pool-sized arrays per question of the block)
    hnsw = _hnsw_indexes(pool_pos, pool_encode_ms, q_per_pool, enc_u.vectors, params)
    step = max(1, -(-len(questions) // max(1, params.dense.recall_sample)))
    inputs = RerankInputs([q.text for q in questions], enc_q.tokens, [u.text for u in units], enc_u.tokens)
    pairs = PairScores(reranker, inputs)
    arm_objs = {name: cls() for name, cls in ARM_CLASSES.items()}
    largest = max((len(v) for v in pool_pos.values()), default=1)
    block = max(16, min(512, QUESTION_BLOCK_CELLS // max(1, largest)))
    rows: list[dict] = []
    search = progress.child_of_current("dense and BM25 search", len(questions), "questions")
    rerank = progress.child_of_current("reranking", len(questions), "questions", "pairs")
    for start in range(0, len(questions), block):
        states = []
        with search.active():
            for qi in range(start, min(start + block, len(questions))):
                states.append(_question_state(qi, questions[qi], pool_pos, enc_u.vectors, enc_q.vectors[qi],
                                              pool_bm25, pool_encode_ms, pool_bm25_ms, float(q_ms[qi]), hnsw))
                search.tick(1)
        with rerank.active():
            _rerank_block(states, arm_objs, pairs, params)  # 5.
            for s in states:  # 6. rows
                row = _row(s, arm_objs, pairs, params, unit_ids, units, uidx)
                if hnsw:
                    row["dense.recall@10_vs_exact"] = _recall_vs_exact(s, enc_u.vectors, enc_q.vectors, step)
                rows.append(row)
            rerank.advance(len(states), work=0)
        pairs.forget({s.qi for s in states})
    stats.reranker_calls = pairs.calls
    stats.rerank_pairs_scored = pairs.scored
    return rows, stats


def _shard_contents(dataset: Dataset, pool_ids: Sequence[str]) -> tuple[list, list[str], dict[str, int], list]:
    """The shard's questions, its units' ids (each once, in pool order), their positions and the units."""
    pool_set = set(pool_ids)
    questions = [q for q in dataset.questions if q.pool_id in pool_set]
    unit_ids: list[str] = list(dict.fromkeys(u for p in pool_ids for u in dataset.pools[p]))
    uidx = {u: i for i, u in enumerate(unit_ids)}
    units = [dataset.unit(u) for u in unit_ids]
    return questions, unit_ids, uidx, units


def _rerank_block(states: Sequence[QuestionState], arm_objs: dict, pairs: PairScores, params: ArmParams) -> None:
    """Rerank: keep's pairs in one call, then hybrid's new pairs in one call (the other arms
    rerank nothing, and a pair is scored once)."""
    for name in ("keep", "hybrid"):
        arm = arm_objs[name]
        pairs.ensure([(s.qi, int(s.pool_units[c])) for s in states for c in arm.candidates(s, params)],
                     questions=len(states) if name == "keep" else 0)


def _apportioned_ms(enc, n: int) -> np.ndarray:
    """Each text's share of one encode call's time, in proportion to its tokens (at least one)."""
    tok = np.maximum(np.asarray(enc.n_tokens, dtype=np.float64), 1.0)
    return enc.seconds * 1000.0 * tok / tok.sum() if n else tok


def _pool_counts(dataset: Dataset, pool_ids: Sequence[str], questions: Sequence, uidx: dict[str, int],
                 n_units: int) -> tuple[np.ndarray, dict[str, int]]:
    """How many of the shard's pools hold each unit, and how many questions each pool has: the
    shares a unit's encode time and a pool's index time are split into."""
    n_pools_of_unit = np.zeros(n_units)
    for p in pool_ids:
        for u in dataset.pools[p]:
            n_pools_of_unit[uidx[u]] += 1
    q_per_pool: dict[str, int] = {}
    for q in questions:
        q_per_pool[q.pool_id] = q_per_pool.get(q.pool_id, 0) + 1
    return n_pools_of_unit, q_per_pool


def _index_pools(dataset: Dataset, pool_ids: Sequence[str], units: Sequence, uidx: dict[str, int],
                 q_per_pool: dict[str, int], params: ArmParams) -> tuple[dict, dict, dict]:
    """Per pool with questions: its units' positions, its BM25 index, and the BM25 build time
    each of its questions is charged."""
    pool_pos: dict[str, np.ndarray] = {}
    pool_bm25: dict[str, BM25Pool] = {}
    pool_bm25_ms: dict[str, float] = {}
    used = [p for p in pool_ids if p in q_per_pool]
    with progress.stage("BM25 index", sum(len(dataset.pools[p]) for p in used), "passages") as eta:
        for p in used:
            pos = np.array([uidx[u] for u in dataset.pools[p]], dtype=np.int64)
            pool_pos[p] = pos
            t0 = time.perf_counter()
            pool_bm25[p] = BM25Pool([units[i].text for i in pos], params.bm25)
            pool_bm25_ms[p] = (time.perf_counter() - t0) * 1000.0 / q_per_pool[p]
            eta.tick(len(pos))
    return pool_pos, pool_bm25, pool_bm25_ms


def _hnsw_indexes(pool_pos: dict[str, np.ndarray], pool_encode_ms: dict[str, float], q_per_pool: dict[str, int],
                  unit_vectors: np.ndarray, params: ArmParams) -> dict[str, HNSWIndex]:
    """An HNSW index per pool when ``arms.dense_index`` asks for one (its build time charged to
    the pool's questions' encode time, in ``pool_encode_ms``); else none (exact search)."""
    hnsw: dict[str, HNSWIndex] = {}
    if params.dense.kind != "hnsw":
        return hnsw
    with progress.stage("HNSW index", len(pool_pos), "pools") as eta:  # one faiss call a pool: heartbeat lines
        for p in pool_pos:
            t0 = time.perf_counter()
            hnsw[p] = HNSWIndex(unit_vectors[pool_pos[p]], params.dense)
            pool_encode_ms[p] += (time.perf_counter() - t0) * 1000.0 / q_per_pool[p]
            eta.tick(1)
    return hnsw


def _recall_vs_exact(s: QuestionState, unit_vectors: np.ndarray, q_vectors: np.ndarray, step: int) -> float:
    """Recall@10 of the approximate dense ranking against exact search, on every ``step``-th
    question (NaN on the others)."""
    exact = (rank_order(exact_scores(unit_vectors[s.pool_units], q_vectors[s.qi]))
             if s.qi % step == 0 else None)
    return recall_at(s.dense_order, exact, 10) if exact is not None else float("nan")
