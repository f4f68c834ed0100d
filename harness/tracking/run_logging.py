"""What a run records once it exists: params, tags, metrics (names via ``mlflow_name``), its
description and its experiment's, its input dataset, artifacts and MLflow tables, each store
call retried (``StoreClient._retry``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.store_schema import TAG_NOTE
from harness.tracking.naming import mlflow_name
from harness.tracking.run_notes import NOTE_MAX_CHARS
from harness.tracking.store_client import StoreClient, is_dataset_race, is_transient

DATASET_DIGEST_CHARS = 16  # MLflow keeps at most 36 characters of a dataset digest


class RunLogging(StoreClient):
    """Logging into a run of the store (the parent of ``harness.tracking.mlflow_tracker.Tracker``)."""

    def log_params(self, run_id: str, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)) for k, v in sorted(params.items())]
        for i in range(0, len(items), 100):  # MLflow: at most 100 params per batch
            chunk = items[i : i + 100]
            self._retry(lambda: self.client.log_batch(run_id, params=chunk))

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(mlflow_name(k), str(v)[:5000]) for k, v in sorted(tags.items())]
        for i in range(0, len(items), 100):
            chunk = items[i : i + 100]
            self._retry(lambda: self.client.log_batch(run_id, tags=chunk))

    def set_note(self, run_id: str, text: str) -> None:
        """The run's description (tag ``mlflow.note.content``), cut to MLflow's 8000 characters."""
        from mlflow.entities import RunTag

        tag = RunTag(TAG_NOTE, str(text)[:NOTE_MAX_CHARS])
        self._retry(lambda: self.client.log_batch(run_id, tags=[tag]))

    def set_experiment_note(self, run_id: str, text: str) -> None:
        """The description of the run's experiment (experiment tag ``mlflow.note.content``): the
        MLflow UI shows it in the experiment list's Description column and above the runs table,
        so the latest sweep's verdict is on the first page a user opens."""
        experiment_id = self._retry(lambda: self.client.get_run(run_id)).info.experiment_id
        self._retry(lambda: self.client.set_experiment_tag(experiment_id, TAG_NOTE, str(text)[:NOTE_MAX_CHARS]))

    def log_dataset(
        self, run_id: str, name: str, digest: str, source_type: str, source: Mapping[str, Any],
        profile: Mapping[str, Any] | None = None, context: str = "eval",
    ) -> None:
        """Record the run's input dataset (the UI's Datasets column): name, digest (cut to
        DATASET_DIGEST_CHARS), source and a profile (sizes). Logged as an MLflow dataset entity,
        so nothing is read or downloaded."""
        from mlflow.entities import Dataset, DatasetInput, InputTag

        entity = Dataset(
            name=str(name), digest=str(digest)[:DATASET_DIGEST_CHARS], source_type=str(source_type),
            source=json.dumps(dict(source), sort_keys=True, default=str),
            profile=json.dumps(dict(profile), sort_keys=True, default=str) if profile else None,
        )
        item = DatasetInput(dataset=entity, tags=[InputTag(key="mlflow.data.context", value=context)])
        self._retry(lambda: self.client.log_inputs(run_id, datasets=[item]),
                    transient=lambda exc: is_transient(exc) or is_dataset_race(exc))

    def log_metrics(self, run_id: str, metrics: Iterable[tuple[str, float, int]]) -> int:
        """Log ``(name, value, step)`` triples in batches of 1000; names via ``mlflow_name``.
        Non-finite values are logged as they are (MLflow stores NaN); None is skipped."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [
            Metric(mlflow_name(name), float(value), now, int(step))
            for name, value, step in metrics
            if value is not None
        ]
        for i in range(0, len(items), 1000):
            chunk = items[i : i + 1000]
            self._retry(lambda: self.client.log_batch(run_id, metrics=chunk))
        return len(items)

    def log_artifacts(self, run_id: str, local_dir: str | os.PathLike) -> None:
        self._retry(lambda: self.client.log_artifacts(run_id, str(local_dir)))

    def log_table(self, run_id: str, frame: Any, artifact_file: str) -> None:
        """A DataFrame as an MLflow table (``MlflowClient.log_table``: JSON ``orient="split"``,
        listed in the run's ``mlflow.loggedArtifacts`` tag, so the UI shows it as a table).
        ``log_table`` APPENDS to an existing file of that name; a rerun of a sweep (same parent
        run) must replace it instead, so an existing file is overwritten in the same format."""
        import tempfile

        folder = os.path.dirname(artifact_file) or None
        existing = {a.path for a in self._retry(lambda: self.client.list_artifacts(run_id, folder))}
        if artifact_file not in existing:
            self._retry(lambda: self.client.log_table(run_id, data=frame, artifact_file=artifact_file))
            return
        with tempfile.TemporaryDirectory(prefix="route-bench-table-") as tmp:
            path = Path(tmp) / os.path.basename(artifact_file)
            frame.to_json(path, orient="split", index=False, date_format="iso")
            self._retry(lambda: self.client.log_artifact(run_id, str(path), folder))
