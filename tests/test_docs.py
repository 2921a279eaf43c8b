"""The docs and the code say what is, not how it came to be: no issue numbers, no dated work
diary, no reference to a document that is not in the repository. History belongs in
CHANGELOG.md, which is exempt."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from paths import ROOT

ORDINAL = "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|next|last|this"
# each pattern with what it catches
FORBIDDEN = {
    "an issue number": re.compile(r"\bissues? #?\d+|\(#\d+\)", re.I),
    "a dated session diary": re.compile(
        rf"\bsession \(\d{{4}}-|\b(?:{ORDINAL}) session\b|\bsessions? of issue\b", re.I
    ),
    "a reference to notes outside the repository": re.compile(r"\bdesign\s+notes\b", re.I),
}


def checked_files() -> list[Path]:
    """README.md, docs/*.md, the package, the scripts, the configs, the Makefile and CI."""
    files = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "musicgen").rglob("*.py"))
    for folder, patterns in (("scripts", ("*.py", "*.sh")), ("configs", ("*.yaml",))):
        for pattern in patterns:
            files += sorted((ROOT / folder).rglob(pattern))
    files += sorted(p for p in (ROOT / ".ci").rglob("*") if p.is_file())
    return [p for p in files if p.is_file()]


def offences(text: str) -> list[tuple[int, str, str]]:
    """(line number, what, the line) of every forbidden pattern in `text`."""
    return [
        (n, what, line.strip())
        for n, line in enumerate(text.splitlines(), 1)
        for what, pattern in FORBIDDEN.items()
        if pattern.search(line)
    ]


def test_the_checked_files_are_there():
    names = {p.relative_to(ROOT).as_posix() for p in checked_files()}
    assert {"README.md", "docs/evaluation.md", "musicgen/cli.py", "Makefile"} <= names


@pytest.mark.parametrize("path", checked_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_issue_numbers_or_work_diary(path):
    found = offences(path.read_text(encoding="utf-8", errors="replace"))
    assert not found, "\n".join(f"{path.name}:{n}: {what}: {line}" for n, what, line in found)


# the examples are assembled, so that this file holds none of what it forbids
ISSUE, NOTES, DATE = "issue", "design" + " notes", "2026" + "-12-05"


@pytest.mark.parametrize(
    "line",
    [
        f"Phase 5 ({ISSUE} 25 item 2, in progress)",
        f"the models before {ISSUE} #12 were trained on",
        "the MAESTRO model (#" + "25)",
        f"**Seventh session ({DATE}, 06:52-09:50 UTC)**",
        "Third session of the work: a GEMM over the layers",
        f"Perceiver S ({NOTES}, part 4)",
    ],
)
def test_the_check_catches_history(line):
    assert offences(line)


@pytest.mark.parametrize(
    "line",
    [
        "Every page has its own `jobs.Session`; an expired session deletes its files.",
        "start_new_session=True,  # its own process group",
        "Liutkus et al., ICML 2021, section 4.2",
        "see CHANGELOG.md for the history",
    ],
)
def test_the_check_leaves_current_prose_alone(line):
    assert not offences(line)
