"""``cost.c`` derived from a measured cost: ``cost.unit`` (ms | tokens) x ``cost.price``.

The derived c is price x the mean of the extra arm's measured column over every question of the
routing task (``harness.app.resolve_cost``), checked against a brute-force loop on a synthetic
table with measured costs added by hand and on a hand-made tiny table; the config rules fail in
one error naming the key; a tracked single run logs the derived value as its param ``cost.c``
and the metrics ``cost/...``. The synthetic table has no cost columns, so ``dataset=synthetic``
refuses a unit in one line.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from harness import app
from harness.config.compose import compose_config
from harness.config.validation import validate
from harness.store_schema import TAG_CONFIG_HASH
from harness.errors import ConfigError, DataError
from harness.synthetic import synthetic_outcome_table


def _measured_table(seed: int = 1, arms=("keep", "hybrid")) -> pd.DataFrame:
    """The synthetic table plus measured costs (random, positive), a few questions without
    evidence (not in a hit task: their costs must not count)."""
    frame = synthetic_outcome_table(n_docs=20, questions_per_doc=5, seed=0, arms=arms)
    rng = np.random.default_rng(seed)
    n = len(frame)
    frame["has_evidence"] = rng.random(n) > 0.1
    for arm in arms:
        frame[f"{arm}.cost.total_ms"] = rng.uniform(5, 50, n)
        frame[f"{arm}.cost.rerank_pairs"] = rng.integers(10, 30, n).astype(float)
        frame[f"{arm}.marginal.total_ms"] = 0.0 if arm == "keep" else rng.uniform(0, 10, n)
        frame[f"{arm}.marginal.rerank_pairs"] = 0.0 if arm == "keep" else rng.integers(0, 10, n).astype(float)
    return frame


def _handle(frame: pd.DataFrame) -> app.TableHandle:
    return app.TableHandle(frame, key="hand-made", info={"table_sha256": "hand-made-" + str(len(frame))})


def _plain(unit: str | None, price: float | None, base="keep", extra="hybrid", metric="hit@10") -> dict:
    return {"cost": {"name": "t", "c": None, "unit": unit, "price": price},
            "arms": {"base": base, "extra": extra, "metric": metric}}


def _brute_mean(frame: pd.DataFrame, qids, column: str) -> float:
    wanted = set(str(q) for q in qids)
    total, count = 0.0, 0
    for _, row in frame.iterrows():
        if str(row["qid"]) in wanted:
            total += float(row[column])
            count += 1
    return total / count


# ---- the derivation --------------------------------------------------------------------------
@pytest.mark.parametrize("base, extra, column", [
    ("keep", "hybrid", "hybrid.marginal.total_ms"),  # marginal over keep (docs/metrics.md §2)
    ("hybrid", "keep", "keep.cost.total_ms"),  # marginal costs are measured against keep only
    ("bm25", "hybrid", "hybrid.cost.total_ms"),
])
def test_ms_is_price_times_brute_force_mean(base, extra, column):
    frame = _measured_table(arms=(base, extra))
    table = _handle(frame)
    plain = _plain("ms", 1.0e-4, base, extra)
    task = app.make_task(plain, table)
    assert task.n < len(frame)  # questions without evidence are left out of a hit task
    metrics = app.resolve_cost(plain, table, task)
    mean = _brute_mean(frame, task.qids, column)
    assert plain["cost"]["c"] == pytest.approx(1.0e-4 * mean, rel=1e-12)
    assert metrics == pytest.approx({"cost/derived_c": 1.0e-4 * mean, "cost/marginal_ms_per_question": mean,
                                     "cost/price_per_ms": 1.0e-4}, rel=1e-12)
    assert plain["cost"]["unit"] == "ms" and plain["cost"]["price"] == 1.0e-4


def test_ms_falls_back_to_the_stand_alone_cost_without_a_marginal_column():
    frame = _measured_table().drop(columns=["hybrid.marginal.total_ms"])
    plain = _plain("ms", 2.0e-4)
    task = app.make_task(plain, _handle(frame))
    app.resolve_cost(plain, _handle(frame), task)
    assert plain["cost"]["c"] == pytest.approx(2.0e-4 * _brute_mean(frame, task.qids, "hybrid.cost.total_ms"))


def test_hand_made_tiny_tables_both_units():
    # retrieval pair, ms: marginal 2, 4, 6, 8 ms -> 5 ms per question; 1e-4 per ms -> c = 5e-4
    tiny = pd.DataFrame({"qid": ["a", "b", "c", "d", "e"],
                         "hybrid.marginal.total_ms": [2.0, 4.0, 6.0, 8.0, 1000.0],
                         "hybrid.cost.total_ms": [20.0, 40.0, 60.0, 80.0, 1000.0]})
    task = SimpleNamespace(base_arm="keep", extra_arm="hybrid", qids=np.array(["a", "b", "c", "d"]))  # e: not in the task
    plain = _plain("ms", 1.0e-4)
    metrics = app.resolve_cost(plain, _handle(tiny), task)
    assert plain["cost"]["c"] == pytest.approx(5.0e-4)
    assert metrics["cost/marginal_ms_per_question"] == pytest.approx(5.0)
    # answer pair, tokens: 100, 300 tokens -> 200 per question; 1e-5 per token -> c = 0.002
    answers = pd.DataFrame({"qid": ["q1", "q2"], "doc_id": ["d1", "d2"],
                            "no_retrieval.correct": [0.0, 1.0], "rag_keep.correct": [1.0, 1.0],
                            "no_retrieval.cost.tokens": [50.0, 70.0], "rag_keep.cost.tokens": [100.0, 300.0],
                            "rag_keep.cost.total_ms": [900.0, 1100.0]})
    plain = _plain("tokens", 1.0e-5, "no_retrieval", "rag_keep", "correct")
    task = app.make_task(plain, _handle(answers))
    metrics = app.resolve_cost(plain, _handle(answers), task)
    assert plain["cost"]["c"] == pytest.approx(0.002)
    assert metrics == pytest.approx({"cost/derived_c": 0.002, "cost/marginal_tokens_per_question": 200.0,
                                     "cost/price_per_tokens": 1.0e-5})
    # ... and ms of an answer pair: the RAG call's wall time (1000 ms) x 1e-4 -> 0.1
    plain = _plain("ms", 1.0e-4, "no_retrieval", "rag_keep", "correct")
    app.resolve_cost(plain, _handle(answers), task)
    assert plain["cost"]["c"] == pytest.approx(0.1)


def test_abstract_c_is_left_alone():
    plain = {"cost": {"name": "default", "c": 0.02}, "arms": {}}
    frame = _measured_table()
    assert app.resolve_cost(plain, _handle(frame), app.make_task(plain, _handle(frame))) == {}
    assert plain["cost"] == {"name": "default", "c": 0.02}


def test_tokens_on_a_retrieval_table_names_the_key_and_the_columns():
    frame = _measured_table()
    plain = _plain("tokens", 1.0e-5)
    with pytest.raises(ConfigError) as err:
        app.resolve_cost(plain, _handle(frame), app.make_task(plain, _handle(frame)))
    assert err.value.key == "cost.unit"
    assert "hybrid.cost.tokens" in str(err.value) and "hybrid.marginal.total_ms" in str(err.value)
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_missing_or_non_finite_cost_names_the_column(bad):
    frame = _measured_table()
    plain = _plain("ms", 1.0e-4)
    task = app.make_task(plain, _handle(frame))
    frame.loc[frame["qid"] == task.qids[3], "hybrid.marginal.total_ms"] = bad
    with pytest.raises(DataError) as err:
        app.resolve_cost(plain, _handle(frame), task)
    assert err.value.field == "hybrid.marginal.total_ms" and str(task.qids[3]) in str(err.value)
    assert plain["cost"]["c"] is None  # nothing derived


# ---- the config rules ------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, key", [
    (["cost=measured_ms", "cost.c=0.02"], "cost.c"),  # both given: c is derived
    (["cost.unit=ms"], "cost.c"),  # the default c with a unit
    (["cost=measured_ms", "cost.unit=usd"], "cost.unit"),
    (["cost=measured_ms", "cost.unit=sm"], "cost.unit"),
    (["cost=measured_ms", "cost.price=-1"], "cost.price"),
    (["cost=measured_ms", "cost.price=nan"], "cost.price"),
    (["cost=measured_ms", "cost.price=inf"], "cost.price"),
    (["cost=measured_ms", "cost.price=null"], "cost.price"),
    (["cost.price=0.1"], "cost.price"),  # a price without a unit
    (["cost.c=null"], "cost.c"),  # neither c nor a unit
    (["cost=measured_tokens"], "cost.unit"),  # keep vs hybrid: a retrieval pair has no tokens
    (["cost=measured_tokens", "arms=keep_bm25"], "cost.unit"),
    (["cost=measured_ms", "dataset=synthetic"], "cost.unit"),  # the synthetic table has no costs
])
def test_validation_names_the_key(overrides, key):
    with pytest.raises(ConfigError) as err:
        validate(compose_config(overrides))
    assert err.value.key == key, str(err.value)
    assert len(str(err.value).splitlines()) == 1


def test_unit_typo_suggests_the_unit():
    with pytest.raises(ConfigError, match="did you mean 'tokens'"):
        validate(compose_config(["cost=measured_ms", "cost.unit=token"]))


@pytest.mark.parametrize("overrides", [["cost=measured_ms"], ["cost=measured_ms", "arms=keep_bm25"],
                                       ["cost=measured_ms", "cost.price=0"]])
def test_measured_configs_validate(overrides):
    validate(compose_config(overrides))


def test_measured_config_files():
    ms = app.to_plain(compose_config(["cost=measured_ms"]))["cost"]
    assert ms == {"name": "measured_ms", "c": None, "unit": "ms", "price": 1.0e-4}
    tokens = app.to_plain(compose_config(["cost=measured_tokens"]))["cost"]
    assert tokens == {"name": "measured_tokens", "c": None, "unit": "tokens", "price": 1.0e-5}


def test_an_abstract_c_keeps_the_plain_config_and_its_hash():
    """A null unit and price are left out of the plain config: the default sweep's config hashes
    (and skip keys) are what they were before cost.unit existed."""
    from harness.tracking import naming

    plain = app.to_plain(compose_config(["dataset=synthetic"]))
    assert plain["cost"] == {"name": "default", "c": 0.02}
    assert naming.config_hash(plain) == naming.config_hash({**plain, "cost": {"name": "default", "c": 0.02}})
    assert app.to_plain(dict(plain))["cost"] == {"name": "default", "c": 0.02}


def test_run_name_and_cost_note():
    from harness.console import cost_note, run_name

    plain = {"policy": {"name": "ridge"}, "seed": 0, "cost": {"name": "measured_ms", "c": None, "unit": "ms", "price": 1e-4}}
    assert run_name(plain) == "ridge c=0.0001/ms seed=0"
    assert run_name({**plain, "cost": {"name": "default", "c": 0.02}}) == "ridge c=0.02 seed=0"
    metrics = {"cost/derived_c": 0.00081, "cost/marginal_ms_per_question": 8.1, "cost/price_per_ms": 1e-4}
    note = cost_note(plain["cost"], metrics)
    assert note.startswith("c = 0.00081 (derived: price 0.0001 per ms x 8.1 ms") and "\n" not in note
    assert cost_note({"name": "default", "c": 0.02}, {}) is None


# ---- end to end ------------------------------------------------------------------------------
def test_tracked_single_run_logs_the_derived_c(tmp_path, monkeypatch, isolated_cache):
    """A single run with cost=measured_ms on a table with measured costs (the synthetic table
    plus cost columns, handed to the job in place of the default dataset's table): the param
    cost.c is the derived value, the metrics hold cost/..., summary.txt says how c came about,
    and the config hash (computed before) holds the unit and the price."""
    from mlflow.tracking import MlflowClient

    from harness.runner import job as runner
    from harness.tracking import naming

    frame = _measured_table()
    monkeypatch.setattr(runner, "load_table", lambda cfg, handle_file=None: _handle(frame))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["cost=measured_ms", "experiment=none", "protocol=threshold",
                                                       "policy=always_extra", f"tracking.uri={uri}"])
    unresolved = app.to_plain(cfg)
    out = runner.run_job(cfg)
    assert out["status"] == "FINISHED"
    task = app.make_task(unresolved, _handle(frame))
    mean = _brute_mean(frame, task.qids, "hybrid.marginal.total_ms")
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(out["run_id"])
    assert float(run.data.params["cost.c"]) == pytest.approx(1.0e-4 * mean, rel=1e-12)
    assert run.data.params["cost.unit"] == "ms" and float(run.data.params["cost.price"]) == 1.0e-4
    assert run.data.metrics["cost/derived_c"] == pytest.approx(1.0e-4 * mean, rel=1e-12)
    assert run.data.metrics["cost/marginal_ms_per_question"] == pytest.approx(mean, rel=1e-12)
    assert run.data.metrics["cost/price_per_ms"] == 1.0e-4
    assert run.data.tags[TAG_CONFIG_HASH] == naming.config_hash(unresolved)
    assert run.info.run_name == "always_extra c=0.0001/ms seed=0"
    # always-extra pays c on every held-out question: utility = hit - c
    m = run.data.metrics
    assert m["heldout/utility"] == pytest.approx(m["heldout/hit_at_10"] - 1.0e-4 * mean, abs=1e-12)
    path = client.download_artifacts(out["run_id"], "summary.txt", str(tmp_path / "dl"))
    first = open(path, encoding="utf-8").read().splitlines()[0]
    assert first.startswith(f"c = {1.0e-4 * mean:.4g} (derived: price 0.0001 per ms x")


def test_synthetic_dataset_refuses_a_measured_cost_in_one_line(tmp_path, cli):
    code, _, err = cli(["dataset=synthetic", "cost=measured_ms", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}"])
    assert code == 2, err[-2000:]
    errors = err.strip().splitlines()
    assert len(errors) == 1 and "config key 'cost.unit'" in errors[0] and "synthetic" in errors[0], err
