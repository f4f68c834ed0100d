"""MLflow tracking of jobs and sweeps (layout: ``harness.tracking.mlflow_tracker``) and the Hydra
callback that opens/closes a sweep (``harness.runner.sweep``). Imported lazily: importing
this package does not import MLflow."""
