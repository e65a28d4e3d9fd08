"""The SkyPilot version gate and ``npa skypilot status`` (skypilot-0.12.md §8, §11).

The gate asks the binary for its version and the python beside it for the
installed ``skypilot``, ``kubernetes``, ``fastapi`` and ``click``, then checks
them against ``pins``. A kubernetes client ≥ 36 or fastapi ≥ 0.120 does not
fail loudly on its own: the controller retries forever, or the local API
server dies at start. So the gate names the cause and the repair
(``npa skypilot bootstrap``) before any job is launched. Results are cached
in memory per (path, inode, mtime): a rebuilt venv is a new file and is
probed again. This is the thorough check (it runs the binary); the one every
live action runs first is ``livegate``, which reads the same pins from the
venv's metadata. An exported static IAM token is a warning here as there
(``drift.token_advisory``): it does not make the report unhealthy.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, computed_field

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError
from npa_infra.skypilot import classify, drift, isolation, livegate, pins, port, resolve
from npa_infra.skypilot.runner import Runner, SubprocessRunner

__all__ = [
    "BOOTSTRAP_REMEDY",
    "ApiServerState",
    "GateResult",
    "PortChecker",
    "StatusReport",
    "clear_gate_cache",
    "gate",
    "probe_packages",
    "status",
]

BOOTSTRAP_REMEDY = "run `npa skypilot bootstrap` (it builds or repairs the pinned SkyPilot venv)"
PORT_REMEDY = drift.PORT_REMEDY
_DISTRIBUTIONS = ("skypilot", "kubernetes", "fastapi", "click")
# Runs under the venv's own interpreter: Python 3.9+, standard library only.
PROBE = (
    "import importlib.metadata as m, json, sys\n"
    "def v(n):\n"
    "    try:\n"
    "        return m.version(n)\n"
    "    except m.PackageNotFoundError:\n"
    "        return None\n"
    "print(json.dumps(dict([('python', '%d.%d.%d' % sys.version_info[:3])]"
    " + [(n, v(n)) for n in sys.argv[1:]])))\n"
)


class GateResult(NamedTuple):
    """What the gate found for one binary; ``findings`` empty means it passes."""

    bin_path: Path
    skypilot_version: str | None
    versions: Mapping[str, str | None]
    findings: tuple[pins.Finding, ...]

    @property
    def ok(self) -> bool:
        return not self.findings

    def messages(self) -> list[str]:
        return [finding.message for finding in self.findings]


_CACHE: dict[tuple[str, int, int], GateResult] = {}


def clear_gate_cache() -> None:
    """Forget every cached gate result (tests, and after bootstrap replaces a venv)."""
    _CACHE.clear()


def _sibling_python(binary: Path) -> Path | None:
    for directory in (binary.parent, binary.resolve().parent):
        for name in ("python", "python3"):
            candidate = directory / name
            if candidate.exists():
                return candidate
    return None


def probe_packages(
    python: Path, env: Mapping[str, str], runner: Runner
) -> tuple[dict[str, str | None], str]:
    """The interpreter's version and the pinned distributions' versions, plus any error text."""
    result = runner.run([str(python), "-c", PROBE, *_DISTRIBUTIONS], env=env, timeout=120)
    lines = [ln for ln in result.stdout.splitlines() if ln.strip().startswith("{")]
    if result.returncode != 0 or not lines:
        return {}, (result.stderr.strip() or result.stdout.strip())[-500:] or "no output"
    try:
        raw: Any = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        return {}, f"unreadable probe output: {exc}"
    if not isinstance(raw, dict):
        return {}, "unreadable probe output"
    return {str(k): (None if v is None else str(v)) for k, v in raw.items()}, ""


def _probe(binary: Path, env: Mapping[str, str], runner: Runner) -> GateResult:
    findings: list[pins.Finding] = []
    version_run = runner.run([str(binary), "--version"], env=env, timeout=120)
    sky_version = classify.parse_version(version_run)
    if sky_version != pins.SKYPILOT_VERSION:
        said = (
            f"reports {sky_version}"
            if sky_version
            else "failed: "
            + (classify.strip_ansi(version_run.stderr).strip()[-300:] or "no version printed")
        )
        findings.append(
            pins.Finding(
                "sky",
                sky_version,
                f"=={pins.SKYPILOT_VERSION}",
                f"`{binary} --version` {said}; npa-infra requires SkyPilot {pins.SKYPILOT_VERSION}",
            )
        )
    python = _sibling_python(binary)
    versions: dict[str, str | None] = {}
    if python is None:
        findings.append(
            pins.Finding("python", None, "3.9-3.12", f"no python beside {binary}: not a venv")
        )
    else:
        versions, error = probe_packages(python, env, runner)
        if error:
            findings.append(
                pins.Finding("python", None, "3.9-3.12", f"{python} cannot be queried: {error}")
            )
        else:
            findings.extend(pins.check_versions(versions))
    return GateResult(binary, sky_version, versions, tuple(findings))


def gate(
    binary: Path, env: Mapping[str, str], runner: Runner | None = None, *, fresh: bool = False
) -> GateResult:
    """Check ``binary`` and its sibling python against the pins; cached per path, inode, mtime.

    ``fresh`` probes again even when a result is cached (bootstrap's repair check:
    a package upgraded in place leaves the binary's inode and mtime unchanged).
    """
    try:
        st = os.stat(binary)
    except OSError:
        return GateResult(
            binary,
            None,
            {},
            (pins.Finding("sky", None, "executable", f"{binary} does not exist"),),
        )
    key = (str(binary.resolve()), st.st_ino, st.st_mtime_ns)
    cached = None if fresh else _CACHE.get(key)
    if cached is not None:
        return cached._replace(bin_path=binary)
    result = _probe(binary, env, runner or SubprocessRunner())
    _CACHE[key] = result
    return result


class ApiServerState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    listening: bool
    owner_matches: bool | None  # None: nothing listens


class StatusReport(BaseModel):
    """``npa skypilot status --json`` (skypilot-0.12.md §8.3, cli.md §2.2)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    bin_path: str | None
    source: resolve.BinarySource | None
    skypilot_version: str | None
    python: str | None
    kubernetes_client_version: str | None
    fastapi_version: str | None
    click_version: str | None
    api_server: ApiServerState
    warnings: tuple[str, ...]
    remedies: tuple[str, ...]

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed-field form
    @property
    def status(self) -> Literal["ok", "not_installed", "failed"]:
        """``ok``, ``not_installed`` (no binary resolved) or ``failed`` (the gate refused it)."""
        if self.ok:
            return "ok"
        return "not_installed" if self.bin_path is None else "failed"

    @property
    def exit_code(self) -> int:
        """0 healthy; 1 not installed or the gate failed (cli.md §2.2)."""
        return 0 if self.ok else 1


def _expected_owner(env: Mapping[str, str], config: Mapping[str, Any]) -> dict[str, str]:
    """HOME and SKYPILOT_USER_ID a listener must have to be ours; reads, never creates."""
    expected = {k: env[k] for k in ("HOME", "SKYPILOT_USER_ID") if env.get(k)}
    try:
        base = isolation.resolve_isolated_dir(None, env, config, None).root
    except ConfigError:
        return expected
    expected["HOME"] = str(base / "home")
    if "SKYPILOT_USER_ID" not in expected:
        with contextlib.suppress(OSError):
            expected["SKYPILOT_USER_ID"] = (base / "user-id").read_text("utf-8").strip()
    return expected


PortChecker = port.PortChecker


def _api_server(
    env: Mapping[str, str], config: Mapping[str, Any], api_port: int, port_check: PortChecker
) -> tuple[ApiServerState, list[str]]:
    check = port_check(api_port, _expected_owner(env, config))
    if check.ownership is port.Ownership.FREE:
        return ApiServerState(listening=False, owner_matches=None), []
    if check.safe:
        return ApiServerState(listening=True, owner_matches=True), []
    owner = f"pid {check.pid} (HOME={check.home})" if check.pid else "an unidentified process"
    return ApiServerState(listening=True, owner_matches=False), [
        f"127.0.0.1:{api_port} is held by {owner}, not by this SkyPilot state directory"
    ]


def status(
    explicit_bin: str | None,
    env: Mapping[str, str],
    runner: Runner | None = None,
    *,
    api_port: int = port.API_PORT,
    port_check: PortChecker | None = None,
) -> StatusReport:
    """Resolve the binary, run the version gate and look at the local API server port.

    Never raises for an expected problem: an unresolved binary or a failed
    gate is ``ok: false`` with warnings and remedies.
    """
    warnings: list[str] = []
    remedies: list[str] = []
    config: dict[str, Any] = {}
    try:
        config = npa_config.load_config(env)
    except ConfigError as exc:  # an unreadable npa config is unhealthy, not a crash
        warnings.append(exc.message)
        remedies.append(exc.remedy)
    config_ok = not warnings
    server, port_warnings = _api_server(env, config, api_port, port_check or port.check_port)
    try:
        binary = resolve.resolve_binary(explicit_bin, env, config)
    except ConfigError as exc:
        return StatusReport(
            ok=False,
            bin_path=None,
            source=None,
            skypilot_version=None,
            python=None,
            kubernetes_client_version=None,
            fastapi_version=None,
            click_version=None,
            api_server=server,
            warnings=(*warnings, exc.message, *port_warnings),
            remedies=(*remedies, exc.remedy, *([PORT_REMEDY] if port_warnings else [])),
        )
    result = gate(binary.path, env, runner)
    warnings += result.messages()
    if not result.ok:
        remedies.append(BOOTSTRAP_REMEDY)
    if port_warnings:
        warnings += port_warnings
        remedies.append(PORT_REMEDY)
    advisory = drift.token_advisory(livegate.token_vars(env))
    if advisory is not None:
        warnings.append(advisory.message)
        remedies.append(advisory.remedy)
    return StatusReport(
        ok=result.ok and config_ok,
        bin_path=str(binary.path),
        source=binary.source,
        skypilot_version=result.skypilot_version,
        python=result.versions.get("python"),
        kubernetes_client_version=result.versions.get("kubernetes"),
        fastapi_version=result.versions.get("fastapi"),
        click_version=result.versions.get("click"),
        api_server=server,
        warnings=tuple(warnings),
        remedies=tuple(remedies),
    )
