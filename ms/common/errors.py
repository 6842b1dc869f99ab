"""Errors a person can act on, and how the command-line tools report them.

A `UserError` is something the person running ms can fix: a setting, a data file, a damaged or
unwritable file, a missing API key, an endpoint that stayed unreachable. The CLIs print its message
alone on stderr and exit with status 2. Anything else is a bug and keeps its traceback. Setting
HYDRA_FULL_ERROR=1, or passing --debug, shows the traceback of user errors too.
"""

import os
import sys
import traceback
from typing import Callable, TypeVar

USER_ERROR_EXIT = 2
DEBUG_ENV = "HYDRA_FULL_ERROR"  # Hydra's own switch for full tracebacks; --debug sets it too

T = TypeVar("T")


class UserError(Exception):
    """Something the person running ms can fix; the message names the key, file or endpoint and
    says what to do."""


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV) == "1"


def take_debug_flag(argv: list[str]) -> list[str]:
    """Remove --debug from argv; when it was there, turn full tracebacks on (also for Hydra's errors)."""
    if "--debug" not in argv:
        return argv
    os.environ[DEBUG_ENV] = "1"
    return [a for a in argv if a != "--debug"]


def one_line(text: str, limit: int = 300) -> str:
    """Library messages (pydantic, sqlite) can run over several lines; a report keeps one."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def print_user_error(prog: str, error: BaseException) -> None:
    """`prog: error: ...` on stderr, one line per line of the message (a config error lists each
    violation on its own line); the whole traceback when debugging."""
    if debugging():
        traceback.print_exception(error)
        return
    for line in str(error).splitlines() or [type(error).__name__]:
        print(f"{prog}: error: {line}", file=sys.stderr)


def report_user_errors(prog: str, call: Callable[[], T]) -> T | int:
    """Run `call`; a user error is printed (see print_user_error) and returns USER_ERROR_EXIT.
    Other exceptions propagate with their traceback: they are bugs."""
    try:
        return call()
    except UserError as error:
        print_user_error(prog, error)
        return USER_ERROR_EXIT
