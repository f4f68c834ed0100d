"""How large a task the built-in protocols need: documents to split, questions to judge on.

Why here: each protocol owns its size requirement (``Protocol.min_documents`` and
``Protocol.smallest_test_set``, asked by ``harness.preflight``); these are the built-ins'
answers, drawn from their settings exactly as the protocols draw their splits.
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.protocols.budget_splits import draw_split_seeds
from harness.protocols.threshold_select import repeat_seeds
from harness.stats import grouped_split, stratified_grouped_halves
from harness.task import MIN_DOCUMENTS  # every protocol splits by document into two non-empty parts



def threshold_min_documents(protocol: Mapping[str, Any], trainable: bool) -> tuple[int, str]:
    """Protocol A: a development / held-out split by ``dev_frac`` with both parts non-empty and,
    for a trainable policy, ``n_folds`` (and ``nested_folds``) grouped folds inside development.
    Folds balance questions, not documents: a necessary count."""
    n_folds = int(protocol.get("n_folds", 5))
    frac = float(protocol.get("dev_frac", 0.8))
    nested = int(protocol.get("nested_folds", 0) or 0)
    need_dev = 1
    if trainable:
        need_dev = max(n_folds, nested)
        # nested: the largest outer fold held out, the rest must hold n_folds inner folds
        while nested and need_dev - -(-need_dev // nested) < n_folds:
            need_dev += 1
    n = MIN_DOCUMENTS
    while True:
        dev = int(round(frac * n))
        if 1 <= dev <= n - 1 and dev >= need_dev:
            break
        n += 1
    why = f"dev_frac={frac:g} leaves both parts non-empty"
    if trainable:
        why += f" with >= {need_dev} development documents for {n_folds} folds" + (f" and {nested} nested folds" if nested else "")
    return n, why


def budget_min_documents(budget: Mapping[str, Any], trainable: bool) -> tuple[int, str]:
    """Protocol B (``oof`` calibration of a trainable policy): ``cal_folds`` folds in each grouped half."""
    folds = int(budget.get("cal_folds", 5)) if trainable and budget.get("calibration", "oof") == "oof" else 1
    return (max(MIN_DOCUMENTS, 2 * folds),
            "two grouped halves" + (f" of >= {folds} documents each for cal_folds={folds}" if folds > 1 else ""))


def gain_min_documents(protocol: Mapping[str, Any], trainable: bool) -> tuple[int, str]:
    """Protocol C: two halves and (unless ``gain_threshold`` is given) ``n_folds`` folds in the
    fitting half, only to choose the selective threshold."""
    n_folds = int(protocol.get("n_folds", 5))
    folds = n_folds if trainable and protocol.get("gain_threshold") is None else 1
    return (max(MIN_DOCUMENTS, 2 * folds),
            "two grouped halves" + (f", the fitting half with >= {folds} documents for n_folds={folds}" if folds > 1 else ""))


def threshold_smallest_heldout(task, protocol: Mapping[str, Any], seed: int) -> int:
    """The fewest questions of protocol A's held-out sets over its repeats."""
    frac = float(protocol.get("dev_frac", 0.8))
    return min(len(grouped_split(task.groups, frac, s)[1]) for s in repeat_seeds(seed, int(protocol.get("repeats", 1))))


def budget_smallest_test_half(task, budget: Mapping[str, Any], seed: int) -> int:
    """The fewest questions of protocol B's test halves over its splits."""
    seeds = draw_split_seeds(seed, int(budget.get("n_splits", 5)))
    return min(len(stratified_grouped_halves(task.groups, task.delta_class, int(s))[1]) for s in seeds)


def gain_test_half(task, seed: int) -> int:
    """The questions of protocol C's test half."""
    return len(stratified_grouped_halves(task.groups, task.delta_class, seed)[1])
