"""Run and experiment descriptions (MLflow's ``mlflow.note.content``): a title line and a text
block, cut to MLflow's tag limit with a pointer to the full text, and the text read back."""

from __future__ import annotations

NOTE_MAX_CHARS = 8000  # MLflow's limit of a tag value


def description(title: str, text: str, limit: int = NOTE_MAX_CHARS) -> str:
    """A run description (Markdown): a title line, then ``text`` as a code block, cut to MLflow's
    tag limit with a pointer to the full text (the ``summary.txt`` artifact)."""
    head, tail = f"{title}\n\n```\n", "\n```\n"
    cut = "\n... (cut; the full text is the artifact summary.txt)"
    room = limit - len(head) - len(tail)
    body = text if len(text) <= room else text[: max(0, room - len(cut))] + cut
    return head + body + tail


def experiment_description(title: str, run_id: str, lines: list[str], limit: int = NOTE_MAX_CHARS) -> str:
    """The experiment's description after a sweep (Markdown). Its first line is what the MLflow
    UI shows above the runs table while the description is folded, so it carries the first
    closing line (the verdict); then every closing line as a code block and the parent run,
    whose description and artifacts hold the full tables."""
    head = lines[0].strip() if lines else "no verdict: no protocol of this sweep has a sweep-level result"
    return description(f"**Latest sweep**: {head}", "\n".join(lines + ["", f"{title}: parent run {run_id} (its "
                       "description and artifacts hold the full tables)"]), limit)


def note_text(note: str) -> str:
    """The text block of a ``description`` (what a finished run's summary said), else ``note``."""
    start = note.find("```\n")
    end = note.rfind("\n```")
    return note[start + 4 : end] if 0 <= start < end else note
