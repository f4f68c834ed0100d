"""The ``pipeline`` group (rerank depth, passages to the LLM) sets ``arms.candidates`` and the
outcome metric's k consistently, leaves a default job's config as it was, refuses what would not
mean what it says in one line naming the key; pools no larger than the rerank depth are said
before any build; the "nothing to route" lines name every setting that can cause it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness import app
from harness.config.compose import compose_config
from harness.config.validation import validate
from harness.data.pool_depth import DEFAULT_RERANK_DEPTH, same_rerank_set
from harness.data.schema import Dataset, Question, Unit
from harness.errors import ConfigError
from harness.preflight import ROUTING_SETTINGS, nothing_to_route
from harness.retrieval.arms import ArmParams
from harness.runner.sweep_end import table_warnings
from harness.tracking.naming import config_hash


def _plain(*overrides: str) -> dict:
    return app.to_plain(compose_config(list(overrides)))


def test_unset_pipeline_leaves_the_default_config_and_its_hash_as_before():
    plain = _plain()
    assert "pipeline" not in plain
    # the values conf/arms/keep_hybrid.yaml held as literals before the group existed
    assert plain["arms"]["candidates"] == 30 == DEFAULT_RERANK_DEPTH == ArmParams().candidates
    assert plain["arms"]["metric"] == "hit@10"
    explicit = _plain("pipeline.rerank_depth=null", "pipeline.passages_to_llm=null")
    assert explicit == plain and config_hash(explicit) == config_hash(plain)
    assert "pipeline" not in _plain("arms=noret_rag") and _plain("arms=noret_rag")["arms"]["candidates"] == 30


def test_set_pipeline_sets_candidates_and_the_metric_k():
    cfg = compose_config(["pipeline.rerank_depth=20", "pipeline.passages_to_llm=5"])
    validate(cfg)
    plain = app.to_plain(cfg)
    assert plain["arms"]["candidates"] == 20 and plain["arms"]["metric"] == "hit@5"
    assert plain["pipeline"] == {"rerank_depth": 20, "passages_to_llm": 5}
    assert config_hash(plain) != config_hash(_plain())
    # a dataset routed on all@k keeps its family at the LLM's k
    assert _plain("dataset=hotpotqa", "pipeline.passages_to_llm=5")["arms"]["metric"] == "all@5"
    # the same value given both ways is one setting, not a conflict
    validate(compose_config(["pipeline.rerank_depth=20", "arms.candidates=20"]))


@pytest.mark.parametrize("overrides, key, says", [
    (["pipeline.rerank_depth=5"], "pipeline.rerank_depth", "below arms.k=10"),
    (["pipeline.rerank_depth=0"], "pipeline.rerank_depth", "integer in [1,"),
    (["pipeline.rerank_depth=20", "arms.candidates=40"], "pipeline.rerank_depth", "arms.candidates=40 is set too"),
    (["dataset=synthetic", "pipeline.rerank_depth=20"], "pipeline.rerank_depth", "synthetic table reranks nothing"),
    (["pipeline.passages_to_llm=20"], "pipeline.passages_to_llm", "above arms.k=10"),
    (["dataset=synthetic", "pipeline.passages_to_llm=5"], "pipeline.passages_to_llm", "metrics are @10 only"),
    (["dataset=synthetic", "pipeline.passages_to_llm=10"], None, None),
    (["dataset=synthetic", "arms.metric=hit@5"], "arms.metric", "hit@10, recall@10, mrr@10 only"),
    (["pipeline.rerank_depth=12", "pipeline.passages_to_llm=11", "arms.k=12"], None, None),
    (["pipeline.rerank_depth=12", "pipeline.passages_to_llm=13", "arms.k=13"], "pipeline.rerank_depth", "below arms.k=13"),
    (["pipeline.passages_to_llm=5", "arms.metric=hit@3"], "pipeline.passages_to_llm", "arms.metric='hit@3' is set too"),
    (["arms=noret_rag", "pipeline.passages_to_llm=3"], "pipeline.passages_to_llm", "judges answers"),
])
def test_pipeline_refusals_name_the_key(overrides, key, says):
    cfg = compose_config(overrides)
    if key is None:
        validate(cfg)
        return
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert info.value.key == key and says in info.value.problem and "\n" not in str(info.value)


def test_pipeline_error_is_one_line_on_the_cli(cli):
    code, out, err = cli(["table", "build", "dataset=synthetic", "pipeline.rerank_depth=20"])
    assert code == 2 and err.strip().count("\n") == 0 and "pipeline.rerank_depth" in err and "Traceback" not in err


def _dataset(pool_sizes: list[int]) -> Dataset:
    """Questions over pools of the given sizes (one question per pool, its gold the first unit)."""
    docs, pools, questions = {}, {}, []
    for p, size in enumerate(pool_sizes):
        units = [Unit(f"d{p}#{i}", f"d{p}", i, "paragraph", f"text {p} {i}") for i in range(size)]
        docs[f"d{p}"] = units
        pools[f"pool{p}"] = [u.unit_id for u in units]
        questions.append(Question(f"q{p}", f"d{p}", f"pool{p}", f"question {p}", gold_unit_ids=(units[0].unit_id,)))
    return Dataset("tiny", docs, questions, pools)


def test_same_rerank_set_when_no_pool_is_larger_than_the_depth():
    assert same_rerank_set(_dataset([31]), 30) is None  # one unit more than the depth: the sets can differ
    assert same_rerank_set(_dataset([5, 31]), 30) is None  # one question can differ
    line = same_rerank_set(_dataset([30]), 30)
    assert line.startswith("the one pool holds 30 units, no more than the rerank depth 30 (pipeline.rerank_depth, "
                           "arms.candidates)") and "set pipeline.rerank_depth=29 or lower" in line
    line = same_rerank_set(_dataset([5, 12]), 20, k=10)
    assert "every question's pool holds at most 12 units" in line and "pipeline.rerank_depth=11 or lower" in line
    line = same_rerank_set(_dataset([4, 8]), 30, k=10)
    assert "no larger than arms.k=10 either" in line and "set pipeline.rerank_depth=" not in line


def test_table_build_warns_before_building(monkeypatch, capsys):
    import harness.data
    import harness.retrieval.table

    monkeypatch.setattr(harness.data, "load_dataset", lambda ds: _dataset([20]))

    def no_build(*args, **kwargs):
        print("BUILDING")
        raise RuntimeError("stop before the build")

    monkeypatch.setattr(harness.retrieval.table, "build_outcome_table", no_build)
    plain = _plain("dataset=boolq", "dataset.n_questions=20")
    with pytest.raises(RuntimeError):
        app.build_table(plain)
    out = capsys.readouterr().out
    assert out.index("[route-bench] warning: the one pool holds 20 units") < out.index("BUILDING")
    with pytest.raises(RuntimeError):  # keep vs dense: not two reranked arms, nothing to say
        app.build_table(_plain("dataset=boolq", "dataset.n_questions=20", "arms=keep_dense"))
    assert "warning" not in capsys.readouterr().out


def test_data_prints_pool_sizes_and_warns(monkeypatch, capsys):
    import harness.data
    from harness.data.cli import main

    monkeypatch.setattr(harness.data, "load_dataset", lambda cfg, require_evidence=True: _dataset([6, 9]))
    assert main(["boolq", "--rerank-depth", "8"]) == 0
    out, err = capsys.readouterr()
    assert "units per question's pool" in out and "6-9" in out and err == ""
    assert main(["boolq", "--rerank-depth", "9"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("warning: every question's pool holds at most 9 units, no more than the rerank depth 9")
    assert main(["boolq", "--rerank-depth", "0"]) == 2


def test_nothing_to_route_lines_name_every_setting_behind_it():
    for setting in ("arms.metric", "pipeline.passages_to_llm", "arms.k", "pipeline.rerank_depth", "arms.candidates",
                    "arms.base", "arms.extra", "pools"):
        assert setting in ROUTING_SETTINGS
    task = SimpleNamespace(n=3, base=[1, 0, 1], extra=[1, 0, 1], base_arm="keep", extra_arm="hybrid", metric="hit@10")
    assert nothing_to_route(task).endswith(f"check {ROUTING_SETTINGS}")
    run = SimpleNamespace(info=SimpleNamespace(status="FINISHED"), data=SimpleNamespace(
        metrics={"table/rescues": 0.0, "table/harms": 0.0}, tags={"route_bench.table_key": "a" * 64}))
    assert table_warnings([run], "hit@10")[0].endswith(f"check {ROUTING_SETTINGS}")
