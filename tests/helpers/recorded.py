"""Outputs recorded once (tests/fixtures) and recomputed on every machine: every built-in
policy's held-out scores and frozen state, and protocol A's single-repeat output on the planted
task (its metrics, decisions, frozen files and config digest), with the writers that recorded
them.

Why here: tests/test_policy_state.py and tests/test_protocol_threshold.py compare these outputs
with the recordings; tests/test_reproducibility.py computes the same outputs under other BLAS
kernels and compares them with each other.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.io import canonical_json
from harness.protocols import run_threshold_protocol
from harness.protocols.threshold_freeze import ROUTER_FILE, STATE_FILE
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from tests.helpers.policies import LstsqPolicy, RandomPolicy


# ---- the built-in policies --------------------------------------------------------------------
def _builtin_outputs(planted_table) -> dict[str, dict]:
    """{config: {"scores": held-out scores, "state": the frozen state}} for every built-in.

    Each built-in config is fitted (when trainable) on the even-numbered documents with seed 3,
    its state goes through strict JSON text into a fresh instance, and that instance scores the
    odd-numbered documents (also with missing and infinite values); the scores of the fitted
    instance must be bit-identical to it (the frozen router is the evaluated router)."""
    from harness.task import RoutingTask
    from policies.base import ScoreContext
    from policies.registry import builtin_policy_configs, make_policy

    task = RoutingTask.from_table(planted_table)
    even = np.array([int(g[3:]) % 2 == 0 for g in task.groups])
    dev, test = task.take(np.flatnonzero(even)), task.take(np.flatnonzero(~even))
    out = {}
    for stem, cfg in sorted(builtin_policy_configs().items()):
        policy = make_policy(cfg)
        if getattr(policy, "n_way", False):  # scores arms: its round trip is tests/test_arms_protocol.py's
            continue
        if policy.trainable:
            policy.fit(dev.feature_matrix(policy.features), dev.delta, dev.groups, 3)
        state_text = canonical_json(policy.get_state())
        rebuilt = make_policy(cfg)
        rebuilt.set_state(json.loads(state_text))
        X = test.feature_matrix(policy.features)
        ctx = ScoreContext(qids=test.qids, seed=3, true_delta=test.delta if policy.oracle else None)
        scores = np.asarray(rebuilt.score(X, ctx), dtype=np.float64)
        np.testing.assert_array_equal(np.asarray(policy.score(X, ctx), dtype=np.float64), scores, err_msg=stem)
        if X.shape[1]:  # and the imputation path: missing and infinite values at score time
            X = X.copy()
            X.iloc[:5, 0] = np.nan
            X.iloc[5:7, 0] = np.inf
            X.iloc[7:9, -1] = -np.inf
            scores = np.concatenate([scores, np.asarray(rebuilt.score(X, ctx), dtype=np.float64)])
        out[stem] = {"scores": [float(v) for v in scores], "state": json.loads(state_text)}
    return out


# Recorded with the policies before the declarative-state refactor (and before linear scores were
# summed without BLAS), under OPENBLAS_CORETYPE=Haswell, where they reproduced the SHA-256 digests
# pinned at that time bit for bit. A change beyond tests/helpers/numeric.py's cross-CPU tolerance
# changes every published number. Regenerate (only for an intended change) with
#   OPENBLAS_CORETYPE=Haswell python -c "import tests.helpers.recorded as t; t.write_builtin_outputs()"
BUILTIN_OUTPUTS_FILE = Path(__file__).parent.parent / "fixtures" / "builtin_policy_outputs.json"


def write_builtin_outputs() -> None:  # pragma: no cover - run by hand, see the comment above
    from harness.synthetic import synthetic_outcome_table

    outputs = _builtin_outputs(synthetic_outcome_table(n_docs=60, questions_per_doc=5, seed=0))
    BUILTIN_OUTPUTS_FILE.write_text(json.dumps(outputs, indent=1, sort_keys=True) + "\n", encoding="utf-8")


# ---- protocol A, one repeat ---------------------------------------------------------------------
def _task(n_docs=60, seed=0, questions_per_doc=5):
    return RoutingTask.from_table(
        synthetic_outcome_table(n_docs=n_docs, questions_per_doc=questions_per_doc, seed=seed)
    )


# Recorded with the protocol-A code of commit 3ebb103 (before repeats, nested estimate and power
# metrics existed) on the planted table (_task()), freeze folder = freeze_dir itself: the metrics
# of that time, every decision row, and the frozen files' contents. Numbers that went through a
# BLAS call differ in their last bits between CPUs, so they are compared within the cross-CPU
# tolerance of tests/helpers/numeric.py; counts, decisions and the config digest exactly. The
# fixture was written under OPENBLAS_CORETYPE=Haswell, where this code reproduced the digests
# pinned at 3ebb103 bit for bit (since then only the frozen policy_class, and so the config
# digest, changed: the test policies moved to tests/helpers/policies.py); regenerate it (only for
# an intended change) with
#   OPENBLAS_CORETYPE=Haswell python -c "import tests.helpers.recorded as t; t.write_previous_output()"
PREVIOUS_OUTPUT_FILE = Path(__file__).parent.parent / "fixtures" / "protocol_a_one_repeat.json"
PREVIOUS_KEYS = [("lstsq", 1, 0.02), ("random", 4, 0.01)]
DECISION_COLUMNS = ["qid", "doc_id", "score", "ran_extra", "chosen", "utility"]


def _one_repeat(key, folder: Path):
    name, seed, cost = key
    factory = {"lstsq": LstsqPolicy, "random": RandomPolicy}[name]
    return run_threshold_protocol(_task(), factory, freeze_dir=folder, seed=seed, cost=cost, repeats=1)


def _output_record(res, metric_names) -> dict:
    """What protocol A's single repeat produced, as plain JSON values."""
    dec = res.decisions
    folder = Path(res.frozen["dir"])
    return {
        "metrics": {m: res.metrics[m] for m in metric_names},
        "decisions": {
            "qid": [str(q) for q in dec.qid], "doc_id": [str(d) for d in dec.doc_id],
            "score": [float(v) for v in dec.score], "ran_extra": [int(v) for v in dec.ran_extra],
            "chosen": [float(v) for v in dec.chosen], "utility": [float(v) for v in dec.utility],
        },
        "frozen": {name: json.loads((folder / name).read_text(encoding="utf-8")) for name in (STATE_FILE, ROUTER_FILE)},
        "config_sha256": res.frozen["sha256"]["config"],
    }


def _previous_output() -> dict:
    return json.loads(PREVIOUS_OUTPUT_FILE.read_text(encoding="utf-8"))


def write_previous_output() -> None:  # pragma: no cover - run by hand, see the comment above
    import tempfile

    old = _previous_output()
    out = {"_about": old["_about"]}
    for key in PREVIOUS_KEYS:
        label = ",".join(map(str, key))
        with tempfile.TemporaryDirectory() as folder:
            out[label] = _output_record(_one_repeat(key, Path(folder)), sorted(old[label]["metrics"]))
    PREVIOUS_OUTPUT_FILE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
