"""The default sweep on an outcome table of logged answers (docs/own_arms.md, "Policies a table
cannot feed"): a policy that reads features the table lacks is not applicable to it (one line
naming the policy and the feature set, no run), the others run and give the verdicts; a policy the
user named is refused in one line; the parent run holds the table's rescued/lost list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from harness.data.outcome_table import from_routerbench, read_outcome_table
from harness.errors import ConfigError
from harness.preflight import frame_with_text_features, not_applicable, with_text_features
from harness.runner.sweep_check import check_applicable
from harness.runner.sweep_end import collect, count_line, not_applicable_lines, write_results
from harness.store_schema import TAG_ROLE
from harness.task import RoutingTask
from policies.registry import make_policy
from tests.helpers.routerbench import routerbench
from tests.helpers.sweeps import run_cli

BASE, EXTRA = "mistralai_mixtral-8x7b-chat", "gpt-4-1106-preview"
PAIR = ["arms.metric=correct", f"arms.base={BASE}", f"arms.extra={EXTRA}"]
# the default sweep's policies (conf/experiment/default.yaml): these read retrieval features
FEATURE_POLICIES = ("ridge", "logistic", "gbm", "qpp_ridge", "signal_dense_top1", "signal_dense_margin12",
                    "signal_rerank_top1_dense_rank")
RUNNING = ("always_keep", "always_extra", "random", "oracle")
# fewer splits than the defaults: the rule, not the numbers, is tested here
FAST = ["budget.n_splits=2", "budget.cal_folds=2", "protocol.nested_folds=0", "protocol.n_folds=2"]


def _task(frame: pd.DataFrame) -> RoutingTask:
    return RoutingTask.from_table(frame, base_arm=BASE, extra_arm=EXTRA, metric="correct", cost_column="usd")


@pytest.fixture
def rb_csv(tmp_path):
    path = tmp_path / "rb.csv"
    from_routerbench(routerbench(200)).to_csv(path, index=False)
    return path


def test_a_policy_is_not_applicable_when_the_table_lacks_its_features(rb_csv):
    frame, _ = read_outcome_table(rb_csv)
    task = _task(frame)
    policy = {name: make_policy({"_target_": target, **kw}) for name, target, kw in [
        ("ridge", "policies.learned.RidgePolicy", {"features": "baseline"}),
        ("qpp", "policies.learned.QPPRouter", {"features": "qpp"}),
        ("query", "policies.learned.RidgePolicy", {"features": "query"}),
        ("keep", "policies.builtin.AlwaysBase", {}),
    ]}
    assert not_applicable(policy["ridge"], task, "ridge") == (
        "policy ridge reads baseline features (dense_top1 and 5 more); the outcome table has none "
        "(give feat.<name> columns)")
    assert not_applicable(policy["qpp"], task, "qpp_ridge") == (
        "policy qpp_ridge reads qpp features (qpp_wig_dense and 11 more); the outcome table has none "
        "(give feat.<name> columns)")
    assert not_applicable(policy["keep"], task, "always_keep") is None
    # query features come from the question text: applicable with a 'question' column, not without
    assert not_applicable(policy["query"], task, "query_ridge") is None
    silent = _task(frame.drop(columns="question"))
    assert not_applicable(policy["query"], silent, "query_ridge") == (
        "policy query_ridge reads query features (q_len_words and 11 more); the outcome table has none "
        "(give feat.<name> columns, or a 'question' column to compute the query features from)")
    reads_text = type("Rule", (), {"needs_text": True, "features": ()})()  # a rule on the question's words
    assert not_applicable(reads_text, task, "rule") is None
    assert not_applicable(reads_text, silent, "rule") == (
        "policy rule reads the question text (needs_text = True); the outcome table has no 'question' column")
    some = _task(frame.assign(**{"feat.dense_top1": 0.5, "feat.dense_margin12": 0.1, "feat.dense_mean_top5": 0.2,
                                 "feat.overlap_dense_rerank10": 0.3}))
    assert not_applicable(policy["ridge"], some, "ridge") == (
        "policy ridge reads baseline features (rerank_top1_dense_rank and 1 more); the outcome table lacks 2 of 6 "
        "(give feat.<name> columns)")


def test_query_features_are_computed_from_the_question_text():
    frame = pd.DataFrame({"qid": ["a", "b", "c", "d"], "doc_id": ["a", "b", "c", "d"],
                          "question": ["What is 2 plus 2?", "Is Paris in France", "who Wrote Hamlet and Macbeth", "x"],
                          f"{BASE}.correct": [0.0, 1.0, 0.0, 1.0], f"{EXTRA}.correct": [1.0, 1.0, 0.0, 0.0]})
    policy = make_policy({"_target_": "policies.learned.RidgePolicy", "features": "query"})
    task = with_text_features(_task(frame), policy.features)
    X = task.feature_matrix(["q_len_words", "q_has_digit", "q_n_capitalised", "q_wh_what", "q_wh_yesno", "q_wh_who",
                             "q_wh_other"])
    # by hand: words, a digit, capitalised words after the first, the wh-class of the first word
    assert X.to_numpy().tolist() == [[5, 1, 0, 1, 0, 0, 0], [4, 0, 2, 0, 1, 0, 0], [5, 0, 3, 0, 0, 1, 0],
                                     [1, 0, 0, 0, 0, 0, 1]]
    assert task.features.shape[1] == 12 and with_text_features(task, policy.features) is task  # nothing left to add


def test_the_table_protocols_read_gets_the_same_query_features_from_the_text():
    """Protocols that read the outcome table itself (n-way, cascades) see the features the task's
    policies see: the same values, aligned by row, added only where missing."""
    frame = pd.DataFrame({"qid": ["b", "a"], "doc_id": ["b", "a"], "question": ["Is Paris in France", "What is 2 plus 2?"],
                          f"{BASE}.correct": [1.0, 0.0], f"{EXTRA}.correct": [1.0, 1.0]})
    names = ("q_len_words", "q_has_digit", "q_n_capitalised", "bm25_top1")
    got = frame_with_text_features(frame, names)
    assert got[["feat.q_len_words", "feat.q_has_digit", "feat.q_n_capitalised"]].to_numpy().tolist() == [
        [4, 0, 2], [5, 1, 0]]
    assert "feat.bm25_top1" not in got  # not computable from text: left to the not-applicable rule
    task = with_text_features(_task(frame), names)  # the task's rows are sorted by qid
    assert task.features["q_len_words"].tolist() == [5, 4]
    assert frame_with_text_features(got, names) is got and frame_with_text_features(frame.drop(columns="question"),
                                                                                     names).shape == (2, 4)


def _plain(policy: str, target: str, path: str = "rb.csv", **kw) -> dict:
    return {"dataset": {"name": "outcomes", "loader": "outcomes", "path": path}, "arms": {"base": BASE, "extra": EXTRA},
            "reranker": {}, "policy": {"name": policy, "_target_": target, **kw}}


def _sweep(*task_overrides: str):
    return OmegaConf.create({"hydra": {"overrides": {"task": list(task_overrides)}}})


def test_the_sweep_skips_the_presets_policies_and_refuses_a_named_one(rb_csv):
    frame, _ = read_outcome_table(rb_csv)
    task = _task(frame)
    keep = _plain("always_keep", "policies.builtin.AlwaysBase")
    ridge = _plain("ridge", "policies.learned.RidgePolicy", features="baseline")
    other_table = _plain("ridge", "policies.learned.RidgePolicy", path="other.csv", features="baseline")
    jobs = {("policy=always_keep",): keep, ("policy=ridge",): ridge, ("policy=ridge", "dataset.path=other.csv"): other_table}
    # the preset's policies (the experiment's list): the job that cannot run is skipped, named with its reason;
    # a job of another table (a swept dataset) checks itself when it runs
    assert check_applicable(_sweep(), jobs, keep, task) == {("policy=ridge",): not_applicable(
        make_policy(ridge["policy"]), task, "ridge")}
    for given in ("policy=always_keep,ridge", "policy.features=baseline"):  # the user named or configured it
        with pytest.raises(ConfigError) as named:
            check_applicable(_sweep("cost.c=0", given), jobs, keep, task)
        assert named.value.key == "policy" and "a policy named on the command line must run on the table" in str(
            named.value)
    with pytest.raises(ConfigError, match="no job of the sweep can run on this table: policy ridge reads baseline"):
        check_applicable(_sweep(), {("policy=ridge",): ridge}, ridge, task)


def test_the_sweep_end_counts_and_lists_the_jobs_not_applicable(tmp_path):
    reason = "policy ridge reads baseline features (dense_top1 and 5 more); the outcome table has none (give ...)"
    records = [{"status": "NOT_APPLICABLE", "run_name": f"ridge c={c}", "reason": reason} for c in (0, 0.02)]
    records.append({"status": "FAILED", "run_name": "gbm c=0", "run_id": None, "error": "boom"})
    outcome = collect([], records, "correct")
    assert count_line(outcome) == "3 jobs, 1 failed, 2 not applicable" and outcome.status == "FAILED"
    assert not_applicable_lines(outcome) == [f"not applicable (2 jobs): {reason}"]
    write_results(outcome, tmp_path)
    assert pd.read_csv(tmp_path / "not_applicable.csv").to_dict("list") == {"run_name": ["ridge c=0", "ridge c=0.02"],
                                                                            "reason": [reason, reason]}
    assert (tmp_path / "summary.txt").read_text().startswith(f"not applicable (2 jobs): {reason}")
    clean = collect([], [{"status": "FAILED", "run_name": "gbm c=0", "run_id": None, "error": "boom"}], "correct")
    assert count_line(clean) == "1 jobs, 1 failed"  # the line of a sweep without such jobs, as before
    (tmp_path / "clean").mkdir()
    write_results(clean, tmp_path / "clean")
    assert not (tmp_path / "clean" / "not_applicable.csv").exists()


def test_the_parent_run_gets_the_tables_rescued_lost_list(rb_csv):
    from harness.app import TableHandle
    from harness.runner.sweep import SweepTrackingCallback

    frame, _ = read_outcome_table(rb_csv)
    logged = {}

    class Tracker:  # what the parent run receives: the folder's files, read before the folder goes
        def log_artifacts(self, run_id, folder):
            logged[run_id] = {p.name: pd.read_csv(p, dtype={"qid": str}) for p in Path(folder).iterdir()}

    callback = SweepTrackingCallback()
    callback.tracker, callback.parent_run_id = Tracker(), "parent"
    callback._log_rescued_lost(TableHandle(frame, key="outcomes-x"), _task(frame))
    got = logged["parent"][f"rescued_lost-{BASE}-vs-{EXTRA}-correct.csv"]
    want = _rescued_lost(rb_csv)
    assert len(want) > 20 and list(got.columns) == ["qid", "question", "change", f"{BASE}.correct", f"{EXTRA}.correct"]
    pd.testing.assert_frame_equal(got[["qid", "question", "change"]], want)


def _rescued_lost(csv) -> pd.DataFrame:
    """The list computed apart from the harness: the questions where the two models differ."""
    raw = pd.read_csv(csv, dtype={"qid": str}).sort_values("qid", kind="stable")
    differ = raw[raw[f"{BASE}.correct"] != raw[f"{EXTRA}.correct"]]
    return pd.DataFrame({"qid": differ["qid"].to_numpy(), "question": differ["question"].to_numpy(),
                         "change": np.where(differ[f"{EXTRA}.correct"] > differ[f"{BASE}.correct"], "rescued", "lost")})


@pytest.mark.slow
def test_the_default_policies_run_on_a_routerbench_csv_the_others_are_not_applicable(rb_csv, tmp_path):
    proc = run_cli(["-m", "dataset=outcomes", f"dataset.path={rb_csv.name}", *PAIR, "cost.c=0", *FAST], tmp_path,
                   tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "11 jobs, 0 failed, 7 not applicable -> parent run FINISHED" in out
    for name in FEATURE_POLICIES:  # one job line each, and one line in the sweep's summary
        lines = [ln for ln in out.splitlines() if f"] {name} -> not applicable: policy {name} reads " in ln]
        assert len(lines) == 1, name
        assert f"not applicable (1 job): policy {name} reads" in out, name
    assert "Verdict per cost and budget" in out and "FAILED" not in out
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name(f"outcomes/{BASE}-vs-{EXTRA}")
    runs = client.search_runs([exp.experiment_id], max_results=100)
    parent = next(r for r in runs if r.data.tags.get(TAG_ROLE) == "sweep")
    jobs = [r for r in runs if r.data.tags.get(TAG_ROLE) == "job"]
    # no run for a job that is not applicable; every other job FINISHED
    assert sorted(r.info.run_name for r in jobs) == sorted(RUNNING)
    assert {r.info.status for r in jobs} == {"FINISHED"} and parent.info.status == "FINISHED"
    folder = tmp_path / "got"
    listed = pd.read_csv(client.download_artifacts(parent.info.run_id, "not_applicable.csv", str(folder)))
    assert sorted(listed["run_name"]) == sorted(FEATURE_POLICIES)
    verdicts = pd.read_csv(client.download_artifacts(parent.info.run_id, "verdicts.csv", str(folder)))
    assert len(verdicts) == 5  # one per budget of the grid, judged among the policies that ran
    name = f"rescued_lost-{BASE}-vs-{EXTRA}-correct.csv"
    got = pd.read_csv(client.download_artifacts(parent.info.run_id, name, str(folder)), dtype={"qid": str})
    want = _rescued_lost(rb_csv)
    assert len(want) > 20
    pd.testing.assert_frame_equal(got[["qid", "question", "change"]], want)


def test_a_policy_named_by_the_user_that_the_table_cannot_feed_is_one_line(rb_csv, tmp_path, cli):
    code, _, err = cli(["dataset=outcomes", f"dataset.path={rb_csv}", *PAIR, "policy=qpp_ridge"])
    assert code == 2 and err.strip().splitlines() == [
        "error: ConfigError: config key 'policy': policy qpp_ridge reads qpp features (qpp_wig_dense and 11 more); "
        "the outcome table has none (give feat.<name> columns)"]
    code, _, err = cli(["-m", "dataset=outcomes", f"dataset.path={rb_csv}", *PAIR, "policy=always_keep,ridge",
                        "cost.c=0"])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("error: ConfigError: config key 'policy': policy ridge reads baseline features")
    assert "a policy named on the command line must run on the table" in err
    runs = [p for p in tmp_path.rglob("mlflow.db")]
    for db in runs:  # nothing was tracked: no run of either command
        client = MlflowClient(tracking_uri=f"sqlite:///{db}")
        assert not [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
