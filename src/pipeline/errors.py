"""Errors a user can act on. The CLI prints `error: <message>` for any PipelineError and exits 1.

A bad *record* is counted and skipped by the stage that reads it; these exceptions are for a bad
recipe or a bad artifact, which stop the run.
"""

from __future__ import annotations

import reprlib


class PipelineError(Exception):
    """Base class: the message is one line that says what, where, got and expected.

    `hints`: what to do, one line each; the CLI prints them under the error in full (a long
    message is shortened, its hints never are), so every option fits on one screen."""

    def __init__(self, *args: object, hints: tuple[str, ...] | list[str] = ()):
        super().__init__(*args)
        self.hints = tuple(hints)


class RecipeError(PipelineError):
    """A recipe key is unknown, mistyped or out of range."""

    def __init__(self, path: str, message: str, suggestion: str | None = None):
        self.path, self._args, self.hints = path, (path, message, suggestion), ()
        text = f"{path}: {message}" if path else message
        if suggestion:
            text += f" (did you mean '{suggestion}'?)"
        super().__init__(text)

    def __reduce__(self):  # picklable with its own arguments: it crosses process boundaries
        return type(self), self._args


class DataError(PipelineError):
    """An input file or artifact is unreadable or inconsistent."""

    def __init__(self, where: str, message: str, hints: tuple[str, ...] | list[str] = ()):
        self.where, self._args = where, (where, message)
        super().__init__(f"{where}: {message}", hints=hints)

    def __reduce__(self):  # a worker's DataError reaches the driver intact, hints too
        return type(self), self._args, {"hints": self.hints}


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxstring, _REPR.maxother = 3, 4, 4, 60, 60


def short(value: object, limit: int = 60) -> str:
    """A bounded repr of `value`, at most `limit` characters: error messages never echo a huge
    value (a YAML alias bomb, a megabyte-long line) in full."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
