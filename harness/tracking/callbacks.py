"""Hydra callback that turns a multirun into one tracked sweep.

Why a callback: work that every job would repeat (building the outcome table, creating the
MLflow experiment and the sweep's parent run) is done ONCE, in the launching process, before any
job starts; parallel joblib workers then only read the cached Parquet and add child runs to an
existing experiment (no schema creation races on the SQLite store).

The callback hands values to the jobs by appending ``hydra.job.env_set.<VAR>=...`` to the
sweep's Hydra overrides (both the basic and the joblib launcher compose each job from them):
the sweep id, the parent run id and the table-handle file (see ``harness.app``), and the number
of jobs, the swept keys and the start time (``harness.console``: run names, ``[k/N]`` lines).

Sweep id: the first 12 hex digits of the digest of (the command line's task overrides, the
sweeper's params, the resolved base config without ``hydra``; ``verbose`` left out). The same
sweep command gives the same id, hence the same parent run, and jobs whose config hash already
FINISHED are skipped.
"""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from harness.io import digest_of

# Columns of the comparison table printed at the end of a sweep: (header, metric name in MLflow);
# "{metric}" is the sweep's outcome metric (``arms.metric``), e.g. hit@10 -> hit_at_10.
COMPARISON_COLUMNS = (
    ("heldout {metric}", "heldout/{mlflow_metric}"),
    ("utility", "heldout/utility"),
    ("extra share", "heldout/extra_share"),
    ("dU vs base", "heldout/diff_vs_base/utility"),
    ("CI low", "heldout/diff_vs_base/utility/ci_low"),
    ("CI high", "heldout/diff_vs_base/utility/ci_high"),
    ("exact AUC", "frontier/exact_auc"),
    ("deploy@0.25 usage", "budget/0.25/deployable/realized_usage"),
)


DECISION_TABLE_JSON = "decision_table.json"


def decision_table_of(client: Any, runs: list, *, n_boot: int, alpha: float) -> tuple[Any, str]:
    """(the sweep's decision table or None, its compact console text or why it is missing)."""
    from harness.decision_table import format_console
    from harness.tracking.comparisons import sweep_decision_table

    try:
        table = sweep_decision_table(client, runs, n_boot=n_boot, alpha=alpha)
    except Exception as exc:  # noqa: BLE001 - the jobs' results stand without it
        return None, f"[route-bench] decision table not made: {type(exc).__name__}: {exc}"
    if table.empty:
        return table, ""  # no protocol B in this sweep
    return table, format_console(table)


def write_decision_table(table: Any, folder) -> None:
    """``decision_table.csv`` (every column, full precision), ``.md`` and ``.html``."""
    from pathlib import Path

    from harness.decision_table import format_html, format_markdown

    folder = Path(folder)
    table.to_csv(folder / "decision_table.csv", index=False)
    (folder / "decision_table.md").write_text("# Decision table\n\n" + format_markdown(table) + "\n", encoding="utf-8")
    (folder / "decision_table.html").write_text(format_html(table, standalone=True), encoding="utf-8")


def sweep_id_of(config: DictConfig) -> str:
    """Deterministic id of a sweep (see module docstring)."""
    from harness.app import to_plain
    from harness.console import PRESENTATION_KEYS

    # keys that only change what is printed (verbose) do not make another sweep
    def shown_only(override: str) -> bool:
        return override.lstrip("+~").partition("=")[0] in PRESENTATION_KEYS

    task_overrides = [o for o in OmegaConf.to_container(config.hydra.overrides.task, resolve=False) if not shown_only(o)]
    params_node = OmegaConf.select(config, "hydra.sweeper.params")
    params = OmegaConf.to_container(params_node, resolve=False) if params_node is not None else {}
    base = {k: v for k, v in to_plain(config).items() if k not in PRESENTATION_KEYS}
    return digest_of({"task_overrides": task_overrides, "sweeper_params": params, "base": base})[:12]


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def comparison_frame(runs: list, metric: str = "hit@10") -> Any:
    """One row per child run: policy, cost, status and the headline metrics."""
    import pandas as pd

    from harness.tracking.mlflow_tracker import mlflow_name

    names = {"metric": metric, "mlflow_metric": mlflow_name(metric)}

    rows = []
    for r in runs:
        row = {
            "policy": r.data.tags.get("route_bench.policy", ""),
            "cost": r.data.params.get("cost.c", ""),
            "seed": r.data.params.get("seed", ""),
            "status": r.info.status,
        }
        for header, name in COMPARISON_COLUMNS:
            row[header.format(**names)] = r.data.metrics.get(name.format(**names))
        row["run"] = r.info.run_id[:8]
        rows.append(row)
    frame = pd.DataFrame(rows)
    if len(frame):
        frame["_c"] = pd.to_numeric(frame["cost"], errors="coerce")
        frame = frame.sort_values(["policy", "_c", "seed"], kind="stable").drop(columns="_c").reset_index(drop=True)
    return frame


