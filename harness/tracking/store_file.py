"""A SQLite tracking store's file: what it is, and making a new one whole.

Why: MLflow writes its ~65 tables into ANY SQLite file it is pointed at (another program's
database included), and a process killed while it creates them leaves a store every later open
refuses ("table _alembic_tmp_... already exists"). So, before MLflow touches a file:

- :func:`inspect_store` reads the file (read-only; nothing is written) and says what it is: no
  file yet, an MLflow store, a store whose creation was interrupted ("half-created": some of
  MLflow's tables, no or an old ``alembic_version`` row, leftover ``_alembic_tmp_*`` tables), or
  something else (an empty file, an SQLite database without tables or with another program's
  tables);
- :func:`prepare_store` (called by ``StoreClient`` under the store folder's lock
  ``.route-bench.lock``, so concurrent sweeps create one store: the first creates, the others
  wait and open it) creates a missing store ATOMICALLY: MLflow builds it in a temporary file
  next to it, which is then renamed into place, so a kill -9 leaves no half-created store, only
  a temporary file the next creation removes. A half-created store that holds nothing (no run,
  no experiment but MLflow's ``Default``) is made anew the same way; one that holds runs is
  refused, naming the fix; anything else is refused before anything is written to it.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

SQLITE_HEADER = b"SQLite format 3\x00"
TMP_PREFIX = "_alembic_tmp_"  # alembic's copy of a table while a migration rebuilds it (SQLite)
# rows a new store holds: the schema revision, MLflow's workspace row and its "Default" experiment
BOOKKEEPING = ("alembic_version", "workspaces")
HALF_IDLE_S = 10.0  # a half-created store changed this recently may still be being created: wait


@dataclass
class StoreState:
    """What :func:`inspect_store` found in a store file."""

    kind: str  # "missing", "mlflow", "half", "empty", "no-tables", "foreign", "unreadable"
    tables: list[str] = field(default_factory=list)
    revision: str | None = None  # the alembic_version row (None: no table or no row)
    holds_data: bool = False  # a run, a non-Default experiment, a registered model, ...
    detail: str = ""

    @property
    def why_half(self) -> str:
        """What shows a half-created store, in a few words."""
        tmp = [t for t in self.tables if t.startswith(TMP_PREFIX)]
        if tmp:
            return f"leftover table {tmp[0]}"
        if self.revision is None:
            return "no alembic_version row"
        return f"schema revision {self.revision}, not this MLflow's {head_revision()}"


def head_revision() -> str:
    """This MLflow's schema revision (what a complete, current store records)."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return str(_get_latest_schema_revision())


def _rows(con: sqlite3.Connection, table: str, where: str = "") -> int:
    return int(con.execute(f'SELECT count(*) FROM "{table}" {where}').fetchone()[0])


def _holds_data(con: sqlite3.Connection, tables: list[str]) -> bool:
    """Any row a new store does not hold: MLflow's bookkeeping and its Default experiment aside."""
    for table in tables:
        base = table[len(TMP_PREFIX):] if table.startswith(TMP_PREFIX) else table
        if base in BOOKKEEPING:
            continue
        if base == "experiments":
            if _rows(con, table, "WHERE name != 'Default'"):
                return True
        elif _rows(con, table):
            return True
    return False


def inspect_store(path: Path) -> StoreState:
    """What the file at ``path`` is, read without writing (``mode=ro``)."""
    if not os.path.lexists(path):
        return StoreState("missing")
    if os.path.getsize(path) == 0:
        return StoreState("empty")
    with open(path, "rb") as f:
        if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            return StoreState("foreign", detail="not an SQLite database")
    try:
        state = _read(path, read_only=True)
    except sqlite3.Error as exc:
        if not any(Path(f"{path}{end}").exists() for end in ("-journal", "-wal")):
            return StoreState("unreadable", detail=str(exc))
        try:  # a hot journal (a writer was killed) is rolled back only by a connection that may write
            state = _read(path, read_only=False)
        except sqlite3.Error as exc2:
            return StoreState("unreadable", detail=str(exc2))
    return _classify(state)


def _read(path: Path, read_only: bool) -> StoreState:
    """The tables, the schema revision and whether anything is in it (queries only)."""
    con = sqlite3.connect(f"file:{path}?mode=ro" if read_only else f"file:{path}", uri=True, timeout=30)
    try:
        tables = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        revision = None
        if "alembic_version" in tables:
            row = con.execute("SELECT version_num FROM alembic_version").fetchone()
            revision = str(row[0]) if row else None
        state = StoreState("mlflow", tables, revision)
        state.holds_data = _holds_data(con, tables)
        return state
    finally:
        con.close()


