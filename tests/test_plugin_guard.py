"""Plugins that take control: whatever a plugin does in its code (``sys.exit``, an interrupt, a
signal, a call that never returns, scores that are not one finite float per question), its job's
run ends FAILED or KILLED, never RUNNING, with one line naming the plugin and a non-zero exit
status (``harness.plugin_guard``, ``policies.plugin_calls``, ``policies.scores``).

In-process where the process is not the point; real subprocesses for the signal and the sweep."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.errors import ConfigError, HarnessError
from harness.plugin_guard import PluginError, limit_of, limits_in_force, plugin_call, stopped_in
from harness.protocols.common import fit_policy, score_task
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from policies.registry import make_policy
from policies.scores import ScoreError
from tests.helpers.bad_inputs import _run
from policies.base import ScoreContext
from tests.bad_plugins import SeriesScores
from tests.helpers.plugin_tools import activate, write_plugin

REPO = Path(__file__).resolve().parent.parent
SYN = "dataset=synthetic"


def _policy(cls: str, **params):
    return make_policy({"name": cls.lower(), "_target_": f"tests.bad_plugins.{cls}", **params})


def _ctx(task: RoutingTask) -> ScoreContext:
    return ScoreContext(qids=task.qids, seed=0)


@pytest.fixture(scope="module")
def task() -> RoutingTask:
    return RoutingTask.from_table(synthetic_outcome_table(n_docs=10, questions_per_doc=5, seed=0))


# ---- the guard itself ------------------------------------------------------------------------
class _Escape(BaseException):
    pass


@pytest.mark.parametrize("raise_it, said", [
    (lambda: sys.exit(0), "fit() called sys.exit(0) (SystemExit)"),
    (lambda: sys.exit("bye"), "fit() called sys.exit('bye') (SystemExit)"),
    (lambda: os._exit(3), "fit() called os._exit(3)"),
    (lambda: (_ for _ in ()).throw(_Escape("out")), "fit() raised _Escape: out"),
])
def test_an_exit_inside_a_plugin_call_is_an_error_naming_it(raise_it, said):
    with pytest.raises(PluginError) as err:
        with plugin_call("policy plugin 'p' (m.P)", "fit"):
            raise_it()
    assert str(err.value).startswith(f"policy plugin 'p' (m.P): {said}"), str(err.value)


def test_an_error_of_the_plugin_passes_unchanged():
    with pytest.raises(ValueError, match="^its own$"):
        with plugin_call("policy plugin 'p' (m.P)", "fit"):
            raise ValueError("its own")


class _Stop(BaseException):
    """What the harness's SIGTERM handler raises (harness.runner.process.Terminated): a signum."""

    def __init__(self, signum):
        self.signum = signum
        super().__init__(signum)


@pytest.fixture
def term_handler():
    """A SIGTERM handler like the harness's (raises an exception carrying the signal's number),
    and Python's own SIGINT handler (a suite started in the background inherits SIGINT ignored),
    without touching the harness's own process-wide state; the previous ones back afterwards."""
    def handler(signum, frame):
        raise _Stop(signum)

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)}
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield handler
    for s, h in before.items():
        signal.signal(s, h)


@pytest.mark.parametrize("send", [
    lambda: os.kill(os.getpid(), signal.SIGTERM),
    lambda: os.kill(os.getpid(), signal.SIGUSR1),  # its default would kill the process with no line
    lambda: signal.raise_signal(signal.SIGINT),
])
def test_a_signal_inside_a_plugin_call_propagates_marked_with_the_call(send, term_handler):
    with pytest.raises((_Stop, KeyboardInterrupt)) as err:
        with plugin_call("protocol 'x' (m.X)", "run"):
            send()
            time.sleep(5)
    assert stopped_in(err.value) == "protocol 'x' (m.X): run()"
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL  # only while the plugin runs


