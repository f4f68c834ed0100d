"""Running jobs and sweeps with tracking: the tracked job and the Hydra entry point (``job``),
and the sweep callback that validates every job, builds the table once and opens the sweep's
parent run (``sweep``). Above ``harness.app`` (compute) and ``harness.tracking`` (MLflow)."""
