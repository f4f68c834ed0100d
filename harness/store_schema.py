"""The tracking store's schema: every tag name the harness writes and reads, spelled once.

Why: the jobs write these tags, and the sweep's end, the report and the results page find runs
and read facts by them; a name spelled in several places drifts. Plain strings, no MLflow: the
protocols' sweep stages read the same tags from store-neutral job records.
"""

from __future__ import annotations

PREFIX = "route_bench."
TAG_SWEEP_ID = "route_bench.sweep_id"
TAG_ROLE = "route_bench.role"  # "sweep" (the parent run), "job" (a sweep's job), "single"
ROLE_SWEEP, ROLE_JOB, ROLE_SINGLE = "sweep", "job", "single"
TAG_CONFIG_HASH = "route_bench.config_hash"
TAG_POLICY = "route_bench.policy"
TAG_ERROR = "route_bench.error"
TAG_GIT_COMMIT = "route_bench.git_commit"
TAG_CODE_VERSION = "route_bench.code_version"
TAG_DATASET = "route_bench.dataset"
TAG_DATASET_FINGERPRINT = "route_bench.dataset_fingerprint"
TAG_TABLE_KEY = "route_bench.table_key"
TAG_TABLE_SHA256 = "route_bench.table_sha256"
TAG_ARMS = "route_bench.arms"
TAG_BUDGET_GRID = "route_bench.budget_grid"
TAG_SKIP_KEY = "route_bench.skip_key"  # config hash + table fingerprint + code version
TAG_HOST = "route_bench.host"  # the process that created (and runs) the run
TAG_PID = "route_bench.pid"
TAG_PROC_START = "route_bench.proc_start"  # that process's start time (clock ticks since boot)
TAG_END_REASON = "route_bench.end_reason"  # why a run was ended KILLED / FAILED from outside
TAG_PREFLIGHT = "route_bench.preflight"
TAG_ROUTER_FAMILY = "route_bench.router_family"
TAG_FROZEN_SHA256 = "route_bench.frozen_sha256"  # + ".<file>": digests of protocol A's frozen files
TAG_ARTIFACT_ROOT = "route_bench.artifact_root"
TAG_GENERATOR = "route_bench.generator"  # + ".<name>.<key>": the answer model's settings
TAG_PARENT = "mlflow.parentRunId"
TAG_NOTE = "mlflow.note.content"  # the run's description in the MLflow UI (Markdown)
TAG_MLFLOW_GIT_COMMIT = "mlflow.source.git.commit"  # shown by the UI; set only when known
DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"
