"""Verdicts as dataclasses: one ItemResult per graded gradient, one SubmissionResult per submission."""

from __future__ import annotations

from dataclasses import dataclass, field

STATUSES = ("passed", "failed", "error", "timeout", "not_attempted")


@dataclass
class ItemResult:
    """The verdict on one item, in the JSON contract's shape."""

    id: str
    exercise: str
    name: str
    status: str
    expected_shape: list
    max_score: float
    exact: bool | None = None
    approx: bool | None = None
    maxdiff: float | None = None
    shape: list | None = None
    traps: list = field(default_factory=list)
    message: str = ""
    hints: list = field(default_factory=list)  # longer explanations, shown with --hints; not in the JSON
    output: str = ""  # what the student's code printed; shown on a terminal, not in the JSON
    value: object = field(default=None, repr=False)  # the returned tensor, for plots; not in the JSON
    truth: object = field(default=None, repr=False)
    hidden: str | None = None  # the hidden geometry's verdict ("passed", "failed"); None when it was not reached
    hidden_message: str = ""  # the part of message about the hidden geometry; not in the JSON
    scope: str = "item"  # "file": the whole exercise file failed; "call": the whole ex4 call (said once)
    findings: list = field(default_factory=list, repr=False)  # traps.Finding, rendered into message by level
    note: str = ""  # the part of message that is not a trap's (where the values differ)

    @property
    def score(self) -> float:
        return self.max_score if self.status == "passed" else 0.0

    def to_dict(self) -> dict:
        """Return the item as the JSON contract has it."""
        return {
            "id": self.id,
            "exercise": self.exercise,
            "name": self.name,
            "status": self.status,
            "exact": self.exact,
            "approx": self.approx,
            "maxdiff": self.maxdiff,
            "shape": self.shape,
            "expected_shape": self.expected_shape,
            "traps": list(self.traps),
            "message": self.message,
            "score": self.score,
            "max_score": self.max_score,
        }


@dataclass
class SubmissionResult:
    """Every item of one submission."""

    submission: str
    items: list[ItemResult]
    extra: dict = field(default_factory=dict)  # e.g. "training" from grade ex4 --full
    problems: list = field(default_factory=list)  # failures of a whole file or call, said once (runner.conclude)

    @property
    def score(self) -> float:
        return sum(i.score for i in self.items)

    @property
    def max_score(self) -> float:
        return sum(i.max_score for i in self.items)

    @property
    def passed(self) -> bool:
        return all(i.status == "passed" for i in self.items)

    def exercise_scores(self) -> dict[str, float]:
        """Return the score of each exercise present."""
        scores: dict[str, float] = {}
        for i in self.items:
            scores[i.exercise] = scores.get(i.exercise, 0.0) + i.score
        return scores

    def to_dict(self) -> dict:
        """Return the submission as the JSON contract has it."""
        return {
            "submission": self.submission,
            "score": self.score,
            "max_score": self.max_score,
            "items": [i.to_dict() for i in self.items],
            "problems": [{k: v for k, v in p.items() if k != "output"} for p in self.problems],
            **self.extra,
        }
