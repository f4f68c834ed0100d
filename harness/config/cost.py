"""Checks of the ``cost`` group: an abstract ``cost.c`` or one derived from a measured cost, and
a measured cost the job's table can have."""

from __future__ import annotations

from typing import Any

from harness.config.limits import MAX_COST
from harness.config.schema import COST_UNITS
from harness.config.values import _in_range
from harness.errors import ConfigError, did_you_mean


def _check_cost(cost: Any) -> None:
    """``cost.c`` given (``unit``/``price`` null), or derived (``unit`` in COST_UNITS, ``price`` a
    finite number >= 0, ``c`` null): one ConfigError naming the key otherwise."""
    c, unit, price = cost.get("c"), cost.get("unit"), cost.get("price")
    if unit is None:
        if c is None:
            raise ConfigError("cost.c", "is null but cost.unit is null too; give cost.c=<number in [0, 1000]>, or derive it "
                                        "from a measured cost with cost.unit (ms | tokens) and cost.price")
        _in_range("cost.c", c, 0, MAX_COST)
        if price is not None:
            raise ConfigError("cost.price", f"is set ({price!r}) but cost.unit is null; a price needs a unit "
                                            f"(cost.unit=ms | tokens, cost.c=null), or drop it (cost.price=null)")
        return
    if unit not in COST_UNITS:
        raise ConfigError("cost.unit", f"unknown unit {unit!r}{did_you_mean(unit, COST_UNITS)}; choose from "
                                       f"{', '.join(COST_UNITS)}, or null for an abstract cost.c")
    if c is not None:
        raise ConfigError("cost.c", f"is {c!r} but cost.unit={unit} derives it (cost.price x the extra arm's measured "
                                    f"{unit} per question); set cost.c=null (or use cost=measured_{unit}), or "
                                    "cost.unit=null to keep an abstract c")
    if price is None:
        raise ConfigError("cost.price", f"is required with cost.unit={unit}: the utility one "
                                        f"{'token' if unit == 'tokens' else unit} of the extra arm costs "
                                        f"(e.g. cost=measured_{unit})")
    _in_range("cost.price", price, 0, MAX_COST)


def _check_cost_source(cost: Any, arms: Any, synthetic: bool) -> None:
    """A measured cost the job's table cannot have: tokens of a retrieval pair (no generator
    runs), anything of the synthetic table (no cost columns). The table itself is checked when
    the cost is derived (``harness.app.resolve_cost``)."""
    from harness.retrieval.arms import ARMS

    unit = cost.get("unit")
    if unit is None:
        return
    base, extra = arms.get("base", "keep"), arms.get("extra", "hybrid")
    if unit == "tokens" and base in ARMS and extra in ARMS:
        raise ConfigError("cost.unit", f"tokens, but {base}-vs-{extra} is a retrieval pair: no generator runs, so "
                                       f"its table has no {extra}.cost.tokens (it has {extra}.cost.total_ms, "
                                       f"{extra}.cost.rerank_pairs, {extra}.marginal.total_ms); use cost.unit=ms "
                                       "or an answer pair")
    if synthetic:
        raise ConfigError("cost.unit", f"{unit}, but the synthetic table has no measured costs (no cost columns); "
                                       "give an abstract cost.c (cost=default) or use a real dataset")


# the URI schemes MLflow opens a tracking store for (mlflow.tracking._tracking_service.utils),
