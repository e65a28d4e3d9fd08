"""``npa skypilot verify``'s view of SkyPilot itself (issue 17): three findings.

- ``sky_check_kubernetes``: SkyPilot's own verdict from ``sky check kubernetes``
  in the isolated state a submit would use (``checkoutput``), with its reason;
  when SkyPilot cannot run at all (no binary, drifted venv, a foreign API
  server on the port, a state directory of another stack) that is the finding,
  with the refusal's remedy, not a crash;
- ``api_server``: the API server that ran the check (the local one of the
  isolated state, or ``SKYPILOT_API_SERVER_ENDPOINT``), and whether it answered;
  present only when ``sky`` ran;
- ``client_tools``: ``socat``, ``nc`` and ``rsync`` on the operator's PATH
  (``clienttools``).

Pure: the caller runs ``sky`` and looks the tools up; these functions only
decide, one ordered chain of early returns each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from npa_infra.errors import NpaError
from npa_infra.skypilot import clienttools, port
from npa_infra.skypilot.checkoutput import CheckResult, CheckVerdict
from npa_infra.skypilot.models import ErrorKind

__all__ = [
    "NOT_RUN",
    "ApiServerUsed",
    "Finding",
    "SkyCheck",
    "SkyCheckSummary",
    "SkyOutcome",
    "api_server_used",
    "run",
    "sky_findings",
    "summary",
    "tools_finding",
]

# runs ``sky check kubernetes`` in the isolated state; raises NpaError when SkyPilot cannot run
SkyCheck = Callable[[], CheckResult]

NOT_RUN = "not_run"
ENDPOINT_VAR = "SKYPILOT_API_SERVER_ENDPOINT"
# answers that mean the API server itself was not reached or did not answer in time
_UNREACHED = frozenset(
    {
        ErrorKind.API_WARMUP,
        ErrorKind.TRANSPORT,
        ErrorKind.SERVER,
        ErrorKind.RATE_LIMIT,
        ErrorKind.TIMEOUT,
    }
)


class Finding(NamedTuple):
    """One check of the report, before it becomes ``verify.Check``."""

    name: str
    ok: bool
    detail: str
    remedy: str = ""


class SkyCheckSummary(BaseModel):
    """``sky_check`` of ``npa skypilot verify --json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    infra: str
    verdict: str  # a CheckVerdict value, or "not_run" (SkyPilot could not run)
    reason: str  # SkyPilot's reason text (ANSI stripped), or why it did not run
    contexts: dict[str, str]  # context -> SkyPilot's line for it
    returncode: int | None
    error_kind: str | None