class SweepTrackingCallback(Callback):
    """Builds the table, opens the parent run, and closes it with a comparison table."""

    def __init__(self) -> None:
        self.tracker = None
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.sweep_id: str | None = None
        self.uri: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Hydra turns a callback's exception into a warning and would launch the jobs anyway:
        a failure here (bad config, unbuildable table, unreachable store) exits instead."""
        try:
            self._start(config)
        except Exception as exc:
            print(f"[route-bench] sweep not started: {type(exc).__name__}: {exc}", file=sys.stderr)
            raise SystemExit(1) from exc

    def _start(self, config: DictConfig) -> None:
        from harness import app, console
        from harness.config import validate
        from harness.tracking import mlflow_tracker as mt

        validate(config)  # before any work
        plain = app.to_plain(config)
        table = app.build_table(plain)
        handle_file = app.write_table_handle(plain, table)
        self.sweep_id = sweep_id_of(config)
        self.uri = mt.resolve_tracking_uri(plain["tracking"], app.launch_dir())
        self.tracker = mt.Tracker(self.uri, retries=int(plain["tracking"].get("retries", 5)))
        self.experiment_id = self.tracker.ensure_experiment(mt.experiment_name(plain), mt.artifact_location(self.uri))
        sweeper_params = OmegaConf.select(config, "hydra.sweeper.params") or {}
        params = {
            "sweep.task_overrides": mt._short(list(config.hydra.overrides.task)),
            "sweep.params": mt._short([f"{k}={v}" for k, v in sweeper_params.items()]),
        }
        self.parent_run_id = self.tracker.start_sweep_run(self.experiment_id, self.sweep_id, params)
        # the sweep's size and swept keys (run names, "[k/N] ... (eta)" lines); None if a sweep
        # syntax needs more than the basic sweeper's expansion
        try:
            n_jobs, swept = console.sweep_plan(
                list(config.hydra.overrides.task),
                OmegaConf.to_container(sweeper_params) if OmegaConf.is_config(sweeper_params) else dict(sweeper_params),
            )
        except Exception:  # noqa: BLE001 - only the console and the run names lose detail
            n_jobs, swept = None, None
        self.tracker.set_note(self.parent_run_id, mt.description(
            f"Sweep {self.sweep_id}: {n_jobs if n_jobs is not None else '?'} jobs; swept keys: "
            f"{', '.join(swept) if swept else '(none)'}",
            "\n".join(["params (preset sweep):", *[f"  {k}={v}" for k, v in sweeper_params.items()],
                       "overrides (command line):", *[f"  {o}" for o in config.hydra.overrides.task]]),
        ))
        self.tracker.set_tags(self.parent_run_id, {mt.TAG_GIT_COMMIT: mt.git_commit(), mt.TAG_DATASET: plain["dataset"]["name"]})
        env = {app.ENV_SWEEP_ID: self.sweep_id, app.ENV_PARENT_RUN_ID: self.parent_run_id}
        if handle_file is not None:
            env[app.ENV_TABLE_HANDLE] = str(handle_file)
        env.update(console.sweep_env(n_jobs, swept))  # last: its start time is when jobs begin
        with read_write(config.hydra.overrides), open_dict(config.hydra.overrides):
            extra = [f"++hydra.job.env_set.{k}={_quote(v)}" for k, v in env.items()]
            config.hydra.overrides.hydra = list(config.hydra.overrides.hydra) + extra
        print(f"[route-bench] sweep {self.sweep_id}: {n_jobs if n_jobs is not None else '?'} jobs, parent run "
              f"{self.parent_run_id} in {self.uri}; one line per job (verbose=true: full summaries; "
              "every job's full text is in its Hydra job folder: app.log, result.json)")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.tracker is None:
            return
        import pandas as pd

        from harness.report import pick_runs

        # one run per job config: a rerun's FINISHED run replaces the FAILED attempt it retried
        runs = pick_runs(self.tracker.child_runs(self.experiment_id, self.parent_run_id))
        metric = str(OmegaConf.select(config, "arms.metric", default="hit@10"))
        frame = comparison_frame(runs, metric)
        failed = int((frame["status"] == "FAILED").sum()) if len(frame) else 0
        unfinished = int((~frame["status"].isin(["FINISHED", "FAILED"])).sum()) if len(frame) else 0
        with pd.option_context("display.width", 200, "display.max_columns", 50, "display.float_format", "{:.4f}".format):
            text = frame.to_string(index=False) if len(frame) else "(no job runs)"
        status = "FAILED" if failed or unfinished else "FINISHED"
        alpha = float(OmegaConf.select(config, "protocol.alpha", default=0.05))
        n_boot = int(OmegaConf.select(config, "protocol.n_boot", default=1000))
        comparison_text = decision_text = ""
        try:
            import tempfile
            from pathlib import Path

            from harness.tracking.comparisons import comparisons_frame, sweep_comparisons

            try:
                cells = sweep_comparisons(self.tracker.client, runs, n_boot=n_boot, alpha=alpha)
                comparison_text = "\n\n".join(c.text(alpha) for c in cells)
            except Exception as exc:  # noqa: BLE001 - the jobs' results stand without it
                cells = []
                comparison_text = f"[route-bench] policy comparison not made: {type(exc).__name__}: {exc}"
            decisions, decision_text = decision_table_of(self.tracker.client, runs, n_boot=n_boot, alpha=alpha)
            with tempfile.TemporaryDirectory() as tmp:
                frame.to_csv(Path(tmp) / "comparison.csv", index=False)
                (Path(tmp) / "comparison.txt").write_text(text + "\n", encoding="utf-8")
                if cells:
                    comparisons_frame(cells).to_csv(Path(tmp) / "policy_comparison.csv", index=False)
                    (Path(tmp) / "policy_comparison.txt").write_text(comparison_text + "\n", encoding="utf-8")
                if decisions is not None and len(decisions):
                    write_decision_table(decisions, Path(tmp))
                self.tracker.log_artifacts(self.parent_run_id, tmp)
            if decisions is not None and len(decisions):
                try:  # the UI's table view of the parent run
                    self.tracker.log_table(self.parent_run_id, decisions, DECISION_TABLE_JSON)
                except Exception as exc:  # noqa: BLE001 - the CSV / Markdown / HTML are logged
                    decision_text += f"\n[route-bench] decision table not logged as an MLflow table: {exc}"
        finally:
            self.tracker.end_run(self.parent_run_id, status)
        print(f"\n[route-bench] sweep {self.sweep_id}: {len(frame)} jobs, {failed} failed -> parent run {status}")
        print(text)
        if comparison_text:
            print("\n" + comparison_text)
        if decision_text:
            print("\n" + decision_text)
        if self.uri and self.uri.startswith("sqlite:///"):
            print(f"\nOpen the results:  mlflow ui --backend-store-uri {self.uri}")
        else:
            print(f"\nResults are in the tracking server {self.uri}")
        sys.stdout.flush()
        if failed:
            # an exception would only become a warning (Hydra callbacks): exit non-zero instead
            print(f"[route-bench] sweep {self.sweep_id}: {failed} job(s) FAILED (error.txt in their runs)", file=sys.stderr)
            raise SystemExit(1)