def _classify(state: StoreState) -> StoreState:
    tables = state.tables
    mlflow_marks = {"experiments", "runs", "alembic_version"} & set(tables) or any(t.startswith(TMP_PREFIX) for t in tables)
    if not tables:
        state.kind = "no-tables"
    elif not mlflow_marks:
        state.kind = "foreign"
    elif state.revision is None or any(t.startswith(TMP_PREFIX) for t in tables):
        state.kind = "half"
    elif state.revision != head_revision() and state.revision in known_revisions() and not state.holds_data:
        state.kind = "half"  # an interrupted creation stops between two migrations: nothing in it
    return state


@functools.lru_cache(maxsize=1)
def known_revisions() -> frozenset[str]:
    """The schema revisions this MLflow knows (a store of a newer MLflow is not half-created)."""
    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _get_alembic_config

    return frozenset(r.revision for r in ScriptDirectory.from_config(_get_alembic_config("sqlite://")).walk_revisions())


def refusal(path: Path, state: StoreState, *, reading: bool = False) -> str | None:
    """One line on why the file at ``path`` is no store to use (None: use it). A half-created
    store that holds nothing is no refusal when writing: :func:`prepare_store` makes it anew."""
    expected = "expected an MLflow tracking store (an SQLite database MLflow created)"
    elsewhere = ("read the store a sweep wrote instead" if reading
                 else "point tracking.uri at another file (a missing one is created)")
    if state.kind == "empty":
        return f"MLflow store {path} is an empty file, {expected}; delete it (a new store is made there) or {elsewhere}"
    if state.kind == "no-tables":
        return f"MLflow store {path} is an SQLite database with no tables, {expected}; delete it or {elsewhere}"
    if state.kind == "foreign":
        what = state.detail or f"an SQLite database of another program (tables: {', '.join(state.tables[:5])}" + (
            ", ...)" if len(state.tables) > 5 else ")")
        return f"MLflow store {path} is {what}, {expected}; nothing was written to it; {elsewhere}"
    if state.kind == "unreadable":
        return f"MLflow store {path} cannot be read as an SQLite database ({state.detail}), {expected}"
    if state.kind == "half" and (state.holds_data or reading):
        why = f"MLflow store {path} is half-created or half-upgraded ({state.why_half}): its creation or upgrade was interrupted"
        if not state.holds_data:
            return f"{why}; it holds no runs: delete it, or start a sweep or run on it, which makes it anew"
        return (f"{why}, and it holds runs: restore it from a backup, or run `mlflow db upgrade sqlite:///{path}` "
                "if it was being upgraded, or move it aside (a new store is made there)")
    return None


def _remove_leftovers(path: Path) -> None:
    """Temporary files of creations killed before their rename (only one creation runs at a
    time, under the lock, so any found now is abandoned)."""
    for old in path.parent.glob(f".{path.name}.creating-*"):
        try:
            old.unlink()
        except OSError:
            pass


def create_store(path: Path) -> None:
    """A new, complete MLflow store at ``path``: built by MLflow in a temporary file in the same
    folder, then renamed into place (atomic: the path holds the old file or a whole store)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking._tracking_service.utils import _get_sqlalchemy_store

    _remove_leftovers(path)
    tmp = path.parent / f".{path.name}.creating-{os.getpid()}"
    uri = f"sqlite:///{tmp}"
    try:
        store = _get_sqlalchemy_store(uri, None)  # as MLflow's client builds it: its tables, its Default experiment
        store.engine.dispose()  # no connection left on the file once it is renamed
        getattr(SqlAlchemyStore, "_engine_map", {}).pop(uri, None)
        os.replace(tmp, path)
        _forget_engines(path)
    finally:
        for leftover in (tmp, Path(f"{tmp}-journal")):
            if leftover.exists():
                leftover.unlink()


def _forget_engines(path: Path) -> None:
    """Drop MLflow's cached engines of the file replaced at ``path`` (an engine opened on a
    half-created store in this process would keep reading the old file)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    engines = getattr(SqlAlchemyStore, "_engine_map", {})
    for key in [k for k in engines if str(k).startswith("sqlite:///")]:
        if Path(str(key)[len("sqlite:///"):].split("?", 1)[0]).absolute() == path.absolute():
            engines.pop(key).dispose()


def prepare_store(path: Path, say=print) -> None:
    """Make ``path`` a usable MLflow store, or refuse it (``ValueError`` with one line); call it
    under the store folder's lock. A missing store is created; a half-created one that holds
    nothing is made anew (after waiting while it still changes: another program may be creating
    it); anything else that is not an MLflow store is refused before anything is written."""
    state = inspect_store(path)
    while state.kind == "half" and not state.holds_data and time.time() - os.path.getmtime(path) < HALF_IDLE_S:
        time.sleep(0.5)
        state = inspect_store(path)
    problem = refusal(path, state)
    if problem:
        raise ValueError(problem)
    if state.kind == "missing":
        create_store(path)
    elif state.kind == "half":
        create_store(path)
        say(f"[route-bench] MLflow store {path} was half-created ({state.why_half}: its creation was interrupted); "
            "it held no runs and was made anew")
