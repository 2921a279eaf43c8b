"""RUN_DIR/log.jsonl: one JSON record per line, appended by the trainer, read by plots and resume.

One reader for every user of the log. A crash (or SIGKILL, or a full disk) can tear the last line;
that line is dropped. Anything else that is not a JSON record (a binary file, a bad line in the
middle, a record whose `step` is not a count) is a one-line error naming the file and line,
never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

from musicgen.errors import MusicgenError


def log_path(run: str | Path) -> Path:
    path = Path(run)
    return path if path.suffix == ".jsonl" else path / "log.jsonl"


def read_log(run: str | Path, required: bool = True) -> list[dict]:
    """Records of RUN_DIR/log.jsonl (or of that file); a torn last line is skipped.

    With `required=False` a missing or empty log is simply no records.
    """
    path = log_path(run)
    if not path.is_file():
        if required:
            raise MusicgenError(f"{path}: training log not found")
        return []
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise MusicgenError(f"{path}: not a training log (binary data, not JSON lines)") from None
    except OSError as exc:
        raise MusicgenError(f"{path}: cannot read ({exc.strerror})") from None
    lines = text.splitlines()
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1 and not text.endswith("\n"):
                continue  # torn by a crash mid-write
            raise MusicgenError(f"{path}: line {i + 1} is not JSON") from None
        if not isinstance(record, dict):
            raise MusicgenError(f"{path}: line {i + 1} is not a JSON record")
        step = record.get("step", 0)
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise MusicgenError(f"{path}: line {i + 1}: 'step' must be a count, got {step!r}")
        if not isinstance(record.get("kind", ""), str):
            raise MusicgenError(f"{path}: line {i + 1}: 'kind' must be text")
        records.append(record)
    if required and not records:
        raise MusicgenError(f"{path}: the log is empty")
    return records


def records_text(records: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)
