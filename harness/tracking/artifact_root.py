"""Artifacts of a local SQLite store, found relative to the store's folder (a copied store works).

Why: MLflow records every artifact location as an absolute path. ``create_experiment`` resolves
a relative ``artifact_location`` against the working directory before storing it (MLflow PR
#7670; relative locations are an open feature request, #3144), and each run's ``artifact_uri``
is that absolute root plus ``<run id>/artifacts``. A copied or moved ``mlruns/`` therefore
reads, and its new runs write, the ORIGINAL folder's artifacts, or nothing once it is deleted.

What the harness does for a store it owns (``sqlite:///<folder>/mlflow.db`` with artifacts in
``<folder>/artifacts``, ``naming.artifact_location``):
- experiments it creates carry the tag ``route_bench.artifact_root = artifacts``: the root,
  relative to the store's folder;
- reading (the report, the sweep's end, the results page) resolves a run's artifacts against the
  folder of the store being read: ``<folder>/artifacts/<run id>/artifacts`` when it exists,
  whatever absolute path the run recorded (``run_artifact_dir``); nothing is written;
- writing (a sweep or job on the store) first rewrites the recorded absolute roots of the
  tagged experiments and their runs to this folder (``relocate``, one transaction on the
  SQLite file), so new runs write into the copy and ``mlflow ui`` on the copy shows its own
  artifacts.
What stays absolute: a store whose experiments were not created by the harness (no tag; read
through what MLflow recorded), a server or other remote store (the server decides), and
``mlflow ui`` on a copy before any harness sweep or job ran on it (it reads what the database
records until ``relocate`` ran; ``python -m harness report`` needs no relocation).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import unquote, urlparse

from harness.store_schema import TAG_ARTIFACT_ROOT

ROOT_TAG = TAG_ARTIFACT_ROOT
ROOT_NAME = "artifacts"  # relative to the folder holding mlflow.db


def store_folder(tracking_uri: str | None) -> Path | None:
    """The folder of a local SQLite store (``sqlite:///<folder>/mlflow.db``), else None."""
    if not tracking_uri or not str(tracking_uri).startswith("sqlite:///"):
        return None
    return Path(str(tracking_uri)[len("sqlite:///"):]).parent


def own_root(tracking_uri: str | None) -> str | None:
    """``file://`` URI of a local SQLite store's own artifact folder (``<folder>/artifacts``)."""
    folder = store_folder(tracking_uri)
    return None if folder is None else (folder / ROOT_NAME).resolve().as_uri()


def _path_of(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and uri.startswith("/"):
        return Path(uri)
    return None


def run_artifact_dir(tracking_uri: str | None, run_id: str, artifact_uri: str) -> Path | None:
    """The local folder of a run's artifacts: in the store's own ``artifacts/`` when the store
    is a local SQLite file and that folder exists (a copied store reads its copy), else the
    recorded ``file://`` location; None for a remote location."""
    folder = store_folder(tracking_uri)
    if folder is not None:
        own = folder / ROOT_NAME / run_id / "artifacts"
        if own.is_dir():
            return own
    return _path_of(str(artifact_uri or ""))


def relocate(tracking_uri: str) -> int:
    """Rewrite the recorded artifact roots of the tagged experiments of a local SQLite store
    (and their runs') to this store's folder when they name another folder (the store was
    copied or moved). Returns the number of experiments rewritten; 0 for any other store."""
    folder = store_folder(tracking_uri)
    db = folder / "mlflow.db" if folder is not None else None
    if db is None or not db.is_file():
        return 0
    root = own_root(tracking_uri)
    con = sqlite3.connect(str(db), timeout=60)
    try:
        with con:  # one transaction: every row or none
            rows = con.execute(
                "SELECT e.experiment_id, e.artifact_location FROM experiments e JOIN experiment_tags t "
                "ON t.experiment_id = e.experiment_id WHERE t.key = ? AND t.value = ?", (ROOT_TAG, ROOT_NAME)).fetchall()
            moved = [(exp_id, old.rstrip("/")) for exp_id, old in rows if old and old.rstrip("/") != root]
            for exp_id, old in moved:
                con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?", (root, exp_id))
                con.execute("UPDATE runs SET artifact_uri = ? || substr(artifact_uri, ?) "
                            "WHERE experiment_id = ? AND substr(artifact_uri, 1, ?) = ?",
                            (root, len(old) + 1, exp_id, len(old), old))
    finally:
        con.close()
    return len(moved)
