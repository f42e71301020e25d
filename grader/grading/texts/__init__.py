"""The trap texts students read, as data: one file per message level, beside this module, read once per process.

diagnose.toml holds each trap's message and concept at diagnose level, hint.toml its message at hint level and
full.toml its explanation; each also holds, under [detail.<trap id>], the texts a recogniser fills into that trap's
message, at its level. A key names a text the same way in every file (`tanh-preact.message`,
`detail.shape-mismatch.keepdim-missing`), and a text a level's file leaves out is the next lower level's, as
traps.pick does with a {level: text} dict. A level whose file is absent is left out whole: `grade release` ships only
the files up to its course's level, so a bundle holds no text above it and says the lower level's instead.

A sandbox child forgets every text (forget.on_fork_forget) and never reads the files again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader.sandbox import forget
from grader.spec.policy import levels_down

FOLDER = Path(__file__).resolve().parent


def level_file(folder: Path, level: str) -> Path:
    """Return the data file of a message level."""
    return Path(folder) / f"{level}.toml"


class Catalogue:
    """The texts of one folder of level files, each file read on first use; forget() empties it for good.

    A level's file is read only when a text at that level (or above it) is asked for: a run at the default level
    reads diagnose.toml alone, and a run with nothing to say reads none.
    """

    def __init__(self, folder: Path | None):
        self._folder = folder
        self._tables: dict[str, dict[str, str]] = {}

    def _level(self, level: str) -> dict[str, str]:
        if level not in self._tables:
            folder = self._folder
            self._tables[level] = {} if folder is None else _read(level_file(folder, level))
        return self._tables[level]

    def text(self, key: str, level: str) -> str:
        """Return the text of a key at a level, else the next lower level's; '' if no level up to it has one."""
        for lv in levels_down(level):
            table = self._level(lv)
            if key in table:
                return table[key]
        return ""

    def keys(self, level: str) -> set[str]:
        """Return the keys a level's own file holds."""
        return set(self._level(level))

    def forget(self) -> None:
        """Drop every text and the folder, so that nothing is read again: every text is '' from now on."""
        self._folder = None
        self._tables = {}


def _read(path: Path) -> dict[str, str]:
    """Return a level file's texts by dotted key ({} if the file is absent: that level is not shipped)."""
    if sys.version_info >= (3, 11):  # imported here, when a text is first needed: a run with nothing to say needs none
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    return dict(_flat(data, path))


def _flat(table: dict, path: Path, prefix: str = ""):
    for name, value in table.items():
        if isinstance(value, dict):
            yield from _flat(value, path, f"{prefix}{name}.")
        elif isinstance(value, str):
            yield f"{prefix}{name}", value
        else:
            raise ValueError(f"{path}: {prefix}{name} must be a text, not {type(value).__name__}")


TEXTS = Catalogue(FOLDER)


def text(key: str, level: str) -> str:
    """Return the text of a key at a level (see Catalogue.text)."""
    return TEXTS.text(key, level)


@forget.on_fork_forget
def forget_texts() -> None:
    """A sandbox child renders no message: it loses every text, so none (hint or full) can be copied out of it."""
    TEXTS.forget()


@dataclass(frozen=True)
class Text:
    """A text by its key and the values its template is filled with, said at a level when a message is rendered."""

    key: str
    values: dict = field(default_factory=dict)

    def at(self, level: str) -> str:
        return text(self.key, level).format(**self.values)


def detail(trap_id: str, name: str, /, **values) -> Text:
    """Return a text a recogniser fills into a trap's message: `detail.<trap id>.<name>` with its values."""
    return Text(f"detail.{trap_id}.{name}", values)
