"""``bootstrap()`` through a fake runner playing python, venv, pip and sky (skypilot-0.12.md §8).

The fake creates the venv layout the real ``python -m venv`` would, answers
the version probes from a per-venv table, and plays the recorded
no-controller queue answer. A fake port checker stands for /proc: the
self-test's ``jobs queue`` "starts" our server, ``api stop`` stops it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
import yaml

from npa_infra.errors import ConfigError, ExternalError
from npa_infra.skypilot import bootstrap, pins, port, status
from npa_infra.skypilot.bootstrap import BootstrapStatus
from npa_infra.skypilot.models import CommandResult

PY = "/opt/fake/bin/python3.11"
GOOD = {"skypilot": "0.12.2", "kubernetes": "35.0.0", "fastapi": "0.119.1", "click": "8.1.8"}
NOT_UP = "sky.exceptions.ClusterNotUpError: No in-progress managed jobs.\n"
BANNER = (
    "\x1b[2mFailed to connect to SkyPilot API server at http://127.0.0.1:46580. "
    "Starting a local server.\x1b[0m\n\x1b[0m\x1b[32m✓ SkyPilot API server started. "
    "\x1b[0m\x1b[0m\n"
)
REQUIREMENTS = [
    "skypilot[kubernetes]==0.12.2",
    "kubernetes>=20,!=32.0.0,<36",
    "fastapi<0.120",
    "click>=8.1,<8.2",
]
PIP = ["-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
CONSTRAINTS = (
    "# npa-infra SkyPilot pins (skypilot-0.12.md §8.2); generated, do not edit\n"
    "skypilot==0.12.2\n"
    "kubernetes>=20,!=32.0.0,<36\n"
    "fastapi<0.120\n"
    "click>=8.1,<8.2\n"
)


def _ok(argv: Sequence[str], stdout: str = "", stderr: str = "", code: int = 0) -> CommandResult:
    return CommandResult(tuple(argv), code, stdout, stderr)


class FakeSystem:
    """Runner and port checker in one: the state both would observe on a real host."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.envs: list[Mapping[str, str]] = []
        self.pythons: dict[str, str] = {PY: "3.11.7"}
        self.install = dict(GOOD)  # what the next pip install yields
        self.venvs: dict[Path, dict[str, str]] = {}
        self.failures: dict[str, CommandResult] = {}
        self.queue_answer = _ok((), BANNER, NOT_UP, 1)
        self.server_home: str | None = None
        self.server_user: str | None = None
        self.foreign = False
        self.server_survives_queue = True

    # -- Runner ------------------------------------------------------------------
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
        self.envs.append(dict(env))
        args = list(argv)
        if args[1:2] == ["-c"] and "sys.executable" in args[2]:
            version = self.pythons.get(args[0])
            if version is None:
                return _ok(argv, "", f"{args[0]}: not found", 127)
            return _ok(argv, f"{version}\n{args[0]}\n")
        if args[1:3] == ["-m", "venv"]:
            return self.failures.get("venv") or self._make_venv(Path(args[3]), argv)
        if args[1:4] == ["-m", "pip", "install"]:
            step = "pip-install" if REQUIREMENTS[0] in args else "pin-reassert"
            if step in self.failures:
                return self.failures[step]
            self.venvs[self._venv_of(args[0])].update(self.install)
            return _ok(argv, "Successfully installed ...\n")
        if args[1:] == ["--version"]:
            have = self.venvs[self._venv_of(args[0])]["skypilot"]
            return _ok(argv, f"skypilot, version {have}\n")
        if args[1:2] == ["-c"] and "importlib.metadata" in args[2]:
            found = self.venvs[self._venv_of(args[0])]
            payload = {"python": found["python"], **{n: found.get(n) for n in args[3:]}}
            return _ok(argv, json.dumps(payload) + "\n")
        if args[1:3] == ["jobs", "queue"]:
            if self.server_survives_queue:
                self.server_home, self.server_user = env["HOME"], env["SKYPILOT_USER_ID"]
            return self.queue_answer._replace(argv=tuple(argv))
        if args[1:3] == ["api", "stop"]:
            self.server_home = self.server_user = None
            return _ok(argv, "\x1b[32mSkyPilot API server stopped.\x1b[0m\n")
        raise AssertionError(f"unexpected command {args}")

    def _venv_of(self, exe: str) -> Path:
        return Path(exe).resolve().parent.parent

    def _make_venv(self, root: Path, argv: Sequence[str]) -> CommandResult:
        (root / "bin").mkdir(parents=True)
        (root / "pyvenv.cfg").write_text("home = /opt/fake/bin\n", encoding="utf-8")
        for name in ("python", "sky"):
            (root / "bin" / name).write_text("#!/bin/sh\n", encoding="utf-8")
            (root / "bin" / name).chmod(0o755)
        self.venvs[root.resolve()] = {"python": self.pythons[argv[0]]}
        return _ok(argv)

    # -- port checker ----------------------------------------------------------------
    def check_port(self, number: int, expected: Mapping[str, str]) -> port.PortCheck:
        if self.foreign:
            return port.PortCheck(number, port.Ownership.FOREIGN, 4242, "/home/other", "x")
        if number != port.API_PORT or self.server_home is None:
            return port.PortCheck(number, port.Ownership.FREE)
        ours = (self.server_home, self.server_user) == (
            expected.get("HOME"),
            expected.get("SKYPILOT_USER_ID"),
        )
        return port.PortCheck(
            number,
            port.Ownership.OURS if ours else port.Ownership.FOREIGN,
            999,
            self.server_home,
            self.server_user,
        )

    def names(self) -> list[str]:
        """Each call summarised as the program's basename plus its first arguments."""
        out = []
        for call in self.calls:
            head = Path(call[0]).name
            rest = [a for a in call[1:3] if "\n" not in a and "sys." not in a]
            out.append(" ".join([head, *rest]))
        return out