def test_handlers_a_plugin_changed_are_the_harness_s_again(term_handler):
    with plugin_call("protocol 'x' (m.X)", "run"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    assert signal.getsignal(signal.SIGTERM) is term_handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_call_past_its_limit_is_stopped_at_the_limit():
    start = time.monotonic()
    with pytest.raises(PluginError, match=r"^policy plugin 'p' \(m\.P\): fit\(\) ran past its time limit of "
                                          r"0\.2 s \(limits\.fit_s\)$"):
        with plugin_call("policy plugin 'p' (m.P)", "fit", 0.2, "limits.fit_s"):
            time.sleep(10)
    assert time.monotonic() - start < 3
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_call_that_swallows_the_timer_is_refused_when_it_returns():
    from tests.bad_plugins import SwallowsTheLimit

    with pytest.raises(PluginError, match=r"fit\(\) ran past its time limit of 0\.3 s"):
        with plugin_call("policy plugin 'p' (m.P)", "fit", 0.3, "limits.fit_s"):
            SwallowsTheLimit().fit(None, None, None)


def test_a_limit_keeps_an_outer_timer_and_its_handler():
    def outer(signum, frame):
        raise AssertionError("the outer timer rang")

    previous = signal.signal(signal.SIGALRM, outer)
    signal.setitimer(signal.ITIMER_REAL, 50.0)
    try:
        with plugin_call("policy plugin 'p' (m.P)", "score", 5.0):
            pass
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 45.0 < left <= 50.0 and signal.getsignal(signal.SIGALRM) is outer
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_limits_hold_only_within_their_block():
    assert limit_of("fit") is None
    with limits_in_force({"fit": 2.5, "score": None}):
        assert (limit_of("fit"), limit_of("score")) == (2.5, None)
    assert limit_of("fit") is None


# ---- policies --------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, said", [
    ("ExitInFit", "fit() called sys.exit(0) (SystemExit)"),
    ("OsExitInFit", "fit() called os._exit(0)"),
    ("BaseExceptionInFit", "fit() raised _Escape: escaping"),
    ("ExitInScore", "score() called sys.exit('bye') (SystemExit)"),
])
def test_a_policy_that_exits_is_an_error_naming_it(cls, said, task):
    policy = _policy(cls)
    with pytest.raises(PluginError) as err:
        score_task(fit_policy(policy, task, 0), task, 0)
    assert str(err.value).startswith(f"policy plugin _target_ tests.bad_plugins.{cls} (tests.bad_plugins.{cls}): {said}")


@pytest.mark.parametrize("cls, method, call", [
    ("SlowFit", "fit", lambda p, t: fit_policy(p, t, 0)),
    ("SlowScore", "score", lambda p, t: score_task(p, t, 0)),
    ("SwallowsTheLimit", "fit", lambda p, t: fit_policy(p, t, 0)),
])
def test_a_policy_past_the_limit_in_force_is_an_error_naming_it(cls, method, call, task):
    policy = _policy(cls)
    start = time.monotonic()
    with limits_in_force({"fit": 0.3, "score": 0.3}), pytest.raises(PluginError) as err:
        call(policy, task)
    assert str(err.value) == (f"policy plugin _target_ tests.bad_plugins.{cls} (tests.bad_plugins.{cls}): "
                              f"{method}() ran past its time limit of 0.3 s (limits.{method}_s)")
    assert time.monotonic() - start < 5


def test_without_a_limit_a_policy_is_not_timed(task):
    policy = _policy("SwallowsTheLimit")
    fit_policy(policy, task, 0)  # 1.5 s, no limit in force: fine
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


# ---- scores ------------------------------------------------------------------------------------
@pytest.mark.parametrize("index", ["qids", "qids_reversed", "rows_reversed"])
def test_a_series_of_scores_is_read_by_its_index(index, task):
    got = score_task(_policy("SeriesScores", index=index), task, 0)
    by_qid = dict(zip(task.qids, task.features["dense_top1"]))  # each question's own score, by hand
    assert np.array_equal(got, np.array([by_qid[q] for q in task.qids]))


