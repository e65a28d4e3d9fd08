"""``npa configure``: create or update a project; ``--show`` lists names and places only.

Values are read here, never from the command line itself (argv is visible in
``ps``): ``--credential NAME`` reads the environment variable ``NAME`` (or, when
it is unset, prompts with hidden input), ``--credential NAME=@FILE`` reads a
file and ``--credential NAME=@-`` stdin. Prompts appear only when something is
missing and ``--no-input`` was not given (and no value comes from stdin); with
no flag besides ``-p`` the prompts walk through every field, Enter keeping the
current value. The SDK
(``workflow.operations.configure``) stores them and reports names only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from npa_infra.cli import output, selection, services

if TYPE_CHECKING:
    from npa_infra.workflow.operations.configure import (
        ConfigureReport,
        CredentialInput,
        CredentialRow,
        ShowReport,
    )

__all__ = ["configure_cmd"]

_MAX_VALUE = 32 * 1024
_CredentialOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--credential",
        metavar="NAME[=@FILE|=@-]",
        help="Store credential NAME: from the environment variable NAME, a file, or stdin "
        "(@-). Never a value on the command line (repeatable).",
    ),
]


class _Input:
    """Prompts allowed or not; raises a usage error instead of prompting when not."""

    def __init__(self, allowed: bool) -> None:
        self.allowed = allowed

    def ask(self, text: str, *, default: str | None = None, hide: bool = False) -> str:
        from npa_infra.errors import UsageError

        if not self.allowed:
            raise UsageError(f"{text}: no value, and prompting is off", remedy=self.remedy(text))
        try:
            answer: str = typer.prompt(
                text,
                default=default,
                hide_input=hide,
                show_default=bool(default) and not hide,
                err=True,
            )
        except typer.Abort:
            raise UsageError(
                f"{text}: no answer (end of input)", remedy=self.remedy(text)
            ) from None
        return answer.strip()

    @staticmethod
    def remedy(text: str) -> str:
        return f"pass it as a flag (see npa configure --help), or run on a terminal ({text})"


def _read_value(spec: str, ask: _Input) -> CredentialInput:
    from pydantic import SecretStr

    from npa_infra.errors import UsageError
    from npa_infra.workflow.operations.configure import CredentialInput

    name, sep, source = spec.partition("=")
    if not sep:
        value = os.environ.get(name, "")
        if value:
            return CredentialInput(name, SecretStr(value), "environment")
        return CredentialInput(name, SecretStr(ask.ask(f"{name}", hide=True)), "prompt")
    if source in ("@-", "-"):
        return CredentialInput(name, SecretStr(_strip(sys.stdin.read(_MAX_VALUE + 1))), "stdin")
    if source.startswith("@") and len(source) > 1:
        return CredentialInput(name, SecretStr(_read_file(name, source[1:])), "file")
    raise UsageError(
        f"--credential {name}=… holds a value on the command line, where every local user "
        "reads it (ps); it was not stored",
        remedy=f"export {name} and pass --credential {name}, or --credential {name}=@FILE, "
        f"or --credential {name}=@- with the value on stdin",
    )


def _read_file(name: str, given: str) -> str:
    """A credential file's text: a regular file only (a FIFO or a device never blocks,
    ``regularfile``), bounded; the error names the file and why, never its content."""
    from npa_infra import regularfile
    from npa_infra.errors import UsageError

    remedy = "pass a readable regular file: --credential NAME=@FILE"
    try:
        raw = regularfile.read(Path(given).expanduser(), _MAX_VALUE + 1)
        return _strip(raw.decode("utf-8"))
    except regularfile.RefusedFile as exc:
        why = exc.message
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
    except UnicodeDecodeError:
        why = "it is not UTF-8 text"
    raise UsageError(f"cannot read credential {name} from {given}: {why}", remedy=remedy)


def _strip(text: str) -> str:
    return text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")


def _wizard(ask: _Input, alias: str, values: dict[str, str | None]) -> list[CredentialInput]:
    """Every field in turn (Enter keeps the current or default value), then credentials."""
    from npa_infra.projects import store

    entry = store.load(alias, os.environ).project
    stack = ask.ask("Stack (empty: bind a context)", default=(entry.stack if entry else "") or "")
    if stack:
        values["stack"] = stack
    else:
        values["context"] = ask.ask("Kubernetes context", default=entry.context if entry else None)
        values["namespace"] = ask.ask("Namespace (empty: the context's)", default="")
        current_dir = (entry.state_dir if entry else None) or ""
        chosen_dir = ask.ask(
            "SkyPilot state directory (absolute; empty: npa's)", default=current_dir
        )
        values["state_dir"] = chosen_dir or None  # Enter keeps the entry's (or npa's default)
    current = entry.release_namespace if entry else None
    values["release_namespace"] = ask.ask(
        "Release registry namespace", default=current or "ghcr.io/nebius/nebius-physical-ai"
    )
    found: list[CredentialInput] = []
    while name := ask.ask("Credential NAME to store (empty: done)", default=""):
        found.append(_read_value(name, ask))
    return found


def _render(report: ConfigureReport) -> None:
    target = f"stack {report.stack}" if report.stack else f"context {report.context}"
    output.out(f"project {report.alias} {report.status.value}: {target}")
    output.out(f"release namespace: {report.release_namespace}")
    _render_credentials(report.credentials)


def _render_credentials(rows: Sequence[CredentialRow]) -> None:
    for row in rows:
        read = f" (read from {row.input})" if row.input else ""
        output.out(f"credential {row.name}: {row.store.value} {row.location}{read}")
    if not rows:
        output.out("credentials: none")


def _render_show(report: ShowReport) -> None:
    for view in report.projects:
        target = f"stack {view.stack}" if view.stack else f"context {view.context}"
        output.out(f"project {view.alias}: {target}; release namespace {view.release_namespace}")
        _render_credentials(view.credentials)
    if not report.projects:
        output.out("no projects: npa configure -p ALIAS creates one")


def configure_cmd(
    ctx: typer.Context,
    project: selection.ProjectOpt = None,
    stack: selection.StackOpt = None,
    context: Annotated[
        str | None, typer.Option("--context", help="Kubernetes context (no stack).")
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="Namespace (no stack).")
    ] = None,
    state_dir: Annotated[
        str | None, typer.Option("--state-dir", help="SkyPilot state directory (no stack).")
    ] = None,
    release_namespace: Annotated[
        str | None,
        typer.Option("--release-namespace", help="Registry unqualified images resolve from."),
    ] = None,
    credential: _CredentialOpt = None,
    store_kind: Annotated[
        str | None, typer.Option("--store", help="file | stack (default: stack when stack-backed).")
    ] = None,
    show: Annotated[
        bool, typer.Option("--show", help="List projects: names and places only.")
    ] = False,
    no_input: Annotated[
        bool, typer.Option("--no-input", help="Fail instead of prompting.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """Create or update a project: its stack (or context, namespace and SkyPilot state
    directory), its credentials (stored 0600, or as the stack's Pulumi secrets), and the
    release registry namespace. Values are never printed; --show lists names and places.

    Exit codes: 0 done; 1 refused (bad input, unknown stack); 3 no pulumi for the stack store.
    """
    from npa_infra.errors import NpaError, UsageError
    from npa_infra.workflow.operations import configure as sdk

    if store_kind not in (None, *sdk.Store):
        output.fail(
            UsageError(f"--store {store_kind!r}", remedy="use file or stack"), as_json=as_json
        )
    try:
        if show:
            output.finish(sdk.show(project, os.environ, Path.cwd()), _render_show, as_json=as_json)
        piped = any(c.partition("=")[2] in ("@-", "-") for c in credential or [])
        ask = _Input(allowed=not no_input and not piped)
        alias = project or ask.ask("Project alias")
        values: dict[str, str | None] = {
            "stack": stack,
            "context": context,
            "namespace": namespace,
            "state_dir": state_dir,
            "release_namespace": release_namespace,
        }
        given = [_read_value(c, ask) for c in credential or []]
        if ask.allowed and not any(values.values()) and not given:
            given = _wizard(ask, alias, values)
        request = sdk.ConfigureRequest(
            alias=alias,
            stack=values["stack"],
            context=values["context"],
            namespace=values["namespace"],
            state_dir=values["state_dir"],
            release_namespace=values["release_namespace"],
            credentials=given,
            store=sdk.Store(store_kind) if store_kind else None,
        )
        report = sdk.configure(request, os.environ, services.build(ctx.obj))
    except NpaError as exc:
        output.fail(exc, as_json=as_json)
    output.finish(report, _render, as_json=as_json)
