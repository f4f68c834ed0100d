"""What a protocol declares about its numbers, so every screen renders them without its name.

Why: the console's job line, the report's job table, the sweep's comparison table and the
``headline/...`` metrics used to list the built-in protocols' metric names by hand, so a plugin
protocol showed nowhere. Each protocol now declares its outputs (like lm-eval's
``higher_is_better`` metric metadata) and the screens loop over the declarations.

A key or label may hold ``{metric}`` (the task metric's MLflow name, e.g. ``hit_at_10``, in a
key; its display name, ``hit@10``, in a label) and ``{budget}`` (each budget of the sweep's grid
that some job logged, as ``0.25``); an output is shown only where a job logged it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Mapping


@dataclass(frozen=True)
class Output:
    """One logged metric of a protocol.

    ``higher_is_better``: True / False, or None for a number with no better direction (a usage
    share); ``headline``: one of the few numbers that answer the protocol's question: it is a
    column of the sweep's comparison table (under ``short``), its job line on the console and a
    ``headline/...`` metric show it; ``report``: a column of the report's job table (under
    ``label``); ``ci``: the keys of its interval's ends; ``unless``: (a 0/1 key, the words shown
    instead where that key is 0)."""

    key: str
    label: str
    higher_is_better: bool | None = True
    unit: str = ""
    headline: bool = False
    report: bool = True
    short: str = ""
    digits: int = 4
    ci: tuple[str, str] | None = None
    unless: tuple[str, str] | None = None

    @property
    def better(self) -> str | None:
        """The report's marking rule: "high", "low", or None (never marked)."""
        return None if self.higher_is_better is None else ("high" if self.higher_is_better else "low")


def display_metric(mlflow_metric: str) -> str:
    """``hit_at_10`` -> ``hit@10`` (the name a reader knows)."""
    return mlflow_metric.replace("_at_", "@")


def expand(outputs: Iterable[Output], mlflow_metric: str | None, budgets: Iterable[str] = ()) -> list[Output]:
    """The outputs with ``{metric}`` and ``{budget}`` filled in: one per budget for a key that
    holds ``{budget}``; an output that needs the metric is left out when it is unknown."""
    out = []
    budgets = list(budgets)
    for o in outputs:
        if "{metric}" in o.key + o.label and mlflow_metric is None:
            continue
        for b in budgets if "{budget}" in o.key else [None]:
            def fill(text: str, b=b) -> str:
                text = text.replace("{metric}", display_metric(mlflow_metric or "")) if "{" in text else text
                return text.replace("{budget}", b) if b is not None else text

            key = o.key.replace("{metric}", mlflow_metric or "").replace("{budget}", b or "")
            ci = tuple(k.replace("{metric}", mlflow_metric or "") for k in o.ci) if o.ci else None
            out.append(Output(key=key, label=fill(o.label), higher_is_better=o.higher_is_better, unit=o.unit,
                              headline=o.headline, report=o.report, short=fill(o.short), digits=o.digits,
                              ci=ci, unless=o.unless))
    return out


def logged_budgets(metric_keys: Iterable[str], outputs: Iterable[Output]) -> list[str]:
    """The budgets (as logged, e.g. ``0.25``) some job logged a ``{budget}`` output at."""
    found = set()
    for o in outputs:
        if "{budget}" not in o.key:
            continue
        pattern = re.escape(o.key).replace(re.escape("{budget}"), r"([0-9.]+)").replace(re.escape("{metric}"), r"[^/]+")
        for k in metric_keys:
            m = re.fullmatch(pattern, k)
            if m:
                found.add(m.group(1))
    return sorted(found, key=float)


def headline_line(title: str, outputs: Iterable[Output], metrics: Mapping[str, float]) -> str | None:
    """``<title>: short=value short=value``, the headline outputs the job logged; None without
    any (the generic job line of a protocol, e.g. a plugin's)."""
    parts = [f"{o.short or o.label}={metrics[o.key]:.{o.digits}f}" for o in outputs
             if o.headline and o.key in metrics and not math.isnan(float(metrics[o.key]))]
    return f"{title}: {' '.join(parts)}" if parts else None