def test_a_reversed_series_routes_as_the_same_scores_in_order(task):
    """The battery's case: the same scores as a Series in reverse order route the same questions
    at the same utility (read by position they would route others)."""
    def utility(scores: np.ndarray, tau: float, c: float = 0.02) -> float:  # by hand: run the extra arm where score > tau
        run = scores > tau
        return float(np.mean(np.where(run, task.extra, task.base)) - c * run.mean())

    in_order = task.features["dense_top1"].to_numpy()
    tau = float(np.median(in_order))
    raw = SeriesScores("qids_reversed").score(task.features, _ctx(task))
    read = score_task(_policy("SeriesScores", index="qids_reversed"), task, 0)
    assert np.array_equal(read > tau, in_order > tau) and utility(read, tau) == utility(in_order, tau)
    assert not np.array_equal(raw.to_numpy() > tau, in_order > tau)  # read by position: other questions routed


@pytest.mark.parametrize("index, said", [
    ("foreign", "index matches neither the questions' ids"),
    ("duplicate", "index holds a label twice"),
])
def test_a_series_whose_index_says_nothing_is_refused(index, said, task):
    with pytest.raises(ScoreError, match=r"^policy plugin _target_ tests\.bad_plugins\.SeriesScores .*" + said):
        score_task(_policy("SeriesScores", index=index), task, 0)


@pytest.mark.parametrize("kind, said", [
    ("strings", "returned scores of dtype <U1 (first value 'a'); expected real numbers"),
    ("objects", "returned scores of dtype object (first value 0.5); expected real numbers"),
    ("complex", "returned scores of dtype complex128"),
    ("text_series", "returned scores of dtype object (first value 'a')"),
    ("two_d", "returned scores of shape (50, 1); expected shape (50,)"),
    ("frame", "returned a DataFrame of shape (50, 1)"),
    ("scalar", "returned scores of shape (); expected shape (50,)"),
    ("short", "returned 49 scores for 50 questions"),
    ("nan", "returned non-finite (NaN or inf) scores for 1 questions"),
    ("inf", "returned non-finite (NaN or inf) scores for 1 questions"),
])
def test_scores_that_are_not_one_finite_float_per_question_are_refused(kind, said, task):
    with pytest.raises(ScoreError) as err:
        score_task(_policy("BadScores", kind=kind), task, 0)
    assert str(err.value).startswith(f"policy plugin _target_ tests.bad_plugins.BadScores (tests.bad_plugins.BadScores) {said}")


def test_a_built_in_caller_reads_scores_by_the_same_rule(task):
    """score_task refuses bad scores of a policy the plugin wrapper does not cover (a class used
    directly), naming it."""
    from tests.bad_plugins import BadScores

    with pytest.raises(ScoreError, match=r"^policy badscores \(BadScores\) returned scores of dtype <U1"):
        p = BadScores("strings")
        p.name = "badscores"
        score_task(p, task, 0)
    got = score_task(SeriesScores("qids_reversed"), task, 0)
    assert np.array_equal(got, task.features["dense_top1"].to_numpy())


def test_check_policy_reads_a_series_as_the_harness_does():
    from policies.checks import PolicyCheckError, check_policy

    check_policy(SeriesScores("qids_reversed"), quiet=True)
    with pytest.raises(PolicyCheckError, match="fails check 'one_score_per_row': score.. returned a pandas Series whose index"):
        check_policy(SeriesScores("foreign"), quiet=True)


# ---- protocols, arm blocks, dataset loaders, imports -----------------------------------------
PROTOCOL = '''
import sys
from harness.protocols.registry import Protocol


class Exiting(Protocol):
    name = "exiting"

    def run(self, task, factory, ctx):
        sys.exit(0)
'''


def test_a_protocol_plugin_that_exits_is_an_error_naming_it(tmp_path, monkeypatch):
    from harness.protocols.registry import make_protocol

    activate(monkeypatch, write_plugin(tmp_path / "site", "exiting_ext", {"p.py": PROTOCOL},
                                       {"rag_route_bench.protocols": {"exiting": "exiting_ext.p:Exiting"}}))
    protocol = make_protocol("exiting")
    assert type(protocol).__module__ == "exiting_ext.p" and type(protocol).__qualname__ == "Exiting"
    with pytest.raises(PluginError, match=r"^protocol 'exiting' \(exiting_ext\.p\.Exiting\): run\(\) called sys\.exit\(0\)"):
        protocol.run(None, None, None)


