"""A course's grading policy, read from one course.toml: points, message level, the secret and Gradescope visibility.

    level = "diagnose"            # how much a student message may say: diagnose | hint | full
    secret = "long random text"   # draws the hidden geometry; never enters the student bundle

    [points]
    ex1 = 13                      # an exercise's total, shared equally by its items not named below
    "ex3.dhprebn" = 6             # one item

    [gradescope]
    visibility = "visible"                # the lecture-geometry tests and the summary
    hidden_visibility = "after_published"  # the hidden-geometry tests, which carry the points

    [similarity]
    base = ["lecture.ipynb", "given.py"]  # code every student may start from: never evidence of copying

    [late]
    penalty = 0.1                 # fraction of the score taken off a late submission
    per_day = 0.05                # and per day (or part of one) late, where the platform says how late
    max = 0.5                     # the most a late submission loses, as a fraction of its score
    due = 2026-11-01T23:59:00-07:00  # for a Gradescope export, which gives each submission's time, not the due date

Every key is optional; a missing one keeps the grader's default. Unknown keys and bad values are errors that
name the key, the value and the file.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import weakref
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from grader.sandbox import forget

FILENAME = "course.toml"
LEVELS = ("diagnose", "hint", "full")


def levels_down(level: str) -> tuple[str, ...]:
    """Return a message level and those below it, highest first: where a text missing at a level is looked for."""
    return tuple(reversed(LEVELS[: LEVELS.index(level) + 1]))


VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
DEFAULT_LEVEL = "diagnose"
MIN_SECRET_CHARS = 12
_TOP_KEYS = ("level", "secret", "points", "gradescope", "similarity", "late")
_GRADESCOPE_KEYS = ("visibility", "hidden_visibility")
_SIMILARITY_KEYS = ("base",)
_LATE_FRACTIONS = ("penalty", "per_day", "max")
_LATE_KEYS = (*_LATE_FRACTIONS, "due")
DAY = timedelta(days=1)


_LIVE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # every Policy alive, by id: a child wipes them


@forget.on_fork_forget
def wipe_secrets() -> None:
    """Forget the secret of every Policy in this process (a sandbox child's copy: the parent keeps its own).

    A child inherits its parent's call stack, and a frame up that stack holds the course's Policy: student code
    walking frames or gc's objects would find the secret that draws the hidden geometry.
    """
    for policy in list(_LIVE.values()):
        object.__setattr__(policy, "secret", None)


class PolicyError(ValueError):
    """A course.toml that cannot be used: the message names the file, the key and the value."""


@dataclass(frozen=True)
class LateRule:
    """course.toml's [late]: what a late submission loses, as fractions of its score.

    A submission the platform marks late loses `penalty`, plus `per_day` for each day (or part of one) it came
    after the due date where the platform says how late (Gradescope: its submission time and due date; Canvas's
    download says only late or not, so there `per_day` cannot apply); never more than `max` in all.
    due: the due date for a source that gives a submission's time but not the due date (a Gradescope export).
    """

    penalty: float = 0.0
    per_day: float = 0.0
    max: float = 1.0
    due: datetime | None = None

    def fraction(self, days: int | None) -> float:
        """Return the fraction of the score a late submission loses; days: how late, in days begun (None: unknown)."""
        taken = self.penalty + (self.per_day * days if days is not None else 0.0)
        return round(min(self.max, taken), 6)

    def describe(self) -> dict:
        """Return the rule for summary.json's policy."""
        return {
            "penalty": self.penalty,
            "per_day": self.per_day,
            "max": self.max,
            **({"due": self.due.isoformat()} if self.due is not None else {}),
        }

    def text(self) -> str:
        """Return the rule in words, for the line a batch starts with: '10% off a late submission, ...'."""
        parts = []
        if self.penalty:
            parts.append(f"{_percent(self.penalty)} off a late submission")
        if self.per_day:
            parts.append(f"{_percent(self.per_day)} a day late (where the platform says how late)")
        if self.max < 1:
            parts.append(f"at most {_percent(self.max)}")
        if self.due is not None:
            parts.append(f"due {self.due.isoformat()} for a Gradescope export")
        return ", ".join(parts) or "no points off"

    def to_toml(self) -> list[str]:
        """Return the [late] table's lines."""
        lines = ["", "[late]"]
        lines += [f"{k} = {_number(getattr(self, k))}" for k in _LATE_FRACTIONS]
        if self.due is not None:
            lines.append(f"due = {self.due.isoformat()}")
        return lines


def _percent(x: float) -> str:
    return f"{100 * x:g}%"


def parse_time(text) -> datetime | None:
    """Return an ISO 8601 time with its UTC offset ('2026-11-01T10:00:00-07:00', or ending in Z) as a datetime, or
    None if it is not one (no offset: which day it is depends on where it was read)."""
    if isinstance(text, datetime):
        when = text
    elif isinstance(text, str) and 0 < len(text) <= 64:
        raw = text.strip()
        raw = raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw
        try:
            when = datetime.fromisoformat(raw)
        except ValueError:
            return None
    else:
        return None
    return when if when.tzinfo is not None and when.utcoffset() is not None else None


def days_late(submitted: datetime, due: datetime) -> int:
    """Return how many days (each begun counts whole) submitted came after due; 0 when it came in time."""
    late = submitted - due
    if late <= timedelta(0):
        return 0
    return math.ceil(late / DAY)


def late_penalty(
    rule: LateRule | None, score: float, *, late: bool | None, submitted_at: str = "", due: str | datetime = ""
) -> dict | None:
    """Return what a submission loses under the rule, or None (no rule, in time, or lateness unknown).

    late: what the platform says (Canvas: True or False; None: it says nothing). submitted_at and due (ISO 8601 with
    their UTC offsets) say how late where both are known; due defaults to the rule's own. The record holds
    raw_score, fraction, points (taken off) and, where known, days_late, submitted_at and due.
    """
    if rule is None:
        return None
    submitted, due_at = parse_time(submitted_at), parse_time(due) if due else rule.due
    days = days_late(submitted, due_at) if submitted is not None and due_at is not None else None
    if days is not None:
        late = days > 0
    if late is not True:
        return None
    fraction = rule.fraction(days)
    record = {"raw_score": score, "fraction": fraction, "points": round(float(score) * fraction, 4)}
    if days is not None:
        record.update(days_late=days, submitted_at=submitted.isoformat(), due=due_at.isoformat())
    elif rule.per_day:
        record["note"] = NO_DAYS
    return record


NO_DAYS = "how late is not known (the platform says only that it is late), so per_day is not applied"


def apply_late(
    result: dict, rule: LateRule | None, *, late: bool | None, submitted_at: str = "", due: str | datetime = ""
) -> dict | None:
    """Take a late submission's penalty off a graded result (a SubmissionResult.to_dict()) in place; return the record.

    Run by the instructor's process once grading is over, never by anything that runs student code. The result's
    score becomes the penalised one and "late_penalty" holds the record (late_penalty() above); where the times say
    whether it was late and the platform did not ("late" missing), "late" is set. Without a rule, or for a result
    the grader failed on (no score), nothing changes.
    """
    if rule is None or result.get("grader_failed"):
        return None
    submitted, due_at = parse_time(submitted_at), parse_time(due) if due else rule.due
    if late is None and submitted is not None and due_at is not None and "late" not in result:
        result["late"] = days_late(submitted, due_at) > 0
    record = late_penalty(rule, result["score"], late=late, submitted_at=submitted_at, due=due)
    if record is not None:
        if record["points"]:
            result["score"] = round(record["raw_score"] - record["points"], 4)
        result["late_penalty"] = record
    return record


@dataclass(frozen=True)
class Policy:
    """What a course decides: points per item and exercise, message level, secret, Gradescope visibility.

    points: {"ex1.dC": 2.0, "ex1": 26.0, ...}, item ids and exercise totals as written in course.toml.
    secret: draws the hidden second geometry and its seeds; None draws a fresh one per run (see fixture.py).
    similarity_base: absolute paths of the base code the similarity check ignores; never written by to_toml.
    """

    points: dict = field(default_factory=dict)
    level: str = DEFAULT_LEVEL
    secret: str | None = field(default=None, repr=False)
    visibility: str = "visible"
    hidden_visibility: str = "after_published"  # the points, shown once grades are published
    source: str = ""  # the file it was read from, for messages
    similarity_base: tuple = ()
    late: LateRule | None = None  # course.toml's [late]; None: lateness takes nothing off

    def __post_init__(self):
        _LIVE[id(self)] = self

    def item_points(self, item_id: str, default: float) -> float:
        """Return the points of one item: its own entry, else its share of its exercise's total, else default."""
        if item_id in self.points:
            return float(self.points[item_id])
        exercise = item_id.split(".", 1)[0]
        if exercise not in self.points:
            return float(default)
        from grader.spec import catalogue

        ids = [i.id for i in catalogue.items((exercise,))]
        named = [i for i in ids if i in self.points]
        left = float(self.points[exercise]) - sum(float(self.points[i]) for i in named)
        return left / (len(ids) - len(named))

    def apply(self, result) -> None:
        """Set every item's max_score in a SubmissionResult from this policy."""
        for item in result.items:
            item.max_score = self.item_points(item.id, item.max_score)

    def public(self) -> Policy:
        """Return this policy without its secret: what may ship to students."""
        return replace(self, secret=None)

    def to_toml(self) -> str:
        """Write the policy as course.toml text (the secret included only if set)."""
        lines = [f"level = {json.dumps(self.level)}"]
        if self.secret is not None:
            lines.append(f"secret = {json.dumps(self.secret)}")
        if self.points:
            lines += ["", "[points]"]
            lines += [f"{json.dumps(k)} = {_number(v)}" for k, v in self.points.items()]
        lines += [
            "",
            "[gradescope]",
            f"visibility = {json.dumps(self.visibility)}",
            f"hidden_visibility = {json.dumps(self.hidden_visibility)}",
        ]
        if self.late is not None:  # only then: a course without the rule keeps its text, and its fingerprint
            lines += self.late.to_toml()
        return "\n".join(lines) + "\n"

    def describe(self) -> dict:
        """Return what the run used, for summary.json and the line a batch starts with (never the secret itself)."""
        return {
            "course_toml": Path(self.source).name if self.source else None,  # its contents: the fingerprint
            "level": self.level,
            "points": dict(self.points),
            "secret": "from course.toml" if self.secret is not None else "random for this run (set one to grade)",
            "visibility": self.visibility,
            "hidden_visibility": self.hidden_visibility,
            **({"late": self.late.describe()} if self.late is not None else {}),
            "fingerprint": self.fingerprint(),
        }

    def fingerprint(self) -> str:
        """Return a short hash of everything that changes a grade (the secret only as a hash)."""
        secret = hashlib.sha256(self.secret.encode()).hexdigest() if self.secret is not None else "per-run"
        return hashlib.sha256(f"{self.public().to_toml()}|{secret}".encode()).hexdigest()[:16]


def _number(x: float) -> str:
    """Render a number for TOML."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def load(path) -> Policy:
    """Read and validate a course.toml; raise PolicyError naming the file, the key and the bad value."""
    if sys.version_info >= (3, 11):  # imported here: most runs find no course.toml (~2 ms of `grade exN`)
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyError(f"{path}: no such course policy file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{path}: cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{path}: not valid TOML: {exc}") from None
    return from_dict(raw, str(path))


def from_dict(raw: dict, source: str = FILENAME) -> Policy:
    """Validate a parsed course.toml and return its Policy."""
    unknown = [k for k in raw if k not in _TOP_KEYS]
    if unknown:
        raise PolicyError(f"{source}: unknown key {unknown[0]!r} (known keys: {', '.join(_TOP_KEYS)})")
    level = raw.get("level", DEFAULT_LEVEL)
    if level not in LEVELS:
        raise PolicyError(f"{source}: level = {level!r} is not one of {', '.join(LEVELS)}")
    secret = raw.get("secret")
    if secret is not None and (not isinstance(secret, str) or len(secret.strip()) < MIN_SECRET_CHARS):
        # never echo the value: it may be most of a real secret
        kind = f"{len(secret)} characters" if isinstance(secret, str) else f"a {type(secret).__name__}"
        raise PolicyError(f"{source}: secret must be a string of at least {MIN_SECRET_CHARS} characters (got {kind})")
    gs = _table(raw.get("gradescope", {}), "gradescope", _GRADESCOPE_KEYS, source)
    for key, value in gs.items():
        if value not in VISIBILITIES:
            raise PolicyError(f"{source}: gradescope.{key} = {value!r} is not one of {', '.join(VISIBILITIES)}")
    return Policy(
        points=_points(raw.get("points", {}), source),
        level=level,
        secret=secret,
        visibility=gs.get("visibility", "visible"),
        hidden_visibility=gs.get("hidden_visibility", "after_published"),
        source=source,
        similarity_base=_similarity_base(raw.get("similarity", {}), source),
        late=_late(raw["late"], source) if "late" in raw else None,
    )


def _table(table, name: str, known: tuple, source: str) -> dict:
    """Return a [name] table of course.toml, or raise naming the file: not a table, or a key it does not know."""
    if not isinstance(table, dict):
        raise PolicyError(f"{source}: {name} must be a table ([{name}]), not {table!r}")
    for key in table:
        if key not in known:
            raise PolicyError(f"{source}: unknown key '{name}.{key}' (known: {', '.join(known)})")
    return table


def _late(table, source: str) -> LateRule:
    """Validate the [late] table: fractions between 0 and 1, and a due date with its UTC offset."""
    table = _table(table, "late", _LATE_KEYS, source)
    for key in _LATE_FRACTIONS:
        value = table.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise PolicyError(f"{source}: late.{key} = {value!r} is not a fraction between 0 and 1 (0.1 is 10%)")
    if not table.get("penalty") and not table.get("per_day"):
        raise PolicyError(f"{source}: [late] takes nothing off: give late.penalty or late.per_day (0.1 is 10%)")
    due = table.get("due")
    if due is not None and (not isinstance(due, datetime) or parse_time(due) is None):
        raise PolicyError(
            f"{source}: late.due = {due!r} is not a date and time with its UTC offset (due = 2026-11-01T23:59:00-07:00)"
        )
    return LateRule(
        penalty=float(table.get("penalty", 0.0)),
        per_day=float(table.get("per_day", 0.0)),
        max=float(table.get("max", 1.0)),
        due=due,
    )


def _similarity_base(table, source: str) -> tuple:
    """Validate the [similarity] table; return its base files as absolute paths, relative ones from source's folder."""
    table = _table(table, "similarity", _SIMILARITY_KEYS, source)
    base = table.get("base", [])
    if not isinstance(base, list) or not all(isinstance(p, str) and p.strip() for p in base):
        raise PolicyError(f"{source}: similarity.base = {base!r} is not a list of file paths")
    paths = []
    for p in base:
        path = (Path(source).parent / p).resolve()
        if not path.is_file():
            raise PolicyError(f"{source}: similarity.base names {p!r}, which is not a file ({path})")
        paths.append(str(path))
    return tuple(paths)


def _points(table, source: str) -> dict:
    """Validate the [points] table: item ids or exercises mapped to finite, non-negative numbers."""
    from grader.spec import catalogue

    if not isinstance(table, dict):
        raise PolicyError(f"{source}: points must be a table ([points]), not {table!r}")
    ids = {i.id: i for i in catalogue.items()}
    points = {}
    for key, value in table.items():
        if key not in ids and key not in catalogue.EXERCISES:
            raise PolicyError(
                f"{source}: points key {key!r} is neither an exercise ({', '.join(catalogue.EXERCISES)}) nor an "
                f"item id such as ex1.dC or ex2.dlogits"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise PolicyError(f"{source}: points {key!r} = {value!r} is not a non-negative number")
        points[key] = value
    for ex in catalogue.EXERCISES:
        if ex not in points:
            continue
        items = [i.id for i in catalogue.items((ex,))]
        named = sum(points[i] for i in items if i in points)
        rest = [i for i in items if i not in points]
        if named > points[ex] or (not rest and not math.isclose(named, points[ex])):
            raise PolicyError(
                f"{source}: points {ex!r} = {points[ex]!r}, but the {ex} items named in [points] add up to {named!r}"
            )
    return points


def find(folder, inside: bool = True) -> Path | None:
    """Return the course.toml inside (when `inside`) or beside a submissions folder, or None.

    One student's own folder is never searched (inside=False): a student's folder never sets policy.
    """
    folder = Path(folder).resolve()
    for candidate in ((folder / FILENAME,) if inside else ()) + (folder.parent / FILENAME,):
        if candidate.is_file():
            return candidate
    return None


def resolve(course=None, folder=None, inside: bool = True) -> Policy:
    """Return the policy of an explicit course.toml path, else of one found beside folder, else the default."""
    if course is not None:
        return load(course)
    found = find(folder, inside) if folder is not None else None
    return load(found) if found is not None else Policy()


def grade_kwargs(policy: Policy) -> dict:
    """Return the keywords that make grading follow a policy: the policy itself and its message level."""
    return {"policy": policy, "level": policy.level}