@pytest.fixture(autouse=True)
def _fresh_gate_cache() -> Iterator[None]:
    status.clear_gate_cache()
    yield
    status.clear_gate_cache()


@pytest.fixture
def fake() -> FakeSystem:
    return FakeSystem()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"NPA_HOME": str(tmp_path / "npa-home"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return tmp_path / "sky" / "skypilot-venv"


def run(
    fake: FakeSystem,
    target: Path,
    env: Mapping[str, str],
    *,
    python: str | None = PY,
    save: bool = True,
) -> bootstrap.BootstrapReport:
    return bootstrap.bootstrap(
        target,
        python,
        runner=fake,
        env=env,
        save=save,
        port_check=fake.check_port,
        lock_timeout=0,
    )


def digest() -> str:
    return pins.pin_hash("3.11.7")


# -- venv path -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("explicit", "env_value", "expected"),
    [
        ("/x/explicit", "/x/env", "/x/explicit"),
        (None, "/x/env", "/x/env"),
        (None, None, "/npa/skypilot-venv"),
    ],
    ids=["flag-wins", "env-var", "npa-home-default"],
)
def test_venv_path_precedence_flag_env_home(
    explicit: str | None, env_value: str | None, expected: str
) -> None:
    env = {"NPA_HOME": "/npa"}
    if env_value:
        env["NPA_SKYPILOT_VENV_PATH"] = env_value

    assert bootstrap.venv_path(explicit, env) == Path(expected)


