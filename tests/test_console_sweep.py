"""Console and MLflow a person can compare (issue 11): one line per sweep job, run names that
carry every swept key, result.json in each Hydra job folder, the full text in the job's log,
descriptions, tags, dataset input and headline metrics in MLflow, ``--help``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import console
from harness.tracking import mlflow_tracker as mt, naming, run_notes
from harness.store_schema import TAG_ARMS, TAG_BUDGET_GRID, TAG_CONFIG_HASH, TAG_DATASET, TAG_GIT_COMMIT, TAG_NOTE, TAG_POLICY, TAG_SWEEP_ID
from tests.helpers.sweeps import SMALL, run_cli, runs_by_role, store_uri

DEFAULT_LIKE = ["-m", *SMALL, "policy=always_keep,ridge", "cost.c=0.0,0.02", "protocol=threshold_budget"]
NAMES = ["-m", *SMALL, "policy=ridge", "policy.features=baseline,qpp", "seed=0,1", "budget=default,fine",
         "protocol=threshold", "verbose=true"]
LINE = re.compile(r"^\[(\d+)/(\d+)\] (.+) -> (.+)  \(eta [^)]+\)$")


# ---- pure helpers ------------------------------------------------------------------------------
def test_sweep_plan_counts_jobs_and_finds_swept_keys():
    params = {"policy": "always_keep,ridge,gbm", "cost.c": "0.0,0.01", "protocol": "threshold_budget"}
    assert console.sweep_plan([], params) == (6, ["policy", "cost.c"])
    # a command-line override of a preset key replaces it; hydra keys and verbose never count
    n, swept = console.sweep_plan(["cost.c=0.02", "seed=0,1", "hydra/launcher=joblib", "verbose=true,false",
                                   "+policy.weight=1,2"], params)
    assert n == 3 * 2 * 2 * 2 and swept == ["policy", "seed", "policy.weight"]
    assert console.sweep_plan(["policy=ridge"], None) == (1, [])


def test_run_names_single_and_swept():
    cfg = {"policy": {"name": "ridge", "features": "qpp"}, "cost": {"c": 0.0}, "seed": 1,
           "budget": {"name": "fine", "grid": [0.1]}}
    assert console.run_name(cfg) == "ridge c=0 seed=1"  # single run: today's form
    assert console.run_name(cfg, ["policy", "cost.c"], ["policy=ridge", "cost.c=0.0"]) == "ridge c=0"
    swept = ["policy.features", "seed", "budget"]
    name = console.run_name(cfg, swept, ["policy.features=qpp", "seed=1", "budget=fine"])
    assert name == "ridge(features=qpp) seed=1 budget=fine"
    plugin = {"policy": {"name": "plugin", "plugin": "plugin", "weight": 2.0}, "cost": {"c": 0.02}, "seed": 0,
              "budget": {"name": "fine"}}
    name = console.run_name(plugin, ["budget", "policy.weight"], ["+policy.weight=2", "budget=fine"])
    assert name == "plugin(weight=2) budget=fine"
    # floats that differ never print the same
    a = console.run_name({**cfg, "cost": {"c": 0.0100001}}, ["cost.c"], [])
    b = console.run_name({**cfg, "cost": {"c": 0.01}}, ["cost.c"], [])
    assert a != b and b == "ridge c=0.01"


def test_headline_and_headline_metrics():
    m = {"heldout/utility": 0.75, "heldout/hit@10": 0.8, "heldout/extra_share": 0.25,
         "budget/0.10/deployable/utility": 0.6, "budget/0.25/deployable/utility": 0.7}
    from harness.protocols.builtin import headline_budget
    from harness.protocols.registry import plan_protocols

    planned = plan_protocols({"protocol": {"run": ["budget", "threshold"]}})  # shown A first, as declared
    text = console.headline(planned, m, "hit@10", [0.1, 0.25, 0.5])
    # each number labelled with the protocol it comes from
    assert text == "A held-out: U=0.7500 hit@10=0.8000 extra=0.250 | B test halves, rho=0.25: U=0.7000"
    assert console.headline(planned, {"budget/fixed/utility": 0.61}, "hit@10", [0.25]) == "B test halves: fixed U=0.6100"
    assert console.headline(planned, {}, "hit@10", [0.25]) == "done (see the summary)"
    heads = console.headline_metrics(planned, m, "hit@10", [0.1, 0.25, 0.5])
    assert heads == {"headline/utility": 0.75, "headline/hit@10": 0.8, "headline/extra_share": 0.25,
                     "headline/deployable_utility@0.10": 0.6, "headline/deployable_utility@0.25": 0.7}
    assert headline_budget([0.05, 0.2, 0.3]) == 0.2
    assert console.fmt_duration(5) == "5s" and console.fmt_duration(125) == "2m05s"


def test_description_is_cut_to_the_tag_limit_and_read_back():
    text = "x" * 20_000
    note = run_notes.description("title", text)
    assert len(note) <= run_notes.NOTE_MAX_CHARS and note.startswith("title\n\n```\n") and "summary.txt" in note
    assert run_notes.note_text(run_notes.description("t", "line 1\nline 2")) == "line 1\nline 2"


def test_verbose_does_not_change_the_config_hash():
    cfg = {"policy": {"name": "ridge"}, "cost": {"c": 0.02}, "seed": 0}
    assert naming.config_hash({**cfg, "verbose": True}) == naming.config_hash({**cfg, "verbose": False})


def test_cold_table_build_prints_a_notice_and_progress_lines(tmp_path, capsys):
    from harness.retrieval.table import build_outcome_table
    from tests.helpers.retrieval import ARMS_CFG, MAXSIM, FakeEncoder, tiny_dataset

    build_outcome_table(tiny_dataset(), ARMS_CFG, MAXSIM, cache_dir=tmp_path, encoder=FakeEncoder())
    out = capsys.readouterr().out.splitlines()  # stdout is not a terminal under pytest
    assert out[0].startswith("[route-bench] building outcome table ") and "units in" in out[0]
    progress = [line for line in out[1:] if line.startswith("[route-bench] outcome table ")]
    assert progress and progress[-1].endswith(", done")  # one line per computed shard, the last says done
    assert all(" elapsed" in line for line in progress)
    build_outcome_table(tiny_dataset(), ARMS_CFG, MAXSIM, cache_dir=tmp_path, encoder=FakeEncoder())
    assert capsys.readouterr().out == ""  # warm: nothing to say


def test_help_lists_subcommands_and_the_preset_sweep():
    proc = subprocess.run([sys.executable, "-m", "harness", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    for word in ("data NAME", "table build", "policies", "report --latest", "preset sweep", "44 jobs",
                 "verbose=true", "Configuration groups"):
        assert word in out, word


# ---- end to end through the CLI ----------------------------------------------------------------
@pytest.fixture(scope="module")
def default_like(tmp_path_factory):
    root = tmp_path_factory.mktemp("default_like")
    proc = run_cli(DEFAULT_LIKE, root, root / "cache")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"root": root, "proc": proc, "uri": store_uri(root)}


@pytest.fixture(scope="module")
def default_shaped(tmp_path_factory):
    """The default sweep (experiment=default: 11 policies x 4 costs, protocols A and B) on a
    small synthetic table, launched where the store lands (``mlruns/`` under the launch folder)."""
    root = tmp_path_factory.mktemp("default_shaped")
    proc = run_cli(["-m", "dataset=synthetic", "dataset.n_docs=30", "dataset.questions_per_doc=4"], root, root / "cache")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"root": root, "proc": proc, "uri": store_uri(root)}


@pytest.fixture(scope="module")
def names_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    proc = run_cli(NAMES, root, root / "cache")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {"root": root, "proc": proc, "uri": store_uri(root)}


def _job_part(stdout: str) -> list[str]:
    """stdout lines from the sweep's start line to the end-of-sweep line (the final tables)."""
    lines = stdout.splitlines()
    end = next(i for i, line in enumerate(lines) if re.match(r"\[route-bench\] sweep \w+: \d+ jobs, \d+ failed", line))
    return [line for line in lines[:end] if line.strip()]


