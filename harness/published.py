"""The source papers' published figures that ``docs/results.md`` puts beside ours.

Why a module of its own: a results page must never type a number of ours by hand, but the
papers' numbers can only be typed; keeping them here, each with the passage it comes from
(``quote``: a verbatim piece of the paper's text in ``shared/seeds/``, checked by
tests/test_results_page.py whenever those files are at hand), keeps the two kinds apart.

Each ``Figure`` names the paper (seed id), where in the paper (section or table, and the
column for a table), the setting the number belongs to (dataset, model, retrieval) and the
value as the paper prints it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    key: str  # stable name used by harness.results
    paper: str  # seed id: "000", "002", "003"
    where: str  # section / table of the paper
    setting: str  # dataset, model, retrieval the figure belongs to
    text: str  # the value as printed (units included)
    quote: str  # a verbatim passage of the paper holding the value


PAPERS = {
    "000": "Zhao, \"When Is Additional Retrieval Worthwhile? A Cost-Aware Study of Evidence Gain and Answer "
           "Reliability in RAG\" (seed 000; seed 001 is a reader's summary of the same paper)",
    "002": "Dado, Carmel, Kurland, \"Predicting the Benefit of Retrieval Augmentation in Open-Domain Question "
           "Answering\" (seed 002, arXiv 2604.07985)",
    "003": "\"When Should Active RAG Retrieve? A Budget-Aware Evaluation of Utility, Calibration, and Cost\" (seed 003)",
}

_S0 = "QASPER train split, 60 held-out papers (188 questions, 169 with matched evidence), MiniLM + ms-marco cross-encoder"
_S3 = "HotpotQA distractor, 2,000 validation questions, BM25 top 5 over the candidate paragraphs, Qwen2.5-1.5B-Instruct"
_S3_SMOL = "HotpotQA distractor, 2,000 validation questions, BM25 top 5, SmolLM2-1.7B-Instruct"
_S2 = "HotpotQA, 3,600 test questions, BM25 over a Wikipedia dump (top 5 for RAG), Falcon3-10B; Q_E5 / Q_CE / Q_NLI"

FIGURES: tuple[Figure, ...] = (
    # ---- seed 000 ---------------------------------------------------------------------------
    Figure("s0.hit_keep", "000", "What it claims", _S0, "76.92",
           "matches always-hybrid Hit@10 (78.70% vs 76.92% for always-keep)"),
    Figure("s0.hit_hybrid", "000", "What it claims", _S0, "78.70",
           "matches always-hybrid Hit@10 (78.70% vs 76.92% for always-keep)"),
    Figure("s0.hit_adaptive", "000", "What it claims", _S0, "78.70",
           "matches always-hybrid Hit@10 (78.70% vs 76.92% for always-keep)"),
    Figure("s0.calls", "000", "What it claims", _S0, "46 of 188", "it calls hybrid on 46 of 188 questions"),
    Figure("s0.hybrid_rescues_harms", "000", "Evidence", _S0, "5 / 2",
           "always-hybrid gives 5 rescues and 2 harms relative to keep"),
    Figure("s0.adaptive_rescues_harms", "000", "Evidence", _S0, "4 / 1",
           "The adaptive policy gets 4 rescues and 1 harm"),
    Figure("s0.u_adaptive", "000", "Evidence", _S0, "0.7819", "Unitized utility is 0.7819 for adaptive"),
    Figure("s0.u_hybrid", "000", "Evidence", _S0, "0.7670", "0.7670 for always-hybrid"),
    Figure("s0.u_keep", "000", "Evidence", _S0, "0.7692", "0.7692 for always-keep"),
    Figure("s0.ci_keep", "000", "Evidence", _S0, "[-0.0114, 0.0385]", "[−0.0114, 0.0385] versus keep"),
    Figure("s0.ci_hybrid", "000", "Evidence", _S0, "[-0.0021, 0.0328]", "[−0.0021, 0.0328] versus hybrid"),
    Figure("s0.tau", "000", "How it works", _S0, "0.0310", "Hybrid runs when predicted Δ ≥ τ = 0.0310"),
    Figure("s0.dev_rescues_harms", "000", "Evidence", "QASPER train split, 240 development papers (690 questions)",
           "16 / 7", "It had only 16 potential hybrid rescues and 7 harms"),
    # ---- seed 003 ---------------------------------------------------------------------------
    Figure("s3.acc_noret", "003", "Table 1 (text)", _S3, "15.4%",
           "always retrieving improves HotpotQA accuracy from 15.4% to 43.4%"),
    Figure("s3.acc_rag", "003", "Table 1 (text)", _S3, "43.4%",
           "always retrieving improves HotpotQA accuracy from 15.4% to 43.4%"),
    Figure("s3.benefit", "003", "Table 1 (text)", _S3, "31.9%", "retrieval benefit occurs on 31.9% of examples"),
    Figure("s3.harm", "003", "Table 2 (text), candidate BM25", _S3, "3.4%",
           "increases harm from 3.4% to 5.8%"),
    Figure("s3.dep50_bur_linear", "003", "Table 3 (text)", _S3, "33.8%",
           "BUR-linear reaches 33.8% deployable accuracy at the 50% target"),
    Figure("s3.dep50_min_conf", "003", "Table 3 (text)", _S3, "33.3%", "minimum token confidence reaches 33.3%"),
    Figure("s3.dep50_entropy", "003", "Table 3 (text)", _S3, "32.9%", "entropy reaches 32.9%"),
    Figure("s3.dep50_query", "003", "Table 3 (text)", _S3, "31.8%",
           "the query-only Adaptive-RAG-style baseline reaches 31.8%"),
    Figure("s3.exact50_bur_linear", "003", "Table 3 (text)", _S3, "32.7%",
           "BUR-linear and minimum confidence both reach 32.7%"),
    Figure("s3.exact50_min_conf", "003", "Table 3 (text)", _S3, "32.7%",
           "BUR-linear and minimum confidence both reach 32.7%"),
    Figure("s3.exact50_entropy", "003", "Table 3 (text)", _S3, "32.5%", "entropy reaches 32.5%, and the oracle reaches 45.9%"),
    Figure("s3.exact50_oracle", "003", "Table 3 (text)", _S3, "45.9%", "the oracle reaches 45.9%"),
    Figure("s3.exact50_random", "003", "Table 4 (text)", _S3, "27.9%",
           "Qwen2.5-1.5B reaches 32.7% at exact 50% usage, compared with 27.9% random"),
    Figure("s3.violation50", "003", "Table 3 (text)", _S3, "65.7%",
           "65.7% for HotpotQA/Qwen2.5-1.5B"),
    Figure("s3.violation_range", "003", "Table 3 (text)", _S3, "40% to 100%",
           "their split-level violation rates range from 40% to 100% when any overshoot counts"),
    Figure("s3.bur_usage", "003", "Budget-safe calibration (text)", _S3, "51.6% -> 46.5%",
           "usage drops from 51.6% under nominal thresholding to 46.5% under the conservative rule"),
    Figure("s3.bur_acc", "003", "Budget-safe calibration (text)", _S3, "33.8% -> 32.0%",
           "with accuracy moving from 33.8% to 32.0%"),
    Figure("s3.query_usage", "003", "Budget-safe calibration (text)", _S3, "49.3% -> 44.9%",
           "it reduces usage from 49.3% to 44.9%"),
    Figure("s3.query_acc", "003", "Budget-safe calibration (text)", _S3, "31.8% -> 30.6%",
           "accuracy from 31.8% to 30.6%"),
    Figure("s3.smol_noret", "003", "Table 4 (text)", _S3_SMOL, "9.8%",
           "a lower no-retrieval baseline than the main Qwen run (9.8% vs. 15.4%)"),
    Figure("s3.smol_rag", "003", "Table 4 (text)", _S3_SMOL, "30.6%", "retrieval still raises accuracy to 30.6%"),
    Figure("s3.smol_benefit", "003", "Table 4 (text)", _S3_SMOL, "23.5%", "with 23.5% beneficial cases"),
    Figure("s3.smol_harm", "003", "Table 4 (text)", _S3_SMOL, "2.6%", "and 2.6% harmful cases"),
    Figure("s3.smol_exact50_best", "003", "Table 4 (text)", _S3_SMOL, "23.4%",
           "its best router reaches 23.4% compared with a 20.0% random policy"),
    Figure("s3.smol_exact50_random", "003", "Table 4 (text)", _S3_SMOL, "20.0%",
           "its best router reaches 23.4% compared with a 20.0% random policy"),
    Figure("s3.smol_exact50_oracle", "003", "Table 4 (text)", _S3_SMOL, "33.1%", "the oracle is 33.1%"),
    # ---- seed 002 (Table 1: Pearson r with the gain; HotpotQA, Falcon, BM25) -------------------
    Figure("s2.r_nqc", "002", "Table 1, HotpotQA / Falcon / BM25", _S2, ".067 / .107 / .107",
           "| NQC | .108 | .081 | .083 | .098 | .067 | .085 | .067 | .107 | .107 |"),
    Figure("s2.r_qc", "002", "Table 1, HotpotQA / Falcon / BM25", _S2, ".112 / .106 / .136",
           "| QC | .199 | .185 | .190 | .154 | .117 | .147 | .112 | .106 | .136 |"),
    Figure("s2.r_wig", "002", "Table 1, HotpotQA / Falcon / BM25", _S2, ".089 / .095 / .124",
           "| WIG | .158 | .149 | .136 | .157 | .100 | .122 | .089 | .095 | .124 |"),
    Figure("s2.r_uwig", "002", "Table 1, HotpotQA / Falcon / BM25", _S2, ".122 / .107 / .143",
           "| U_WIG | .141 | .136 | .131 | .164 | .095 | .117 | .122 | .107 | .143 |"),
    Figure("s2.r_smv", "002", "Table 1, HotpotQA / Falcon / BM25", _S2, ".067 / .107 / .107",
           "| SMV | .108 | .081 | .083 | .100 | .067 | .087 | .067 | .107 | .107 |"),
    Figure("s2.r_usmv", "002", "Table 1, HotpotQA / Falcon / BM25", _S2, ".091 / .081 / .108",
           "| U_SMV | .199 | .183 | .189 | .151 | .116 | .146 | .091 | .081 | .108 |"),
    Figure("s2.r_bert_ret", "002", "Table 1, HotpotQA / Falcon / BM25", _S2, ".375 / .324 / .405",
           "| Bert-Ret | .450† | .285† | .428† | .447† | .292† | .312† | .375† | .324† | .405† |"),
    Figure("s2.r_prober", "002", "Table 1, HotpotQA / Falcon / BM25", _S2, ".484 / .408 / .476",
           "| Internal Prober | .530† | .446† | .484† | .603† | .372† | .416† | .484† | .408† | .476† |"),
    Figure("s2.r_uncertainty", "002", "Table 1, HotpotQA / Falcon / BM25", _S2, ".371 / .212 / .280",
           "| Uncertainty | .419 | .251 | .330 | .354 | -.022 | .168 | .371 | .212 | .280 |"),
    Figure("s2.bert_ret_sig", "002", "Section 6.0.2", _S2, "34 out of 36",
           "by a statistically significant margin in most configurations (34 out of 36)"),
    # ---- seed 002 (Table 2: selective RAG; HotpotQA, Falcon, BM25) ---------------------------
    Figure("s2.q_noret", "002", "Table 2, HotpotQA / Falcon / BM25", _S2, ".780 / .188 / .230",
           "| Quality | .786 | .221 | .309 | .795 | .306 | .439 | .780 | .188 | .230 |"),
    Figure("s2.q_rag", "002", "Table 2, HotpotQA / Falcon / BM25", _S2, ".812 / .331 / .386",
           "| Quality | .796 | .284 | .387 | .803 | .345 | .329 | .812 | .331 | .386 |"),
    Figure("s2.q_oracle", "002", "Table 2, HotpotQA / Falcon / BM25", _S2, ".828 / .376 / .443",
           "| Quality | .813 | .339 | .476 | .830 | .448 | .538 | .828 | .376 | .443 |"),
    Figure("s2.gap_bert_ret", "002", "Table 2, HotpotQA / Falcon / BM25", _S2, "0.0% / 2.2% / 8.8%",
           "| Gap | $\\uparrow$29.4% | 0.0% | $\\uparrow$23.6% | $\\uparrow$40.7% | $\\uparrow$21.4% | $\\uparrow$54.1% | 0.0% | $\\uparrow$2.2% | $\\uparrow$8.8% |"),
    Figure("s2.acc_bert_ret", "002", "Table 2, HotpotQA / Falcon / BM25", _S2, "64.1% / 67.4% / 67.4%",
           "| Accuracy | 63.6% | 60.3% | 58.7% | 64.1% | 60.5% | 58.4% | 64.1% | 67.4% | 67.4% |"),
)

BY_KEY = {f.key: f for f in FIGURES}


def figure(key: str) -> Figure:
    return BY_KEY[key]
