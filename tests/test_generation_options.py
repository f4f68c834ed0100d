"""Option scoring for yes/no questions: each option's log-likelihood right after the prompt
(one evaluation, the full next-token distribution), answer = the best option, uncertainty =
the exact entropy and margin of the option distribution; selectable per answer arm
(``mode: options``), open questions still decoded."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from harness.generation import GenerationError
from harness.generation.arms import NoRetrievalArm, option_uncertainty
from harness.generation.options import OptionScores, check_options, option_logprobs

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "data" / "qasper-fixture-v0.3.json"


def test_the_option_distribution_by_hand():
    s = OptionScores(("Yes", "No"), (math.log(0.3), math.log(0.1)), prompt_tokens=10)
    assert s.probs == pytest.approx((0.75, 0.25))
    assert s.best == "Yes" and s.mass == pytest.approx(0.4)
    assert s.entropy == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert s.margin == pytest.approx(math.log(3))
    tie = OptionScores(("Yes", "No"), (-1.0, -1.0), prompt_tokens=1)
    assert tie.best == "Yes" and tie.entropy == pytest.approx(math.log(2)) and tie.margin == 0
    f = option_uncertainty(s)
    assert f["unc_mean_entropy"] == f["unc_max_entropy"] == s.entropy
    assert f["unc_min_confidence"] == pytest.approx(0.25) and f["unc_answer_tokens"] == 1.0


def test_options_must_be_single_vocabulary_pieces():
    dist = [{"token": "Yes", "logprob": -1.0}, {"token": "No", "logprob": -2.0}, {"token": "May", "logprob": -3.0},
            {"token": "No", "logprob": -4.0}]
    assert option_logprobs(dist[:3], ("Yes", "No"), "src") == (-1.0, -2.0)
    with pytest.raises(GenerationError, match="'Maybe' is not one piece"):
        option_logprobs(dist, ("Yes", "Maybe"), "src")
    with pytest.raises(GenerationError, match="'No' is 2 pieces"):
        option_logprobs(dist, ("Yes", "No"), "src")
    with pytest.raises(GenerationError, match=r"top_logprobs\[0\]\.logprob is 0\.5"):
        option_logprobs([{"token": "Yes", "logprob": 0.5}], ("Yes", "No"), "src")
    for bad in (["Yes"], ["Yes", "Yes"], ["Yes", ""]):
        with pytest.raises(ValueError):
            check_options(bad)


def test_mode_is_checked_and_keyed():
    assert NoRetrievalArm(mode="options").identity() != NoRetrievalArm().identity()
    with pytest.raises(ValueError, match="'mode': must be one of"):
        NoRetrievalArm(mode="greedy")
    with pytest.raises(ValueError, match="only the llama.cpp"):
        NoRetrievalArm(mode="options", generator="http://127.0.0.1:9")


@pytest.mark.slow
def test_option_scores_are_the_engines_full_distribution_and_the_arm_uses_them(tmp_path):
    pytest.importorskip("xllamacpp", reason="xllamacpp (the llama.cpp wheel) is not installed")
    from harness.arm_blocks.build import build_block
    from harness.data import load_dataset
    from harness.generation import GenerationConfig, LlamaCppGenerator, no_retrieval_messages

    prompt = no_retrieval_messages("Is Python a programming language?", boolean=True)
    with LlamaCppGenerator(config=GenerationConfig(max_tokens=1, top_k=20)) as gen:
        scored = gen.score_options(prompt)
        first = gen.generate(prompt).tokens[0]  # the decoded first step's top 20 alternatives
    top = {t.token: t.logprob for t in first.top}
    for option, lp in zip(scored.options, scored.logprobs):
        assert math.isfinite(lp) and lp < 0
        if option in top:  # the same engine step: the same numbers
            assert top[option] == lp
    assert 0 < scored.mass <= 1 and 0 <= scored.entropy <= math.log(2) and scored.prompt_tokens > 20
    # the top entries and the whole vocabulary give the same values (the whole one is forced here)
    import harness.generation.llamacpp as llamacpp

    with LlamaCppGenerator(config=GenerationConfig(max_tokens=1)) as gen:
        whole = llamacpp.OPTION_TOP_N
        try:
            llamacpp.OPTION_TOP_N = 1  # only the best piece: at most one option among them
            forced = gen.score_options(prompt)
        finally:
            llamacpp.OPTION_TOP_N = whole
    assert forced.logprobs == scored.logprobs

    dataset = load_dataset({"name": "qasper", "loader": "qasper", "path": str(FIXTURE)})
    rows = pd.DataFrame({"qid": sorted(q.qid for q in dataset.questions)})
    frame, _ = build_block(NoRetrievalArm(mode="options", max_tokens=8), rows, dataset, base_key="b",
                           required_keys={"base": "b"}, cache_dir=tmp_path)
    by_qid = frame.set_index("qid")
    kinds = {q.qid: q.answer_type for q in dataset.questions}
    assert "yes_no" in kinds.values() and set(kinds.values()) - {"yes_no"}  # both kinds in the fixture
    for qid, kind in kinds.items():
        row = by_qid.loc[qid]
        if kind == "yes_no":
            assert row["no_retrieval.answer"] in ("Yes", "No") and row["no_retrieval.cost.output_tokens"] == 0
            p = 1 / (1 + math.exp(-row["feat.unc_option_margin"]))  # two options: p_best from the margin
            assert row["feat.unc_mean_entropy"] == pytest.approx(-(p * math.log(p) + (1 - p) * math.log(1 - p)))
            assert row["feat.unc_min_confidence"] == pytest.approx(1 - p)
        else:  # open questions are decoded, as in mode generate
            assert row["no_retrieval.cost.output_tokens"] >= 1 and math.isnan(row["feat.unc_option_margin"])


@pytest.mark.slow
def test_multiple_choice_scores_the_option_letters_exactly(tmp_path):
    """SciQ as multiple choice: the memory arm scores the letters A-D after a prompt that lists the
    options; its answer is the best letter's option and its entropy equals scipy's entropy of the
    letters' probabilities read from the engine's decoded first step (an independent path)."""
    pytest.importorskip("xllamacpp", reason="xllamacpp (the llama.cpp wheel) is not installed")
    from scipy.special import softmax
    from scipy.stats import entropy

    from harness.arm_blocks.build import build_block
    from harness.data import load_dataset
    from harness.generation import GenerationConfig, LlamaCppGenerator, score_answer
    from harness.generation.options import choice_letters

    dataset = load_dataset({"loader": "sciq", "choices": True, "n_questions": 4})
    arm = NoRetrievalArm(mode="options", max_tokens=8)
    rows = pd.DataFrame({"qid": [q.qid for q in dataset.questions]})
    frame, _ = build_block(arm, rows, dataset, base_key="b", required_keys={"base": "b"}, cache_dir=tmp_path)
    by_qid = frame.set_index("qid")
    with LlamaCppGenerator(config=GenerationConfig(max_tokens=1, top_k=20)) as gen:
        for q in dataset.questions:
            row = by_qid.loc[q.qid]
            prompt = arm.prompt(q, None, {}, False)
            assert "\nA. " in prompt.messages[1]["content"] and "\nD. " in prompt.messages[1]["content"]
            top = {t.token: t.logprob for t in gen.generate(prompt).tokens[0].top}
            letters = choice_letters(len(q.choices))
            assert set(letters) <= set(top), f"{q.qid}: a letter outside the first step's top 20"
            lps = [top[x] for x in letters]
            best = max(range(len(letters)), key=lambda i: (lps[i], -i))
            assert row["no_retrieval.answer"] == q.choices[best] and row["no_retrieval.cost.output_tokens"] == 0
            assert row["feat.unc_mean_entropy"] == pytest.approx(entropy(softmax(lps)), abs=1e-9)
            assert row["feat.unc_min_confidence"] == pytest.approx(1 - softmax(lps).max(), abs=1e-9)
            assert 0 <= row["feat.unc_mean_entropy"] <= math.log(len(letters))
            assert row["no_retrieval.correct"] == float(score_answer(q.choices[best], q.answers, choices=q.choices).correct)
            assert row["no_retrieval.correct"] == float(q.choices[best] == q.answers[0])
