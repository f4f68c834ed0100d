"""``python -m harness data power``: rescues, harms, MDD and the plan of a table, equal to the
harness's own statistics computed on the same table; a bad override is one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.power import main, power_facts


def _synthetic_frame():
    from omegaconf import OmegaConf

    from harness.app import build_table
    from harness.config.compose import compose_config

    cfg = OmegaConf.to_container(compose_config(["dataset=synthetic", "experiment=none", "dataset.n_docs=40"]), resolve=True)
    return build_table(cfg).frame


def test_power_facts_count_rescues_and_harms_per_question():
    from harness.paired import sample_size_plan
    from harness.stats import min_detectable_difference

    frame = _synthetic_frame()
    facts = power_facts(frame, "keep", "hybrid", "hit@10")
    keep, hybrid = frame["keep.hit@10"].to_numpy(float), frame["hybrid.hit@10"].to_numpy(float)
    assert facts["rescues"] == int(np.sum((hybrid == 1) & (keep == 0))) > 0
    assert facts["harms"] == int(np.sum((hybrid == 0) & (keep == 1))) > 0
    assert facts["arms"] == {"keep": keep.mean(), "hybrid": hybrid.mean()}
    groups = frame["doc_id"].astype(str).to_numpy()
    assert facts["mdd"] == min_detectable_difference(hybrid - keep, groups)
    assert facts["questions_for_power"] == sample_size_plan(hybrid - keep, groups)["questions"]
    assert (facts["questions"], facts["groups"]) == (len(frame), 40)


@pytest.mark.slow
def test_a_cold_build_keeps_json_on_stdout(capsys, isolated_cache):
    """A real table (BoolQ's first 12 questions, the packaged encoder) built cold: its build
    notice goes to stderr, stdout stays JSON."""
    assert main(["boolq", "dataset.n_questions=12", "--json"]) == 0
    out = capsys.readouterr()
    (row,) = json.loads(out.out)
    assert "building outcome table" in out.err and row["questions"] == row["groups"] == 12
    assert set(row["arms"]) == {"keep", "hybrid", "bm25", "dense"} and row["build_seconds"] > 0


def test_power_command_prints_one_row_per_dataset(capsys):
    assert main(["synthetic", "dataset.n_docs=40", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["dataset"] == "synthetic" and row["questions"] == 200 and row["base"] == "keep"
    assert main(["synthetic", "dataset.n_docs=40"]) == 0
    head, line, note = capsys.readouterr().out.splitlines()
    assert head.split()[:3] == ["dataset", "questions", "groups"] and line.split()[:3] == ["synthetic", "200", "40"]
    # the plan's column says which comparison and unit it sizes
    assert note.startswith("questions for 80%: questions (of the whole table") and note.endswith(
        "needs for 80% power at alpha 0.05, hybrid vs keep on hit@10")


def test_a_bad_override_is_one_line(capsys):
    assert main(["synthetic", "protocol.nope=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ConfigError:") and "protocol.nope" in err[0], err
