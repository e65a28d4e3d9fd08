"""The root command group: one place that gives every command the same exit codes.

click gives a usage error (an unknown flag, a bad value, a missing argument)
exit 2, which npa reserves for "the outcome is not proven". ``RootGroup``
turns every usage error of any subcommand into 64 (``ExitCode.USAGE``,
sysexits' EX_USAGE) as it passes up through the root, so a command added
later gets the mapping for free.

It also renders what a command did not handle: an ``NpaError`` as ``fail``
renders it, and any other exception as one line naming its type and where it
was raised, never its text (an exception's text can hold a token or a URL
with credentials) and never its locals. Under ``--json`` that is one JSON
object ``{status: "error", error: {category: "internal", ...}}`` on stdout.
``--debug`` adds the traceback on stderr. A ``BrokenPipeError`` because stdout's
reader went away (``| head``) is no error at all: the command ends quietly with
141, as ``cat`` does (``output.closed_pipe_exit``); any other broken pipe is
rendered as above. An ``OSError`` that says a local path cannot be written
(permission, a read-only or full file system: ``output.environment_error``) is
rendered as the ``ConfigError`` it is, naming the path and the cause.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import MutableMapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, cast

import typer
import typer.core

from npa_infra.cli import completion, output
from npa_infra.errors import ExitCode, NpaError

if TYPE_CHECKING:  # the click Context typer's groups take (vendored by typer 0.28)
    from typer._click.core import Context

__all__ = ["RootGroup", "internal_error", "wants_json"]

_OWN_PACKAGES = frozenset({"npa_infra", "preflight"})
_ARGV_KEY = "npa.argv"
_REMEDY = "rerun with --debug and report the traceback"


class _HasExitCode(Protocol):
    exit_code: int


def _click_class(name: str) -> type[Exception]:
    """click's exception ``name`` as typer raises it (typer 0.28 vendors click, earlier
    versions use click itself; ``typer.BadParameter`` is public in both)."""
    for base in typer.BadParameter.__mro__:
        if base.__name__ == name and issubclass(base, Exception):
            return base
    return typer.BadParameter  # pragma: no cover - both lines of typer have the class


_USAGE_ERROR = _click_class("UsageError")  # unknown flag, bad value, missing argument, ...
# click's own exits and errors other than usage: click renders and exits with them
_CLICK_OWN = (_click_class("ClickException"), typer.Exit, typer.Abort)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (``--json``, ``--output-format json``)."""
    previous = ""
    for token in argv:
        if token == "--":
            return False
        if token in ("--json", "--output-format=json") or (
            previous == "--output-format" and token == "json"
        ):
            return True
        previous = token
    return False


def _origin(tb: TracebackType | None) -> str:
    """``module:line`` of the innermost frame of our code (else of the outermost frame)."""
    where = ""
    for frame, line in traceback.walk_tb(tb):
        name = str(frame.f_globals.get("__name__", "?"))
        if not where or name.partition(".")[0] in _OWN_PACKAGES:
            where = f"{name}:{line}"
    return where or "unknown"


def internal_error(exc: BaseException) -> dict[str, Any]:
    """The JSON ``error`` of an unexpected exception: its type and origin, never its text."""
    kind = type(exc).__name__
    where = _origin(exc.__traceback__)
    return {
        "category": "internal",
        "message": f"unexpected {kind} in {where}",
        "remedy": _REMEDY,
        "details": {"type": kind, "origin": where},
    }


def _render_unexpected(exc: Exception, *, as_json: bool) -> NoReturn:
    error = internal_error(exc)
    if as_json:
        output.emit_json({"status": "error", "error": error})
    if os.environ.get("NPA_DEBUG"):
        # the traceback without locals (style.md rule 9)
        traceback.print_exception(exc, file=sys.stderr)
    sys.stderr.write(f"Error: {error['message']}\nHint: {_REMEDY}\n")
    raise SystemExit(ExitCode.FAILED)


class RootGroup(typer.core.TyperGroup):
    """``npa``: usage errors exit 64; unhandled errors are rendered once, here."""

    def _main_shell_completion(
        self, ctx_args: MutableMapping[str, Any], prog_name: str, complete_var: str | None = None
    ) -> None:
        # a shell's completion request (_NPA_COMPLETE=complete_bash …) needs typer's classes
        completion.register()
        super()._main_shell_completion(ctx_args, prog_name, complete_var)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: Context | None = None,
        **extra: Any,
    ) -> Context:
        argv = list(args)
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
        except _USAGE_ERROR as exc:  # the root's own options, or no command at all
            cast(_HasExitCode, exc).exit_code = ExitCode.USAGE
            raise
        except BrokenPipeError:  # --help or --version into a closed pipe
            if not output.stdout_closed():
                raise
            output.closed_pipe_exit()
        ctx.meta[_ARGV_KEY] = argv
        return ctx

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except _USAGE_ERROR as exc:  # any subcommand's, as it passes up
            cast(_HasExitCode, exc).exit_code = ExitCode.USAGE
            raise
        except _CLICK_OWN:
            raise
        except NpaError as exc:
            output.fail(exc, as_json=wants_json(ctx.meta.get(_ARGV_KEY, ())))
        except BrokenPipeError as exc:
            if output.stdout_closed():  # the reader of stdout went away: exit as `cat` does
                output.closed_pipe_exit()
            _render_unexpected(exc, as_json=wants_json(ctx.meta.get(_ARGV_KEY, ())))
        except OSError as exc:  # an unwritable or full path is the environment, not a bug
            known = output.environment_error(exc)
            if known is None:
                _render_unexpected(exc, as_json=wants_json(ctx.meta.get(_ARGV_KEY, ())))
            output.fail(known, as_json=wants_json(ctx.meta.get(_ARGV_KEY, ())))
        except Exception as exc:  # the one top-level handler (style.md rule 8)
            _render_unexpected(exc, as_json=wants_json(ctx.meta.get(_ARGV_KEY, ())))