def test_a_plugin_that_exits_while_imported_is_a_config_error_naming_it(tmp_path, monkeypatch):
    from harness.protocols.registry import make_protocol

    activate(monkeypatch, write_plugin(tmp_path / "site", "import_exit_ext", "import sys\nsys.exit(3)\n",
                                       {"rag_route_bench.protocols": {"gone": "import_exit_ext:Gone"}}))
    with pytest.raises(ConfigError, match=r"protocol\.run.*protocol 'gone' \(entry point import_exit_ext:Gone\): "
                                          r"its import called sys\.exit\(3\)"):
        make_protocol("gone")


def test_an_arm_block_that_exits_is_an_error_naming_it():
    from harness.arm_blocks.build import block_chunk

    class Quitter:
        name = "quitter"

        def compute(self, rows, dataset):
            raise SystemExit(2)

        def built_with(self):
            return None

    with pytest.raises(PluginError, match=r"^arm block 'quitter' \(.*Quitter\): compute\(\) called sys\.exit\(2\)"):
        block_chunk(Quitter(), None, pd.DataFrame({"qid": ["a"]}))


def test_a_dataset_loader_that_exits_is_an_error_naming_it():
    from harness.data import DatasetPluginError, naming_plugin

    class Loader:
        pass

    with pytest.raises(DatasetPluginError, match=r"^dataset loader 'faq' \(.*Loader\): load\(\) called sys\.exit\(None\)"):
        with naming_plugin(Loader(), "faq", "load"):
            sys.exit()


# ---- the config key --------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e9"])
def test_a_limit_is_seconds_above_zero(value):
    from harness.config.compose import compose_config
    from harness.config.validation import validate

    for key in ("limits.fit_s", "limits.score_s"):
        with pytest.raises(ConfigError, match=f"'{key}'"):
            validate(compose_config([SYN, f"{key}={value}"]))


def test_a_limit_changes_no_hash_and_is_absent_while_unset():
    from harness.app import to_plain
    from harness.config.compose import compose_config
    from harness.config.validation import validate
    from harness.tracking import naming

    plain = to_plain(compose_config([SYN]))
    limited = compose_config([SYN, "limits.fit_s=2.5"])
    validate(limited)
    assert "limits" not in plain  # params and hashes as before the key existed
    assert to_plain(limited)["limits"] == {"fit_s": 2.5}
    assert naming.config_hash(to_plain(limited)) == naming.config_hash(plain)


# ---- the CLI: one line, a non-zero status, no run left RUNNING ---------------------------------
def _statuses(folder: Path) -> list[str]:
    out = []
    for db in folder.rglob("*.db"):
        with sqlite3.connect(db) as con:
            out += [s for (s,) in con.execute("select status from runs")]
    return out


@pytest.mark.parametrize("cls, extra, said", [
    ("ExitInFit", [], "fit() called sys.exit(0) (SystemExit)"),
    ("OsExitInFit", [], "fit() called os._exit(0)"),
    ("SlowFit", ["limits.fit_s=0.5"], "fit() ran past its time limit of 0.5 s (limits.fit_s)"),
    ("BadScores", ["+policy.kind=objects"], "returned scores of dtype object"),
])
def test_a_single_run_of_a_plugin_that_takes_control_fails_in_one_line(cls, extra, said, workdir, capsys):
    _, run, _ = workdir
    code, out, err = _run([SYN, "experiment=none", "protocol=threshold", "policy=always_keep",
                           f"policy._target_=tests.bad_plugins.{cls}", *extra], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, err, out[-2000:])
    assert lines[0].startswith("error: ") and f"tests.bad_plugins.{cls}" in lines[0] and said in lines[0], lines[0]
    assert _statuses(run) == ["FAILED"]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.pop("HYDRA_FULL_ERROR", None)
    return env


