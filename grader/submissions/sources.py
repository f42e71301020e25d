"""What a submission hands the grader: Python source per exercise, and where each line came from.

Every way in (a folder of .py files, a zip, a notebook, a kernel's input history) ends as a `Submission`: one
`Source` per exercise found, plus notes on what intake decided (which file was graded, what was skipped). The
runner only ever sees this; it never reads a student's files itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    """One exercise's code as the sandbox will execute it."""

    exercise: str  # 'ex1'
    path: str  # the file the code came from; exceptions in the sandbox name it
    text: str  # the Python source that is executed
    label: str = ""  # what was graded, for the student's result: 'ex1.py', 'hw.ipynb cells 5, 7'
    line_map: tuple[str, ...] = ()  # line_map[i - 1] says where line i of text came from: 'cell 11, line 24'

    def where(self, line: int | None) -> str:
        """Return how a message names line `line` of the executed text: 'line 7' or 'cell 11, line 24'."""
        if not line:
            return ""
        if self.line_map and 0 < line <= len(self.line_map) and self.line_map[line - 1]:
            return self.line_map[line - 1]
        return f"line {line}"


@dataclass
class Submission:
    """Everything intake found in one student's submission."""

    name: str  # the student id the results are keyed by
    sources: dict[str, Source] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what intake decided: the file graded, entries skipped
    identity: dict[str, str] = field(default_factory=dict)  # name, email, sid where the input carries them
    problems: dict[str, str] = field(default_factory=dict)  # exercise -> why its file could not be used

    def to_dict(self) -> dict:
        """Return what intake decided, for the JSON contract."""
        return {
            "graded_files": {ex: s.label or s.path for ex, s in sorted(self.sources.items())},
            "notes": list(self.notes),
            **({"identity": dict(self.identity)} if self.identity else {}),
        }