class ApiServerUsed(BaseModel):
    """``api_server`` of ``npa skypilot verify --json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str  # the one ``sky`` printed, else the one it would use
    remote: bool  # SKYPILOT_API_SERVER_ENDPOINT set: not this state's local server
    reported: bool  # ``sky`` printed it: that server answered the check


def api_server_used(result: CheckResult | None, env: Mapping[str, str]) -> ApiServerUsed:
    """The server of the check: as ``sky`` reported it, else the one the environment selects."""
    remote = env.get(ENDPOINT_VAR, "").strip()
    expected = remote.rstrip("/") if remote else f"http://127.0.0.1:{port.API_PORT}"
    printed = result.endpoint if result is not None else None
    return ApiServerUsed(endpoint=printed or expected, remote=bool(remote), reported=bool(printed))


def summary(result: CheckResult | None, infra: str, not_run: str = "") -> SkyCheckSummary:
    """The ``sky_check`` record: the parsed answer, or ``not_run`` with the reason."""
    if result is None:
        return SkyCheckSummary(
            infra=infra,
            verdict=NOT_RUN,
            reason=not_run,
            contexts={},
            returncode=None,
            error_kind=None,
        )
    return SkyCheckSummary(
        infra=infra,
        verdict=result.verdict.value,
        reason=result.reason or result.detail,
        contexts=dict(result.contexts),
        returncode=result.command.returncode,
        error_kind=result.error_kind.value,
    )


def _unreached_remedy(server: ApiServerUsed) -> str:
    if server.remote:
        return f"check that {server.endpoint} ({ENDPOINT_VAR}) is up: `curl {server.endpoint}/api/health`"
    return (
        "rerun; if it persists, `npa skypilot status` shows the local API server "
        "(a stale one stops with `sky api stop` in its environment)"
    )


def _rerun(context: str) -> str:
    return f"npa skypilot verify --cluster {context}"


def _check_finding(result: CheckResult, context: str, server: ApiServerUsed) -> Finding:
    name = "sky_check_kubernetes"
    if result.verdict is CheckVerdict.UNKNOWN:
        if result.error_kind is ErrorKind.NOT_FOUND:
            return Finding(
                name,
                False,
                f"the sky binary could not be run: {result.detail}",
                "run `npa skypilot bootstrap`, or pass --sky-bin PATH",
            )
        if result.error_kind in _UNREACHED:
            return Finding(
                name,
                False,
                f"no verdict: SkyPilot's API server at {server.endpoint} did not answer "
                f"({result.error_kind.value})",
                _unreached_remedy(server),
            )
        return Finding(
            name,
            False,
            f"no verdict from `sky check kubernetes` ({result.error_kind.value}): {result.detail}",
            f"run `sky check kubernetes` in the isolated state for the full output, then "
            f"`{_rerun(context)}`",
        )
    if result.verdict is CheckVerdict.DISABLED:
        return Finding(
            name,
            False,
            f"SkyPilot disabled Kubernetes: {result.reason or 'no reason given'}",
            f"fix SkyPilot's reason, then `{_rerun(context)}`",
        )
    own = dict(result.contexts).get(context)
    if own is not None and not own.startswith("enabled"):
        # the isolated config allows exactly this context (skypilot-0.12.md §7.2)
        return Finding(
            name,
            False,
            f"SkyPilot enabled Kubernetes, but context '{context}' is {own}",
            f"fix SkyPilot's reason for '{context}', then `{_rerun(context)}`",
        )
    notes = f" ({result.reason})" if result.reason else ""
    return Finding(name, True, f"SkyPilot enabled Kubernetes on '{context}'{notes}")


def _server_finding(result: CheckResult, server: ApiServerUsed) -> Finding:
    where = f"{'remote' if server.remote else 'local'} API server {server.endpoint}"
    if server.reported:
        return Finding("api_server", True, f"`sky check` ran on the {where}")
    if result.error_kind in _UNREACHED:
        return Finding(
            "api_server",
            False,
            f"the {where} did not answer: {result.detail}",
            _unreached_remedy(server),
        )
    return Finding(
        "api_server",
        False,
        f"`sky check` did not say which API server ran it (expected the {where})",
        "run `sky check kubernetes` in the isolated state to see its full output",
    )


def sky_findings(
    result: CheckResult | None, context: str, env: Mapping[str, str], *, not_run: str, remedy: str
) -> tuple[list[Finding], ApiServerUsed]:
    """The ``sky_check_kubernetes`` finding, and ``api_server`` when ``sky`` ran.

    ``result`` None: SkyPilot could not run; ``not_run`` and ``remedy`` say why
    and what to do (the refusal's own message and remedy).
    """
    server = api_server_used(result, env)
    if result is None:
        detail = f"SkyPilot could not run `sky check kubernetes`: {not_run}"
        return [Finding("sky_check_kubernetes", False, detail, remedy)], server
    return [_check_finding(result, context, server), _server_finding(result, server)], server


class SkyOutcome(NamedTuple):
    findings: list[Finding]
    summary: SkyCheckSummary
    server: ApiServerUsed

    @property
    def enabled(self) -> bool:
        """SkyPilot enabled Kubernetes, on this context."""
        return bool(self.findings) and self.findings[0].ok


def run(check: SkyCheck | None, context: str, env: Mapping[str, str]) -> SkyOutcome:
    """``sky check kubernetes`` through ``check`` (None: the context is unknown, not run).

    A refusal before ``sky`` runs (no binary, drift, another stack's state
    directory) is the finding, with its remedy; it is never raised.
    """
    result, why, remedy = None, "the context is not in the kubeconfig", "see kubeconfig_context"
    if check is not None:
        try:
            result = check()
        except NpaError as exc:
            why, remedy = exc.message, exc.remedy
    found, server = sky_findings(result, context, env, not_run=why, remedy=remedy)
    return SkyOutcome(found, summary(result, "kubernetes", why), server)


def tools_finding(report: clienttools.ClientToolsReport) -> Finding:
    """``client_tools``: ok when every tool SkyPilot's Kubernetes path runs is on PATH."""
    return Finding("client_tools", report.ok, report.detail, report.remedy)
