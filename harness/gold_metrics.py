"""Which metric names only the ``gold_at_k`` block (harness/metric_blocks.py) provides.

Why: ``harness.arm_blocks.blocks_for`` adds that block when ``arms.metric`` names such a metric,
and the block itself parses the same names; both ask here, so arm_blocks need not import the
block it loads by name (no import cycle).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

BLOCK_NAME = "gold_at_k"
GOLD_METRIC = re.compile(r"^(all|recall)@([1-9][0-9]*)$")


def gold_metric(metric: Any) -> tuple[str, int] | None:
    """("all" | "recall", k) for ``all@k`` / ``recall@k``, else None."""
    m = GOLD_METRIC.match(str(metric))
    return (m.group(1), int(m.group(2))) if m else None


def needs_gold_block(arms_cfg: Mapping) -> bool:
    """Whether ``arms.metric`` is one only the ``gold_at_k`` block provides: ``all@k`` for any k,
    ``recall@k`` for k other than the base table's own ``recall@<arms.k>``."""
    parsed = gold_metric(arms_cfg.get("metric", "hit@10"))
    if parsed is None:
        return False
    kind, k = parsed
    try:
        table_k = int(arms_cfg.get("k", 10))
    except (TypeError, ValueError):
        table_k = 10
    return not (kind == "recall" and k == table_k)