@pytest.mark.slow
def test_sweep_prints_at_most_two_lines_per_job(default_like):
    part = _job_part(default_like["proc"].stdout)
    n_jobs = 4
    progress = [LINE.match(line) for line in part if LINE.match(line)]
    assert [(int(m.group(1)), int(m.group(2))) for m in progress] == [(k, n_jobs) for k in range(1, n_jobs + 1)]
    # the sweep's start line, then one line per job: Hydra's launch lines stay off the console
    assert len(part) == 1 + n_jobs, "\n".join(part)
    assert not any("[HYDRA]" in line or "Launching" in line for line in part)
    assert not any("Protocol A" in line for line in part)
    by_name = {m.group(3): m.group(4) for m in progress}
    assert set(by_name) == {"always_keep c=0", "always_keep c=0.02", "ridge c=0", "ridge c=0.02"}
    assert re.fullmatch(r"A held-out: U=\d\.\d{4} hit@10=\d\.\d{4} extra=\d\.\d{3} \| B test halves, rho=0\.25: "
                        r"U=\d\.\d{4}", by_name["ridge c=0"])


@pytest.mark.slow
def test_default_sweep_ends_in_at_most_40_lines_of_100_characters(default_shaped):
    """What the default sweep prints after its 44 job lines: the verdict table (one line per
    cost and budget), the closing power line, where the parent run is and the command that
    serves it; at most 40 lines of at most 100 characters."""
    lines = default_shaped["proc"].stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\[route-bench\] sweep \w+: 44 jobs, 0 failed", line))
    end = lines[start - 1:]  # the blank line before it too
    assert len(end) <= 40 and max(len(line) for line in end) <= 100, "\n".join(end)
    head = next(i for i, line in enumerate(end) if line.startswith("Verdict per cost and budget"))
    rows = [line for line in end[head + 2:head + 22]]
    assert [tuple(r.split()[:2]) for r in rows] == [(c, b) for c in ("0", "0.01", "0.02", "0.05")
                                                   for b in ("0.1", "0.25", "0.5", "0.75", "0.9")]
    short = (r"  (deploy \w+|deploy the split choice \*|over budget: [\w *]+|always \w+ is (as good|better)|"
             r"no room to route|cannot tell: .+?)  ")
    assert all(re.search(short, r) for r in rows), "\n".join(rows)
    assert any(line.startswith("Overall: ") for line in end)
    assert end[-1] == "Serve it:   mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db"
    assert end[-2].startswith("Parent run: http://127.0.0.1:5000/#/experiments/")
    assert "Decision table at" not in default_shaped["proc"].stdout  # the full tables: parent run only
    # one line per job, each number labelled with its protocol
    jobs = [line for line in lines[:start] if LINE.match(line)]
    assert len(jobs) == 44 and all(" A held-out: " in j or " B test halves" in j for j in jobs)