@pytest.mark.slow
def test_a_plugin_that_signals_its_own_process_ends_the_run_killed_in_one_line(tmp_path):
    env = {**_env(), "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "harness", SYN, "experiment=none", "protocol=threshold",
                           "policy=always_keep", "policy._target_=tests.bad_plugins.TermInFit"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 143 and len(lines) == 1, (proc.returncode, proc.stderr[-3000:])
    assert lines[0].startswith("error: Interrupted: SIGTERM in policy plugin _target_ tests.bad_plugins.TermInFit "
                               "(tests.bad_plugins.TermInFit): fit(): stopped"), lines[0]
    assert _statuses(tmp_path) == ["KILLED"]


@pytest.mark.slow
def test_a_sweep_with_plugins_that_take_control_exits_non_zero_and_leaves_nothing_running(tmp_path):
    """A real sweep: one job's plugin calls sys.exit(0) in fit, one runs past limits.fit_s, one is
    well behaved. The sweep goes on, ends with status 1 and one line on stderr; each failed job's
    line names its plugin; no run is left RUNNING."""
    env = {**_env(), "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    targets = "tests.bad_plugins.ExitInFit,tests.bad_plugins.SlowFit,policies.builtin.AlwaysBase"
    proc = subprocess.run([sys.executable, "-m", "harness", "-m", SYN, "dataset.n_docs=30", "experiment=none",
                           "protocol=threshold", "policy=always_keep", f"policy._target_={targets}",
                           "limits.fit_s=0.5"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    assert "2 job(s) FAILED" in lines[0], lines[0]
    failed = [line for line in proc.stdout.splitlines() if "-> FAILED" in line]
    assert len(failed) == 2, proc.stdout[-3000:]
    assert any("tests.bad_plugins.ExitInFit" in line and "fit() called sys.exit(0)" in line for line in failed), failed
    assert any("tests.bad_plugins.SlowFit" in line and "fit() ran past its time limit of 0.5 s" in line
               for line in failed), failed
    statuses = sorted(_statuses(tmp_path))
    assert statuses == ["FAILED", "FAILED", "FAILED", "FINISHED"], statuses  # 3 jobs + the parent (FAILED)


VERSION_EXITS = '''
import sys
from harness.protocols.registry import Protocol, ProtocolResult


class VersionExits(Protocol):
    name = "version_exits"

    @property
    def version(self):
        sys.exit(0)

    def run(self, task, factory, ctx):
        return ProtocolResult(metrics={}, summary="")
'''


def test_an_exit_from_plugin_code_no_guard_wraps_still_fails_the_job_naming_it(tmp_path, monkeypatch, workdir, capsys):
    """The net under the guards (``harness.runner.lifecycle.tracked_run``): a plugin's property
    the harness reads without a guard calls sys.exit(0); the job fails in one line naming where."""
    _, run, _ = workdir
    activate(monkeypatch, write_plugin(tmp_path / "site", "version_ext", {"p.py": VERSION_EXITS},
                                       {"rag_route_bench.protocols": {"version_exits": "version_ext.p:VersionExits"}}))
    code, out, err = _run([SYN, "experiment=none", "protocol.run=[threshold,version_exits]", "policy=always_keep"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, err, out[-2000:])
    assert lines[0].startswith("error: PluginError: sys.exit(0) (SystemExit) raised in version_ext.p.version (line "), lines[0]
    assert "RUNNING" not in _statuses(run)


def test_os_exit_raises_only_in_the_plugin_s_thread_and_is_restored_after():
    """Another thread's os._exit (the harness's watchers) still ends the process; after the call
    os._exit is Python's own again."""
    import threading

    from harness import plugin_guard

    seen = []
    with plugin_call("policy plugin 'p' (m.P)", "fit"):
        assert os._exit is plugin_guard._guarded_os_exit
        real, plugin_guard._REAL_OS_EXIT = plugin_guard._REAL_OS_EXIT, seen.append  # stand in for the real exit
        try:
            worker = threading.Thread(target=lambda: os._exit(7))
            worker.start()
            worker.join()
        finally:
            plugin_guard._REAL_OS_EXIT = real
    assert seen == [7] and os._exit is plugin_guard._REAL_OS_EXIT