# -- a fresh build -----------------------------------------------------------------------
def test_bootstrap_fresh_runs_exact_steps_in_order(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    report = run(fake, target, env)

    vdir = target.parent / "skypilot-venv.versions" / digest()
    vpy, sky = str(vdir / "bin" / "python"), str(vdir / "bin" / "sky")
    constraints = str(vdir / "npa-constraints.txt")
    assert report.status is BootstrapStatus.CREATED
    assert fake.calls[1] == (PY, "-m", "venv", str(vdir))
    assert fake.calls[2] == (vpy, *PIP, "-c", constraints, *REQUIREMENTS)
    assert fake.calls[3] == (vpy, *PIP, "-c", constraints, *REQUIREMENTS[1:])
    assert fake.calls[4] == (sky, "--version")
    assert fake.calls[5][0] == vpy and fake.calls[5][3:] == (
        "skypilot",
        "kubernetes",
        "fastapi",
        "click",
    )
    assert fake.calls[6] == (sky, "jobs", "queue", "--all", "--output", "json")
    assert fake.calls[7] == (sky, "api", "stop")
    assert len(fake.calls) == 8


def test_bootstrap_fresh_writes_constraints_marker_and_symlink(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    report = run(fake, target, env)

    vdir = target.parent / "skypilot-venv.versions" / digest()
    assert (vdir / "npa-constraints.txt").read_text(encoding="utf-8") == CONSTRAINTS
    assert target.is_symlink()
    assert os.readlink(target) == f"skypilot-venv.versions/{digest()}"
    marker = json.loads((vdir / ".npa-bootstrap-ok").read_text(encoding="utf-8"))
    assert marker["pin_hash"] == digest()
    assert marker["pins"] == REQUIREMENTS
    assert marker["versions"]["kubernetes"] == "35.0.0"
    assert (target.parent / ".skypilot-venv.bootstrap.lock").is_file()
    assert report.venv == str(target)
    assert report.sky_bin == str(target / "bin" / "sky")
    assert report.sky_version == "0.12.2"
    assert report.python == "3.11.7"
    assert report.journal == str(target.parent / ".skypilot-venv.bootstrap-journal.json")


def test_bootstrap_report_json_has_cli_shape(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    payload = run(fake, target, env).model_dump(mode="json")

    assert set(payload) == {"status", "venv", "sky_bin", "sky_version", "python", "pins", "journal"}
    assert payload["status"] == "created"
    assert payload["pins"] == {
        "skypilot": {"constraint": "skypilot[kubernetes]==0.12.2", "installed": "0.12.2"},
        "kubernetes": {"constraint": "kubernetes>=20,!=32.0.0,<36", "installed": "35.0.0"},
        "fastapi": {"constraint": "fastapi<0.120", "installed": "0.119.1"},
        "click": {"constraint": "click>=8.1,<8.2", "installed": "8.1.8"},
    }


def test_bootstrap_journal_records_every_step(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    report = run(fake, target, env)

    journal = json.loads(Path(report.journal).read_text(encoding="utf-8"))
    assert journal["schema"] == "npa.skypilot.bootstrap.v1"
    assert journal["status"] == "created"
    assert journal["pin_hash"] == digest()
    assert journal["error"] is None
    assert [s["name"] for s in journal["steps"]] == [
        "venv",
        "pip-install",
        "pin-reassert",
        "self-test-gate",
        "self-test-gate",
        "self-test-queue",
        "api-stop",
        "swap",
    ]
    assert all(s["state"] == "ok" for s in journal["steps"])
    queue = journal["steps"][5]
    assert queue["returncode"] == 1 and queue["verdict"] == "verified_empty"
    assert journal["gate"]["ok"] is True


def test_bootstrap_self_test_runs_isolated_with_own_identity(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    env = {**env, "SKYPILOT_API_SERVER_ENDPOINT": "http://remote:1", "SKYPILOT_USER_ID": "me"}

    run(fake, target, env)

    queue_env = fake.envs[6]
    assert "SKYPILOT_API_SERVER_ENDPOINT" not in queue_env
    assert queue_env["SKYPILOT_USER_ID"] != "me"
    assert queue_env["HOME"].endswith("/home") and queue_env["HOME"] != env["HOME"]
    assert not Path(queue_env["HOME"]).exists()  # the scratch directory is removed


def test_bootstrap_saves_sky_bin_in_npa_config(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    run(fake, target, env)

    saved = yaml.safe_load((Path(env["NPA_HOME"]) / "config.yaml").read_text(encoding="utf-8"))
    assert saved == {"skypilot": {"sky_bin": str(target / "bin" / "sky")}}


def test_bootstrap_no_save_leaves_npa_config_alone(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    run(fake, target, env, save=False)

    assert not (Path(env["NPA_HOME"]) / "config.yaml").exists()


# -- idempotence and repair --------------------------------------------------------------
def test_bootstrap_rerun_same_pins_unchanged(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    run(fake, target, env)
    before = os.readlink(target)
    fake.calls.clear()

    report = run(fake, target, env)

    assert report.status is BootstrapStatus.UNCHANGED
    assert os.readlink(target) == before
    assert fake.names() == ["python3.11 -c", "sky --version", "python -c"]
    journal = json.loads(Path(report.journal).read_text(encoding="utf-8"))
    assert journal["status"] == "unchanged"


def test_bootstrap_drifted_pins_repaired_into_new_version(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    run(fake, target, env)
    old = target.resolve()
    fake.venvs[old]["kubernetes"] = "37.0.2"  # someone upgraded the live venv in place

    report = run(fake, target, env)

    assert report.status is BootstrapStatus.REPAIRED
    assert os.readlink(target) == f"skypilot-venv.versions/{digest()}-2"
    assert not old.exists()  # the superseded version is removed
    assert report.pins["kubernetes"].installed == "35.0.0"
    assert sorted(p.name for p in (target.parent / "skypilot-venv.versions").iterdir()) == [
        f"{digest()}-2"
    ]


def test_bootstrap_repair_after_repair_reuses_first_name(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    run(fake, target, env)
    fake.venvs[target.resolve()]["fastapi"] = "0.120.0"
    run(fake, target, env)
    fake.venvs[target.resolve()]["click"] = "8.2.0"

    report = run(fake, target, env)

    assert report.status is BootstrapStatus.REPAIRED
    assert os.readlink(target) == f"skypilot-venv.versions/{digest()}"


def test_bootstrap_marker_for_other_pins_rebuilds(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    run(fake, target, env)
    marker = target.resolve() / ".npa-bootstrap-ok"
    marker.write_text(json.dumps({"pin_hash": "000000000000"}), encoding="utf-8")
    fake.calls.clear()

    report = run(fake, target, env)

    assert report.status is BootstrapStatus.REPAIRED
    assert fake.calls[1][1:3] == ("-m", "venv")  # rebuilt without even probing the old one
    assert os.readlink(target) == f"skypilot-venv.versions/{digest()}-2"


def test_bootstrap_legacy_plain_venv_replaced_by_symlink(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    (target / "bin").mkdir(parents=True)
    (target / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")

    report = run(fake, target, env)

    assert report.status is BootstrapStatus.REPAIRED
    assert target.is_symlink()
    assert [p.name for p in (target.parent / "skypilot-venv.versions").iterdir()] == [digest()]


@pytest.mark.parametrize("kind", ["file", "dir"], ids=["file", "non-venv-dir"])
def test_bootstrap_target_not_a_venv_refused(
    fake: FakeSystem, target: Path, env: dict[str, str], kind: str
) -> None:
    target.parent.mkdir(parents=True)
    if kind == "file":
        target.write_text("x", encoding="utf-8")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine", encoding="utf-8")

    with pytest.raises(ConfigError, match="not a SkyPilot venv built by npa") as info:
        run(fake, target, env)

    assert "--path" in info.value.remedy
    assert fake.calls == []


# -- python ---------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["3.8.18", "3.13.1"], ids=["too-old", "too-new"])
def test_bootstrap_unsupported_python_refused_before_any_build(
    fake: FakeSystem, target: Path, env: dict[str, str], version: str
) -> None:
    fake.pythons[PY] = version

    with pytest.raises(
        ConfigError, match=rf"Python {version}; SkyPilot 0.12.2 needs Python 3.9-3.12"
    ) as info:
        run(fake, target, env)

    assert "--python" in info.value.remedy
    assert len(fake.calls) == 1
    assert not target.parent.exists() or not any(target.parent.glob("*.versions"))


def test_bootstrap_python_that_cannot_run_refused(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    with pytest.raises(ConfigError, match="cannot run --python /nope/python"):
        run(fake, target, env, python="/nope/python")


def test_bootstrap_default_python_skips_unsupported_interpreters(
    fake: FakeSystem,
    target: Path,
    env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bindir = tmp_path / "pybin"
    bindir.mkdir()
    py312 = bindir / "python3.12"
    py312.write_text("#!/bin/sh\n", encoding="utf-8")
    py312.chmod(0o755)
    monkeypatch.setattr(bootstrap.sys, "executable", "/opt/fake/bin/python3.13")
    fake.pythons["/opt/fake/bin/python3.13"] = "3.13.0"
    fake.pythons[str(py312)] = "3.12.4"

    report = run(fake, target, {**env, "PATH": str(bindir)}, python=None)

    assert fake.calls[2] == (str(py312), "-m", "venv", str(target.resolve()))
    assert report.python == "3.12.4"
    assert os.readlink(target) == f"skypilot-venv.versions/{pins.pin_hash('3.12.4')}"


def test_bootstrap_no_supported_python_lists_what_was_tried(
    fake: FakeSystem, target: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bootstrap.sys, "executable", "/opt/fake/bin/python3.13")
    fake.pythons["/opt/fake/bin/python3.13"] = "3.13.0"

    with pytest.raises(ConfigError, match=r"tried: /opt/fake/bin/python3.13 \(3.13.0\)"):
        run(fake, target, {**env, "PATH": "/nonexistent"}, python=None)


# -- failures --------------------------------------------------------------------------------
def test_bootstrap_pip_network_failure_names_step_and_remedy(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    fake.failures["pip-install"] = _ok(
        (),
        "",
        "ERROR: Could not find a version that satisfies the requirement skypilot==0.12.2\n"
        "ERROR: No matching distribution found for skypilot==0.12.2\n",
        1,
    )

    with pytest.raises(ExternalError) as info:
        run(fake, target, env)

    err = info.value
    assert err.message.startswith(
        "SkyPilot bootstrap step 'pip-install' exited 1: ERROR: No matching"
    )
    assert "network access to the package index" in err.remedy
    assert err.details["step"] == "pip-install"
    assert not target.exists() and not target.is_symlink()
    assert list((target.parent / "skypilot-venv.versions").iterdir()) == []
    assert not (Path(env["NPA_HOME"]) / "config.yaml").exists()
    journal = json.loads(
        (target.parent / ".skypilot-venv.bootstrap-journal.json").read_text("utf-8")
    )
    assert journal["status"] == "failed"
    assert journal["error"]["message"] == err.message
    assert journal["steps"][-1]["name"] == "pip-install"
    assert journal["steps"][-1]["state"] == "failed"


def test_bootstrap_pip_timeout_is_clear(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    fake.failures["pip-install"] = CommandResult((), -9, "", "", timed_out=True)

    with pytest.raises(ExternalError, match="step 'pip-install' timed out"):
        run(fake, target, env)


def test_bootstrap_pip_other_failure_points_at_journal(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    fake.failures["pin-reassert"] = _ok((), "", "ERROR: resolution impossible\n", 1)

    with pytest.raises(ExternalError, match="step 'pin-reassert' exited 1") as info:
        run(fake, target, env)

    assert "bootstrap journal" in info.value.remedy


def test_bootstrap_venv_failure_remedy_names_venv_module(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    fake.failures["venv"] = _ok((), "", "Error: ensurepip is not available\n", 1)

    with pytest.raises(ExternalError, match="step 'venv' exited 1") as info:
        run(fake, target, env)

    assert "python3-venv" in info.value.remedy


def test_bootstrap_failed_repair_keeps_old_version_live(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    run(fake, target, env)
    live = os.readlink(target)
    fake.venvs[target.resolve()]["kubernetes"] = "37.0.2"
    fake.failures["pip-install"] = _ok((), "", "ERROR: Max retries exceeded\n", 1)

    with pytest.raises(ExternalError):
        run(fake, target, env)

    assert os.readlink(target) == live
    assert (target / "bin" / "sky").exists()


def test_bootstrap_self_test_gate_failure_refuses_swap(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    fake.install["fastapi"] = "0.120.0"  # the index served a version outside the pins

    with pytest.raises(
        ExternalError, match=r"fails the version gate: fastapi 0\.120\.0 is outside"
    ):
        run(fake, target, env)

    assert not target.is_symlink()
    assert ("jobs", "queue") not in {c[1:3] for c in fake.calls}


def test_bootstrap_self_test_typeerror_fails_and_stops_own_server(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    fake.queue_answer = _ok(
        (),
        BANNER,
        "TypeError: FastAPI.__init__() got an unexpected keyword argument 'prefix'\n",
        1,
    )

    with pytest.raises(ExternalError, match="self-test `sky jobs queue` crashed: TypeError"):
        run(fake, target, env)

    assert fake.calls[-1][1:] == ("api", "stop")
    assert not target.is_symlink()


def test_bootstrap_self_test_unreadable_queue_fails(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    fake.queue_answer = _ok((), "", "sky.exceptions.ApiServerConnectionError: refused\n", 1)

    with pytest.raises(ExternalError, match=r"gave no readable answer \(api_warmup\)"):
        run(fake, target, env)


def test_bootstrap_foreign_listener_refused_without_stopping_it(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    fake.foreign = True

    with pytest.raises(ConfigError, match=r"127\.0\.0\.1:46580 is held by pid 4242") as info:
        run(fake, target, env)

    assert "sky api stop" in info.value.remedy
    assert not any(c[1:3] in (("jobs", "queue"), ("api", "stop")) for c in fake.calls)


def test_bootstrap_server_gone_after_queue_not_stopped(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    fake.server_survives_queue = False

    report = run(fake, target, env)

    assert ("api", "stop") not in {c[1:3] for c in fake.calls}
    journal = json.loads(Path(report.journal).read_text(encoding="utf-8"))
    skipped = [s for s in journal["steps"] if s["name"] == "api-stop"]
    assert skipped == [
        {
            "name": "api-stop",
            "state": "skipped",
            "reason": "listener on 46580 is free",
            "started_at": skipped[0]["started_at"],
        }
    ]


def test_bootstrap_lock_held_elsewhere_fails_clearly(
    fake: FakeSystem, target: Path, env: dict[str, str]
) -> None:
    target.parent.mkdir(parents=True)
    lock = target.parent / ".skypilot-venv.bootstrap.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)

        with pytest.raises(ConfigError, match="another `npa skypilot bootstrap` holds") as info:
            run(fake, target, env)

    assert "wait for it" in info.value.remedy
    assert [c[1:3] for c in fake.calls] == [("-c", fake.calls[0][2])]