@pytest.mark.slow
def test_job_folders_hold_result_json_and_the_full_log(default_like):
    client, parents, jobs = runs_by_role(default_like["uri"])
    by_id = {j.info.run_id: j for j in jobs}
    folders = sorted(p.parent for p in (default_like["root"] / "multirun").rglob("result.json"))
    assert len(folders) == 4
    for folder in folders:
        result = json.loads((folder / "result.json").read_text())
        run = by_id[result["run_id"]]
        assert result["status"] == "FINISHED" == run.info.status
        assert result["run_name"] == run.info.run_name
        assert result["experiment"] == "synthetic/keep-vs-hybrid" and result["tracking_uri"] == default_like["uri"]
        assert result["parent_run_id"] == parents[0].info.run_id
        log = (folder / "app.log").read_text()
        assert "Protocol A (frozen threshold)" in log and result["run_id"] in log
        # the job's overrides (Hydra's launch line, off the console) open its log
        overrides = (folder / ".hydra" / "overrides.yaml").read_text()
        first = log.splitlines()[0]
        assert f"{result['run_name']}: overrides " in first and all(o.split("=")[0] in first for o in ("policy", "cost.c"))
        assert "policy=" in overrides


@pytest.mark.slow
def test_runs_carry_description_tags_dataset_and_headline(default_like):
    client, parents, jobs = runs_by_role(default_like["uri"])
    commit = subprocess.run(["git", "-C", str(Path(mt.__file__).resolve().parents[2]), "rev-parse", "HEAD"],
                    capture_output=True, text=True).stdout.strip() or "unknown"
    assert parents[0].data.tags[TAG_NOTE].startswith(f"Sweep {parents[0].data.tags[TAG_SWEEP_ID]}: 4 jobs")
    for job in jobs:
        tags, metrics = job.data.tags, job.data.metrics
        note = tags[TAG_NOTE]
        assert note.startswith(job.info.run_name + " -> ") and "Protocol A (frozen threshold)" in note
        summary = client.download_artifacts(job.info.run_id, "summary.txt", str(default_like["root"] / job.info.run_id))
        assert run_notes.note_text(note).strip() == Path(summary).read_text().strip()
        assert tags[TAG_GIT_COMMIT] == commit
        assert tags[TAG_DATASET] == "synthetic" and tags[TAG_ARMS] == "keep-vs-hybrid"
        assert tags[TAG_BUDGET_GRID] == "[0.1,0.25,0.5,0.75,0.9]"
        [inp] = client.get_run(job.info.run_id).inputs.dataset_inputs
        assert inp.dataset.name == "synthetic" and inp.dataset.digest == tags["route_bench.table_sha256"][:16]
        assert json.loads(inp.dataset.profile)["num_rows"] == 120
        assert metrics["headline/utility"] == metrics["heldout/utility"]
        assert metrics["headline/hit_at_10"] == metrics["heldout/hit_at_10"]
        assert metrics["headline/extra_share"] == metrics["heldout/extra_share"]
        arts = {a.path for a in client.list_artifacts(job.info.run_id)}
        assert "decisions.csv" in arts
        if tags[TAG_POLICY] == "ridge":
            assert metrics["headline/deployable_utility_at_0.25"] == metrics["budget/0.25/deployable/utility"]


@pytest.mark.slow
def test_run_names_differ_when_configs_differ_and_verbose_prints_summaries(names_sweep):
    _, _, jobs = runs_by_role(names_sweep["uri"])
    assert len(jobs) == 8
    names = {j.info.run_name for j in jobs}
    assert len(names) == 8 == len({j.data.tags[TAG_CONFIG_HASH] for j in jobs})
    assert "ridge(features=qpp) seed=1 budget=fine" in names
    assert "ridge(features=baseline) seed=0 budget=default" in names
    out = names_sweep["proc"].stdout
    assert out.count("Protocol A (frozen threshold)") == 8  # verbose=true: every job's summary
    assert len([line for line in out.splitlines() if LINE.match(line)]) == 8
