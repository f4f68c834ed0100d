"""Single-signal routers: the score is one feature, oriented so larger = more worth the extra arm.

The sign table below is written for the default arm pair, keep (dense + rerank) vs hybrid
(BM25 + dense, fused, reranked). Reasoning, one line per family:

- dense top-1 / margin / mean-top-5, dense-rerank overlap: LOW values mean the base arm's own
  list is weak or unstable -> sign -1.
- dense rank of the reranked top-1: HIGH means the reranker disagrees with the dense order ->
  sign +1.
- caption share of the reranked top 10: HIGH means the reranker fills the list with captions,
  i.e. finds no convincing paragraph -> sign +1 (our choice; docs/metrics.md is silent).
- QPP over the dense list (WIG, NQC, SMV and unnormalised variants): these predict that a list
  is effective when HIGH (seed 002 4.2); the dense list is the base arm's -> sign -1.
- BM25 top score / margin and QPP over the BM25 list: these describe the list that only the
  extra arm adds. HIGH means BM25 found a confident lexical match that fusion can bring in, so
  the hybrid arm is more likely to help -> sign +1 (seed 002 orients QPP of the list the extra
  arm uses positively; seed 003 uses the BM25 top score as a retrieve-more trigger).

For another arm pair (e.g. no-retrieval vs RAG, where every retrieval list belongs to the extra
arm) orientations differ: override with ``policy.sign=...``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from harness.errors import ConfigError, HarnessError
from harness.retrieval.feature_names import FEATURE_SETS
from policies.base import FLOAT, FLOATS, INT, STR, Policy, ScoreContext
from policies.preprocess import column_medians, count_missing, feature_array, impute

SIGNAL_SIGNS: dict[str, int] = {
    "dense_top1": -1,
    "dense_margin12": -1,
    "dense_mean_top5": -1,
    "overlap_dense_rerank10": -1,
    "rerank_top1_dense_rank": +1,
    "caption_frac_rerank10": +1,
    "bm25_top1": +1,
    "bm25_margin12": +1,
    **{name: (-1 if name.endswith("_dense") else +1) for name in FEATURE_SETS["qpp"]},
    # uncertainty of the no-retrieval answer (seed 003): the less sure the model is from memory,
    # the more retrieval is worth; a longer answer from memory counts as less sure (our choice)
    **{name: +1 for name in FEATURE_SETS["uncertainty"]},
}


def development_medians(policy: Policy, X: pd.DataFrame) -> tuple[int, np.ndarray]:
    """(missing values, per-feature medians) of ``policy.features`` on the development
    questions: all that the signal routers learn (outcomes are never read)."""
    arr = feature_array(X, policy.features, policy.name)
    if len(arr) == 0:
        raise HarnessError(f"policy {policy.name!r}: fit got no development questions")
    return count_missing(arr), column_medians(arr)


class SingleSignalPolicy(Policy):
    """score = sign * feature.

    Missing values (NaN, +-inf) take the median of the feature on the development questions,
    learned by ``fit``. ``fit`` reads features only, never outcomes, but ``trainable`` is True
    so that the harness (which fits only trainable policies) learns that median on development
    data and freezes it with the state. If scored without ``fit``/``set_state``, a missing value
    scores 0.0 (our choice: a neutral constant on the sign-adjusted scale).
    """

    name = "single_signal"
    trainable = True
    requires_fit = False  # scores unfitted (a missing value then scores 0.0); state {} when unfitted
    kind = "single_signal"
    state_params = {"kind": STR, "feature": STR, "sign": INT}
    fitted_attributes = {"median": FLOAT, "n_imputed": INT}

    def __init__(self, feature: str, sign: int | None = None):
        if not isinstance(feature, str) or not feature:
            raise ConfigError("policy.feature", f"expected one feature name, got {feature!r}")
        if sign is None:
            if feature not in SIGNAL_SIGNS:
                raise ConfigError("policy.sign", f"no default sign for feature {feature!r}; set policy.sign to +1 or -1")
            sign = SIGNAL_SIGNS[feature]
        if sign not in (1, -1) or isinstance(sign, bool):
            raise ConfigError("policy.sign", f"expected +1 or -1, got {sign!r}")
        self.feature = feature
        self.sign = int(sign)  # the default sign is looked up here: the harness reads it before fit
        self.features = (feature,)

    def fit(self, X: pd.DataFrame, delta, groups=None, seed: int = 0) -> "SingleSignalPolicy":
        self.n_imputed_, medians = development_medians(self, X)
        self.median_ = float(medians[0])
        return self

    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        values = feature_array(X, self.features, self.name)[:, 0]
        missing = np.isnan(values)
        self.n_imputed_scored_ = int(missing.sum())
        out = self.sign * values
        out[missing] = self.sign * self.median_ if self.is_fitted() else 0.0
        return out


class FeatureDifferencePolicy(Policy):
    """score = feature ``a`` minus feature ``b``: a two-signal router with no weights.

    Made for seed 002's Uncertainty predictor (section 4.3.1): the drop in max token entropy
    from the answer without retrieval to the RAG answer, ``a = unc_max_entropy``, ``b =
    <rag arm>_unc_max_entropy`` (``conf/policy/unc_drop_rag_bm25.yaml``). Reading a RAG
    answer's features makes it a post-generation predictor: both answers exist before it
    scores, so it predicts the gain (protocol C) but saves no cost.

    Like :class:`SingleSignalPolicy` it learns nothing from outcomes: ``fit`` only learns each
    feature's median on the development questions (``trainable`` is True so the harness calls
    it and freezes the medians), which stands in for a missing value (NaN, +-inf). Scored
    without ``fit``/``set_state``, a question missing either value scores 0.0 (no difference).
    """

    name = "feature_difference"
    trainable = True
    requires_fit = False  # scores unfitted (a missing value then scores 0.0); state {} when unfitted
    kind = "feature_difference"
    state_params = {"kind": STR, "a": STR, "b": STR}
    fitted_attributes = {"medians": FLOATS, "n_imputed": INT}

    def __init__(self, a: str, b: str):
        for key, value in (("a", a), ("b", b)):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"policy.{key}", f"expected one feature name, got {value!r}")
        if a == b:
            raise ConfigError("policy.b", f"must differ from policy.a (both {a!r}: the score would be 0 everywhere)")
        self.a = a
        self.b = b
        self.features = (a, b)

    def fit(self, X: pd.DataFrame, delta, groups=None, seed: int = 0) -> "FeatureDifferencePolicy":
        self.n_imputed_, self.medians_ = development_medians(self, X)
        return self

    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        arr = feature_array(X, self.features, self.name)
        missing = np.isnan(arr)
        self.n_imputed_scored_ = int(missing.sum())
        if self.is_fitted():
            arr = impute(arr, self.medians_)
            return arr[:, 0] - arr[:, 1]
        out = arr[:, 0] - arr[:, 1]
        out[missing.any(axis=1)] = 0.0
        return out


# ---- conf/policy/signal_<feature>.yaml, generated from SIGNAL_SIGNS ------------------------------
# `ls conf/policy` lists every policy, so each single signal has its YAML file; the files are
# written from the table above (never by hand) and tests/test_policy_configs.py fails when they
# and the table disagree. After changing SIGNAL_SIGNS run:  python -m policies.signals --write-configs
GENERATED_HEADER = (
    "# Generated by `python -m policies.signals --write-configs` from SIGNAL_SIGNS in "
    "policies/signals.py: edit the table there, not this file."
)
SIGNAL_PREFIX = "signal_"


def signal_config_texts() -> dict[str, str]:
    """{file name: YAML text} of every single-signal config, one per entry of SIGNAL_SIGNS."""
    out: dict[str, str] = {}
    for feature, sign in SIGNAL_SIGNS.items():
        meaning = (
            "high values = the extra arm is more likely to help" if sign > 0 else "low values = the base arm struggles"
        )
        out[f"{SIGNAL_PREFIX}{feature}.yaml"] = (
            f"{GENERATED_HEADER}\n"
            f"# Single-signal router: score = {sign:+d} * {feature} ({meaning}; sign table in policies/signals.py).\n"
            f"name: {SIGNAL_PREFIX}{feature}\n"
            f"_target_: policies.signals.SingleSignalPolicy\n"
            f"feature: {feature}\n"
            f"sign: {sign}\n"
        )
    return out


def _policy_folder(conf_dir: str | Path | None) -> Path:
    from policies.registry import default_conf_dir

    return Path(conf_dir) / "policy" if conf_dir is not None else default_conf_dir() / "policy"


def signal_config_problems(conf_dir: str | Path | None = None) -> list[str]:
    """Where ``<conf>/policy/signal_*.yaml`` and SIGNAL_SIGNS disagree: one line per file that
    is missing, differs from the generated text, or has no entry in the table. [] = in sync."""
    folder = _policy_folder(conf_dir)
    expected = signal_config_texts()
    problems = []
    for name, text in sorted(expected.items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing (SIGNAL_SIGNS has {name[len(SIGNAL_PREFIX):-5]!r})")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{name}: differs from the text generated from SIGNAL_SIGNS")
    for path in sorted(folder.glob(f"{SIGNAL_PREFIX}*.yaml")):
        if path.name not in expected:
            problems.append(f"{path.name}: no entry {path.stem[len(SIGNAL_PREFIX):]!r} in SIGNAL_SIGNS")
    return problems


def write_signal_configs(conf_dir: str | Path | None = None) -> list[Path]:
    """Write every single-signal config; remove generated ones whose feature left the table
    (a hand-written ``signal_*.yaml`` is left alone and stays reported by the check). Returns
    the files written or removed."""
    folder = _policy_folder(conf_dir)
    folder.mkdir(parents=True, exist_ok=True)
    expected = signal_config_texts()
    changed = []
    for name, text in expected.items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    for path in sorted(folder.glob(f"{SIGNAL_PREFIX}*.yaml")):
        if path.name not in expected and path.read_text(encoding="utf-8").startswith(GENERATED_HEADER):
            path.unlink()
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    """``python -m policies.signals --write-configs`` (or ``--check``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m policies.signals", description="Single-signal policy configs.")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write-configs", action="store_true", help="write conf/policy/signal_*.yaml from SIGNAL_SIGNS")
    what.add_argument("--check", action="store_true", help="exit 1 when the files and SIGNAL_SIGNS disagree")
    parser.add_argument("--conf-dir", default=None, help="the config folder holding policy/ (default: the repo's conf)")
    args = parser.parse_args(argv)
    if args.write_configs:
        changed = write_signal_configs(args.conf_dir)
        print(f"{len(signal_config_texts())} single-signal configs; {len(changed)} file(s) written or removed")
        for path in changed:
            print(f"  {path.name}")
    problems = signal_config_problems(args.conf_dir)
    for line in problems:
        print(f"out of date: {line}")
    if problems and args.check:
        print("run: python -m policies.signals --write-configs")
    return 1 if problems else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
