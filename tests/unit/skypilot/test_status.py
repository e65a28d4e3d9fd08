"""The pins, the version gate and ``status()`` (skypilot-0.12.md §8, §11; cli.md §2.2).

The gate runs through a fake runner answering ``sky --version`` and the
sibling python's package probe; the port checker is a fake, so a real local
API server on this host never changes the outcome.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from npa_infra.skypilot import pins, port, resolve, status
from npa_infra.skypilot.models import CommandResult

GOOD = {
    "python": "3.11.7",
    "skypilot": "0.12.2",
    "kubernetes": "35.0.0",
    "fastapi": "0.119.1",
    "click": "8.1.8",
}
STATUS_KEYS = {
    "status",  # ok | not_installed | failed (issue 17: every --json object has one)
    "ok",
    "bin_path",
    "source",
    "skypilot_version",
    "python",
    "kubernetes_client_version",
    "fastapi_version",
    "click_version",
    "api_server",
    "warnings",
    "remedies",
}


class FakeVenv:
    """Answers the gate's two probes for one venv."""

    def __init__(self, versions: Mapping[str, str | None], sky_stdout: str) -> None:
        self.versions = dict(versions)
        self.sky_stdout = sky_stdout
        self.sky_code = 0
        self.calls: list[tuple[str, ...]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        stdin: str | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        self.calls.append(tuple(argv))
        if list(argv[1:]) == ["--version"]:
            return CommandResult(tuple(argv), self.sky_code, self.sky_stdout, "boom\n")
        payload = {"python": self.versions["python"], **{n: self.versions.get(n) for n in argv[3:]}}
        return CommandResult(tuple(argv), 0, json.dumps(payload) + "\n", "")


def free(number: int, expected: Mapping[str, str]) -> port.PortCheck:
    return port.PortCheck(number, port.Ownership.FREE)


@pytest.fixture(autouse=True)
def _fresh_gate_cache() -> Iterator[None]:
    status.clear_gate_cache()
    yield
    status.clear_gate_cache()


@pytest.fixture
def sky(tmp_path: Path) -> Path:
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    for name in ("sky", "python"):
        (bindir / name).write_text("#!/bin/sh\n", encoding="utf-8")
        (bindir / name).chmod(0o755)
    return bindir / "sky"


@pytest.fixture
def venv() -> FakeVenv:
    return FakeVenv(GOOD, "skypilot, version 0.12.2\n")


@pytest.fixture
def env(tmp_path: Path, sky: Path) -> dict[str, str]:
    return {"NPA_HOME": str(tmp_path / "npa-home"), "NPA_SKYPILOT_BIN": str(sky), "HOME": "/h"}


# -- pins --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "specifier", "expected"),
    [
        ("35.0.0", ">=20,!=32.0.0,<36", True),
        ("34.1.0", ">=20,!=32.0.0,<36", True),
        ("32.0.0", ">=20,!=32.0.0,<36", False),
        ("32.0", ">=20,!=32.0.0,<36", False),
        ("36.0.0", ">=20,!=32.0.0,<36", False),
        ("37.0.2", ">=20,!=32.0.0,<36", False),
        ("19.15.0", ">=20,!=32.0.0,<36", False),
        ("0.119.1", "<0.120", True),
        ("0.120.0", "<0.120", False),
        ("0.165.0", "<0.120", False),
        ("8.1.8", ">=8.1,<8.2", True),
        ("8.2.0", ">=8.1,<8.2", False),
        ("8.0.4", ">=8.1,<8.2", False),
        ("0.12.2", "==0.12.2", True),
        ("0.12.3", "==0.12.2", False),
        ("36.0.0b1", "<36", False),
        ("garbage", "<36", False),
    ],
    ids=lambda v: str(v),
)
def test_satisfies_clause_table(version: str, specifier: str, expected: bool) -> None:
    assert pins.satisfies(version, specifier) is expected


def test_satisfies_unknown_operator_raises() -> None:
    with pytest.raises(ValueError, match="unsupported version clause"):
        pins.satisfies("1.0", "~=1.0")


@pytest.mark.parametrize(
    ("version", "expected"),
    [("3.8.18", False), ("3.9.0", True), ("3.12.7", True), ("3.13.0", False), ("", False)],
    ids=["3.8", "3.9", "3.12", "3.13", "empty"],
)
def test_python_supported_range_3_9_to_3_12(version: str, expected: bool) -> None:
    assert pins.python_supported(version) is expected


