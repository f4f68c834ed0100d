"""``python -m harness features``: every feature the harness writes has a one-line description,
and the command lists a table's feature columns with them, one line each."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.retrieval.feature_descriptions import DESCRIPTIONS, describe
from harness.retrieval.feature_names import FEATURE_SETS, PATTERN, QPP_BASE
from harness.report.features import UNDESCRIBED, feature_lines
from harness.synthetic import synthetic_outcome_table


def _every_named_feature() -> list[str]:
    """Every name of every feature set, a pattern standing for two of its dimensions."""
    out = []
    for names in FEATURE_SETS.values():
        for name in names:
            out += [name[:-1] + "0000", name[:-1] + "0383"] if name.endswith(PATTERN) else [name]
    return out


def test_every_feature_has_a_description():
    missing = [n for n in _every_named_feature() if not describe(n)]
    assert missing == []
    # the names made per run-file arm (harness/arm_blocks/runs.py), per answer arm with retrieval
    # (harness/generation/arms.py) and the prober's cost (harness/generation/hidden_state.py)
    made = ["run_myrun_top1", "run_myrun_margin12", *(f"run_myrun_qpp_{p}" for p in QPP_BASE),
            "rag_keep_unc_mean_entropy", "rag_keep_unc_option_mass", "probe_ms"]
    assert [n for n in made if not describe(n)] == []
    assert "run file arm myrun" in describe("run_myrun_qpp_nqc") and "answer arm rag_keep" in describe(
        "rag_keep_unc_max_entropy")
    assert describe("probe_rag_0042").startswith("dimension 0042 ")
    assert all(text.strip() and "\n" not in text for text in DESCRIPTIONS.values())


def test_every_column_of_a_synthetic_table_is_described():
    frame = synthetic_outcome_table(n_docs=4, questions_per_doc=2, seed=0)
    feats = [c for c in frame.columns if c.startswith("feat.")]
    lines = feature_lines(list(frame.columns))
    assert len(lines) == len(feats) > 20 and not any(UNDESCRIBED in line for line in lines)


def test_unknown_and_plugin_features():
    assert describe("my_signal") is None
    assert describe("my_signal", {"my_signal": "what my block measures"}) == "what my block measures"
    lines = feature_lines(["qid", "keep.hit@10", "feat.dense_top1", "feat.my_signal"])
    assert len(lines) == 2 and lines[0].split()[0] == "dense_top1" and lines[1].endswith(UNDESCRIBED)


def test_features_of_a_table_file(cli, tmp_path):
    table = tmp_path / "t.csv"
    pd.DataFrame({"qid": ["a"], "keep.hit@10": [1], "feat.q_has_digit": [0.0], "feat.mine": [1.0]}).to_csv(table, index=False)
    code, out, err = cli(["features", str(table)])
    assert code == 0 and err == ""
    lines = out.strip().splitlines()
    assert lines[0] == f"table file {table}: 2 feature columns (feat.<name>; a policy reads them with policy.features=...)"
    assert lines[1].split()[0] == "q_has_digit" and DESCRIPTIONS["q_has_digit"] in lines[1]
    assert lines[2].split()[0] == "mine" and UNDESCRIBED in lines[2]
    frame = synthetic_outcome_table(n_docs=3, questions_per_doc=2, seed=0)
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    code, out, _ = cli(["features", str(tmp_path / "t.parquet")])
    assert code == 0 and len(out.strip().splitlines()) == 1 + sum(c.startswith("feat.") for c in frame.columns)


def test_features_of_a_job_table(cli):
    code, out, err = cli(["features", "dataset=synthetic"])
    frame = synthetic_outcome_table()
    assert code == 0 and out.startswith("outcome table synthetic-")
    assert len(out.strip().splitlines()) == 1 + sum(c.startswith("feat.") for c in frame.columns)


@pytest.mark.parametrize("argv, says", [
    (["features", "nope.parquet"], "nope.parquet"),
    (["features", "dataset=synthetic", "arms.k=0"], "arms.k"),
    (["features", "a.parquet", "b.parquet"], "give one table file"),
    (["features", "dataset=synthetic", "dataset=boolq"], "given twice"),
])
def test_bad_features_arguments_are_one_line(cli, argv, says):
    code, out, err = cli(argv)
    assert code == 2 and says in err and err.strip().count("\n") == 0 and out == ""