def test_check_versions_good_set_no_findings() -> None:
    assert pins.check_versions(GOOD) == ()


def test_check_versions_missing_package_named() -> None:
    findings = pins.check_versions({**GOOD, "fastapi": None})

    assert [f.package for f in findings] == ["fastapi"]
    assert findings[0].message.startswith("fastapi is not installed")


def test_pin_hash_depends_on_python_minor_only() -> None:
    assert pins.pin_hash("3.11.7") == pins.pin_hash("3.11.2")
    assert pins.pin_hash("3.11.7") != pins.pin_hash("3.12.0")
    assert len(pins.pin_hash("3.11.7")) == 12


# -- gate --------------------------------------------------------------------------------
def test_gate_healthy_venv_passes(sky: Path, venv: FakeVenv) -> None:
    result = status.gate(sky, {}, venv)

    assert result.ok
    assert result.skypilot_version == "0.12.2"
    assert venv.calls[0] == (str(sky), "--version")
    assert venv.calls[1][:2] == (str(sky.parent / "python"), "-c")
    assert venv.calls[1][3:] == ("skypilot", "kubernetes", "fastapi", "click")


def test_gate_cached_per_path_inode_mtime(sky: Path, venv: FakeVenv) -> None:
    status.gate(sky, {}, venv)
    status.gate(sky, {}, venv)
    assert len(venv.calls) == 2

    stat = sky.stat()
    os.utime(sky, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    status.gate(sky, {}, venv)
    assert len(venv.calls) == 4


def test_gate_fresh_probes_despite_cache(sky: Path, venv: FakeVenv) -> None:
    status.gate(sky, {}, venv)
    venv.versions["kubernetes"] = "37.0.2"

    assert status.gate(sky, {}, venv).ok
    assert not status.gate(sky, {}, venv, fresh=True).ok


@pytest.mark.parametrize(
    ("package", "version", "needle"),
    [
        ("kubernetes", "37.0.2", "every pod_config validation"),
        ("kubernetes", "36.0.0", "the jobs controller retries forever"),
        ("kubernetes", "32.0.0", "outside >=20,!=32.0.0,<36"),
        ("fastapi", "0.120.0", "the local API server cannot start"),
        ("click", "8.2.1", "click 8.2.1 is outside >=8.1,<8.2"),
        ("python", "3.13.0", "python is 3.13.0"),
    ],
    ids=["k8s-37", "k8s-36", "k8s-32", "fastapi-0.120", "click-8.2", "python-3.13"],
)
def test_gate_pin_violation_fails_with_named_cause(
    sky: Path, venv: FakeVenv, package: str, version: str, needle: str
) -> None:
    venv.versions[package] = version

    result = status.gate(sky, {}, venv)

    assert not result.ok
    assert any(needle in message for message in result.messages())


def test_gate_wrong_sky_version_fails(sky: Path, venv: FakeVenv) -> None:
    venv.sky_stdout = "skypilot, version 0.12.3\n"

    result = status.gate(sky, {}, venv)

    assert result.skypilot_version == "0.12.3"
    assert result.messages()[0].endswith("reports 0.12.3; npa-infra requires SkyPilot 0.12.2")


def test_gate_version_command_failure_quotes_stderr(sky: Path, venv: FakeVenv) -> None:
    venv.sky_code = 1

    result = status.gate(sky, {}, venv)

    assert result.skypilot_version is None
    assert "--version` failed: boom" in result.messages()[0]


def test_gate_missing_binary_fails_without_running(tmp_path: Path, venv: FakeVenv) -> None:
    result = status.gate(tmp_path / "nope" / "sky", {}, venv)

    assert not result.ok
    assert venv.calls == []


def test_gate_no_sibling_python_not_a_venv(tmp_path: Path, venv: FakeVenv) -> None:
    lone = tmp_path / "sky"
    lone.write_text("#!/bin/sh\n", encoding="utf-8")

    result = status.gate(lone, {}, venv)

    assert any("no python beside" in m for m in result.messages())


# -- status -------------------------------------------------------------------------------
def test_status_healthy_ok_true_with_cli_shape(env: dict[str, str], venv: FakeVenv) -> None:
    report = status.status(None, env, venv, port_check=free)

    payload = report.model_dump(mode="json")
    assert set(payload) == STATUS_KEYS
    assert payload == {
        "status": "ok",
        "ok": True,
        "bin_path": env["NPA_SKYPILOT_BIN"],
        "source": "env",
        "skypilot_version": "0.12.2",
        "python": "3.11.7",
        "kubernetes_client_version": "35.0.0",
        "fastapi_version": "0.119.1",
        "click_version": "8.1.8",
        "api_server": {"listening": False, "owner_matches": None},
        "warnings": [],
        "remedies": [],
    }
    assert report.exit_code == 0


def test_status_kubernetes_36_or_newer_gate_fails_with_bootstrap_remedy(
    env: dict[str, str], venv: FakeVenv
) -> None:
    venv.versions["kubernetes"] = "37.0.2"

    report = status.status(None, env, venv, port_check=free)

    assert report.ok is False and report.exit_code == 1
    assert report.kubernetes_client_version == "37.0.2"
    assert report.warnings == (
        "kubernetes 37.0.2 is outside >=20,!=32.0.0,<36: kubernetes client >= 36 fails every "
        "pod_config validation and the jobs controller retries forever",
    )
    assert report.remedies == (status.BOOTSTRAP_REMEDY,)
    assert "npa skypilot bootstrap" in status.BOOTSTRAP_REMEDY


def test_status_fastapi_0_120_warns_server_cannot_start(
    env: dict[str, str], venv: FakeVenv
) -> None:
    venv.versions["fastapi"] = "0.120.0"

    report = status.status(None, env, venv, port_check=free)

    assert report.ok is False
    assert "local API server cannot start" in report.warnings[0]


def test_status_unresolved_binary_ok_false_with_resolve_remedy(
    tmp_path: Path, venv: FakeVenv
) -> None:
    report = status.status(None, {"NPA_HOME": str(tmp_path)}, venv, port_check=free)

    assert report.ok is False and report.exit_code == 1
    assert report.bin_path is None and report.source is None
    assert report.remedies == (resolve.REMEDY,)
    assert "no SkyPilot binary is configured" in report.warnings[0]
    assert venv.calls == []


def test_status_explicit_binary_wins(env: dict[str, str], venv: FakeVenv, tmp_path: Path) -> None:
    other = tmp_path / "other" / "bin"
    other.mkdir(parents=True)
    for name in ("sky", "python"):
        (other / name).write_text("#!/bin/sh\n", encoding="utf-8")
        (other / name).chmod(0o755)

    report = status.status(str(other / "sky"), env, venv, port_check=free)

    assert report.source is resolve.BinarySource.EXPLICIT
    assert report.bin_path == str(other / "sky")


def test_status_broken_npa_config_is_unhealthy_not_a_crash(
    env: dict[str, str], venv: FakeVenv
) -> None:
    home = Path(env["NPA_HOME"])
    home.mkdir()
    (home / "config.yaml").write_text("[unclosed\n", encoding="utf-8")

    report = status.status(None, env, venv, port_check=free)

    assert report.ok is False
    assert "cannot read" in report.warnings[0]


def test_status_foreign_listener_warns_but_gate_decides_ok(
    env: dict[str, str], venv: FakeVenv
) -> None:
    def foreign(number: int, expected: Mapping[str, str]) -> port.PortCheck:
        return port.PortCheck(number, port.Ownership.FOREIGN, 77, "/home/else", "u")

    report = status.status(None, env, venv, port_check=foreign)

    assert report.ok is True
    assert report.api_server.model_dump() == {"listening": True, "owner_matches": False}
    assert report.warnings == (
        "127.0.0.1:46580 is held by pid 77 (HOME=/home/else), not by this SkyPilot state directory",
    )
    assert "sky api stop" in report.remedies[0]


def test_status_owner_expected_from_isolated_dir(
    env: dict[str, str], venv: FakeVenv, tmp_path: Path
) -> None:
    iso = tmp_path / "iso"
    iso.mkdir()
    (iso / "user-id").write_text("npa-0123456789\n", encoding="utf-8")
    seen: list[Mapping[str, str]] = []

    def ours(number: int, expected: Mapping[str, str]) -> port.PortCheck:
        seen.append(dict(expected))
        return port.PortCheck(number, port.Ownership.OURS, 5, expected["HOME"], "npa-0123456789")

    report = status.status(
        None, {**env, "NPA_SKYPILOT_ISOLATED_CONFIG_DIR": str(iso)}, venv, port_check=ours
    )

    assert seen == [{"HOME": str(iso / "home"), "SKYPILOT_USER_ID": "npa-0123456789"}]
    assert report.api_server.model_dump() == {"listening": True, "owner_matches": True}
    assert report.warnings == ()
