"""Building the pinned SkyPilot virtualenv (skypilot-0.12.md §8.3, runtime-reference.md §9).

A virtualenv cannot be moved: its scripts hard-code the interpreter path. So
each build goes into its own version directory ``<path>.versions/<pin-hash>``
(``-2`` while that name is live), is installed with a constraints file,
re-pinned, self-tested, marked with ``.npa-bootstrap-ok``, and only then made
live by atomically replacing the symlink ``<path>``. Everything runs under an
exclusive ``flock`` on ``.<name>.bootstrap.lock`` beside ``<path>``, and each
step is journaled in ``.<name>.bootstrap-journal.json`` before it runs.

The self-test runs ``sky jobs queue --all -o json`` in a scratch isolated
directory; that starts a local API server on the fixed port, so the ports are
checked first (§7.3) and afterwards only the server the self-test started is
stopped. A live venv whose marker matches the pins and which passes the gate
is left alone (``unchanged``); one that drifted is rebuilt (``repaired``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from npa_infra import config as npa_config
from npa_infra.errors import ConfigError, ExternalError
from npa_infra.skypilot import journal as bootstrap_journal
from npa_infra.skypilot import pins, port, selftest, status
from npa_infra.skypilot.runner import Runner, SubprocessRunner

__all__ = ["BootstrapReport", "BootstrapStatus", "PinState", "bootstrap", "venv_path"]

MARKER = ".npa-bootstrap-ok"
CONSTRAINTS = "npa-constraints.txt"
VENV_TIMEOUT = 600.0
PIP_TIMEOUT = 1800.0
PYTHON_REMEDY = "pass --python with a Python 3.9-3.12 interpreter, e.g. --python python3.12"
_PIP = ("-m", "pip", "install", "--disable-pip-version-check", "--no-input")
_DEFAULT_PYTHONS = ("python3.12", "python3.11", "python3.10", "python3.9")
_VERSION_SCRIPT = "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(sys.executable)"
_NETWORK = re.compile(
    r"Could not find a version|No matching distribution|NewConnectionError|Max retries|"
    r"Temporary failure in name resolution|Name or service not known|ConnectionError|"
    r"ReadTimeout|timed out|SSLError|ProxyError|HTTPSConnectionPool",
    re.I,
)


class BootstrapStatus(StrEnum):
    CREATED = "created"  # no venv existed
    REPAIRED = "repaired"  # the live venv missed the pins or failed the gate: rebuilt
    UNCHANGED = "unchanged"  # the live venv matches the pins and passes the gate


class PinState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    constraint: str
    installed: str | None


class BootstrapReport(BaseModel):
    """``npa skypilot bootstrap --json`` (cli.md §2.1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: BootstrapStatus
    venv: str
    sky_bin: str
    sky_version: str | None
    python: str | None
    pins: dict[str, PinState]
    journal: str

    @property
    def exit_code(self) -> int:
        return 0


def venv_path(explicit: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path:
    """``--path``, then ``NPA_SKYPILOT_VENV_PATH``, then ``$NPA_HOME/skypilot-venv``."""
    raw = explicit or env.get("NPA_SKYPILOT_VENV_PATH")
    chosen = Path(raw).expanduser() if raw else npa_config.npa_home(env) / "skypilot-venv"
    return Path(os.path.abspath(chosen))


def _sidecar(link: Path, suffix: str) -> Path:
    return link.parent / f".{link.name}.{suffix}"


# -- interpreter --------------------------------------------------------------
def _probe_python(candidate: str, env: Mapping[str, str], runner: Runner) -> tuple[str, str] | None:
    result = runner.run([candidate, "-c", _VERSION_SCRIPT], env=env, timeout=60)
    lines = result.stdout.split()
    if result.returncode != 0 or len(lines) < 2:
        return None
    return lines[0], lines[1]


def _interpreter(python: str | None, env: Mapping[str, str], runner: Runner) -> tuple[str, str]:
    """The interpreter to build with and its version; Python 3.9-3.12 only (§8.2)."""
    if python:
        found = python if os.sep in python else shutil.which(python, path=env.get("PATH"))
        probed = _probe_python(found, env, runner) if found else None
        if probed is None:
            raise ConfigError(f"cannot run --python {python}", remedy=PYTHON_REMEDY)
        if not pins.python_supported(probed[0]):
            raise ConfigError(
                f"--python {python} is Python {probed[0]}; SkyPilot 0.12.2 needs Python 3.9-3.12",
                remedy=PYTHON_REMEDY,
                details={"python": found, "version": probed[0]},
            )
        return str(found), probed[0]
    tried: list[str] = []
    for name in (sys.executable, *_DEFAULT_PYTHONS):
        found = name if os.sep in name else shutil.which(name, path=env.get("PATH"))
        if not found:
            continue
        probed = _probe_python(found, env, runner)
        tried.append(f"{found} ({probed[0] if probed else 'unusable'})")
        if probed and pins.python_supported(probed[0]):
            return found, probed[0]
    raise ConfigError(
        "no Python 3.9-3.12 interpreter found for the SkyPilot venv (tried: "
        + (", ".join(tried) or "none")
        + ")",
        remedy=PYTHON_REMEDY,
    )


# -- locking, layout -----------------------------------------------------------
@contextmanager
def _locked(lock: Path, timeout: float) -> Iterator[None]:
    """Exclusive ``flock`` on the bootstrap lock file, polled until ``timeout``."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConfigError(
                        f"another `npa skypilot bootstrap` holds {lock}",
                        remedy="wait for it to finish, then rerun `npa skypilot bootstrap`",
                        details={"lock": str(lock)},
                    ) from None
                time.sleep(0.5)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _check_target(link: Path) -> None:
    """``<path>`` must be absent, our symlink, or a plain venv we may replace."""
    if link.is_symlink() or not link.exists():
        return
    if link.is_dir() and ((link / "pyvenv.cfg").is_file() or not any(link.iterdir())):
        return
    raise ConfigError(
        f"{link} exists and is not a SkyPilot venv built by npa",
        remedy=f"move {link} away, or pass --path to a new location",
        details={"path": str(link)},
    )


def _live_version(link: Path, digest: str) -> Path | None:
    """The live version directory when its marker matches ``digest``; else None."""
    if not link.is_symlink():
        return None
    target = link.resolve()
    try:
        marker = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return target if isinstance(marker, dict) and marker.get("pin_hash") == digest else None


def _new_version_dir(versions: Path, digest: str, live: Path | None) -> Path:
    """``<digest>``, or ``<digest>-2`` while ``<digest>`` is live; leftovers are cleared."""
    versions.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in (digest, f"{digest}-2"):
        candidate = versions / name
        if live is not None and candidate.resolve() == live:
            continue
        if candidate.exists() or candidate.is_symlink():
            shutil.rmtree(candidate)  # an unfinished or superseded build; we hold the lock
        return candidate
    raise AssertionError("unreachable: two names, at most one live")  # pragma: no cover


def _swap(link: Path, version_dir: Path, versions: Path) -> None:
    """Point ``link`` at ``version_dir`` with one ``os.replace`` of a fresh symlink."""
    tmp = _sidecar(link, f"swap-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    os.symlink(os.path.relpath(version_dir, link.parent), tmp)
    legacy: Path | None = None
    try:
        if link.is_dir() and not link.is_symlink():
            # A venv from before npa managed versions: it cannot be replaced by a
            # symlink in one step. Move it aside; pruning removes it.
            legacy = versions / f".legacy-{os.getpid()}"
            link.rename(legacy)
        os.replace(tmp, link)
    except OSError:
        tmp.unlink(missing_ok=True)
        if legacy is not None and not link.exists():
            legacy.rename(link)  # put the old venv back: never leave no venv at all
        raise


def _prune(versions: Path, keep: Path) -> list[str]:
    removed: list[str] = []
    for entry in sorted(versions.iterdir()):
        if entry.resolve() == keep.resolve():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    return removed


# -- building --------------------------------------------------------------------
def _step_error(step: str, result_text: str, code: int | None, timed_out: bool) -> ExternalError:
    tail = result_text.strip().splitlines()[-1:] or ["no output"]
    if timed_out:
        remedy = "check the network and the package index, then rerun `npa skypilot bootstrap`"
        what = "timed out"
    elif step == "venv":
        remedy = "install the venv module for that Python (Debian: apt-get install python3-venv) or pass --python"
        what = f"exited {code}"
    elif _NETWORK.search(result_text):
        remedy = (
            "check network access to the package index (PIP_INDEX_URL, proxy settings), "
            "then rerun `npa skypilot bootstrap`"
        )
        what = f"exited {code}"
    else:
        remedy = "read the pip output in the bootstrap journal, fix it, then rerun `npa skypilot bootstrap`"
        what = f"exited {code}"
    return ExternalError(
        f"SkyPilot bootstrap step '{step}' {what}: {tail[0][:300]}",
        remedy=remedy,
        details={"step": step, "returncode": code, "stderr": result_text[-2000:]},
    )


def _build(
    version_dir: Path,
    interpreter: str,
    env: Mapping[str, str],
    runner: Runner,
    journal: bootstrap_journal.Journal,
) -> None:
    venv_python = str(version_dir / "bin" / "python")
    constraints = version_dir / CONSTRAINTS
    steps: list[tuple[str, list[str], float]] = [
        ("venv", [interpreter, "-m", "venv", str(version_dir)], VENV_TIMEOUT),
        (
            "pip-install",
            [venv_python, *_PIP, "-c", str(constraints), *pins.requirements()],
            PIP_TIMEOUT,
        ),
        (
            "pin-reassert",
            [venv_python, *_PIP, "-c", str(constraints), *(p.requirement for p in pins.PINS[1:])],
            PIP_TIMEOUT,
        ),
    ]
    for name, argv, timeout in steps:
        journal.begin(name, argv)
        result = runner.run(argv, env=env, timeout=timeout)
        journal.end(name, result)
        if result.returncode != 0 or result.timed_out:
            raise _step_error(
                name, result.stderr or result.stdout, result.returncode, result.timed_out
            )
        if name == "venv":
            constraints.write_text(pins.constraints_text(), encoding="utf-8")


def _write_marker(version_dir: Path, digest: str, gate: status.GateResult, now: str) -> None:
    body = {
        "schema": bootstrap_journal.SCHEMA,
        "pin_hash": digest,
        "pins": pins.requirements(),
        "versions": dict(gate.versions),
        "sky_version": gate.skypilot_version,
        "created_at": now,
    }
    (version_dir / MARKER).write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


def _report(
    state: BootstrapStatus, link: Path, gate: status.GateResult, journal: Path
) -> BootstrapReport:
    return BootstrapReport(
        status=state,
        venv=str(link),
        sky_bin=str(link / "bin" / "sky"),
        sky_version=gate.skypilot_version,
        python=gate.versions.get("python"),
        pins={
            pin.name: PinState(constraint=pin.requirement, installed=gate.versions.get(pin.name))
            for pin in pins.PINS
        },
        journal=str(journal),
    )


def _save(env: Mapping[str, str], sky_bin: Path) -> None:
    cfg = npa_config.load_config(env)
    if npa_config.get_value(cfg, "skypilot.sky_bin") != str(sky_bin):
        # read again under the file's lock: a concurrent writer's keys are kept (issue 24)
        npa_config.update_config(
            env, lambda now: npa_config.set_value(now, "skypilot.sky_bin", str(sky_bin))
        )


class _Plan(NamedTuple):
    """Everything one bootstrap run works with, decided before the lock is taken."""

    link: Path
    digest: str
    interpreter: str
    env: Mapping[str, str]
    runner: Runner
    say: Callable[[str], None]
    port_check: selftest.PortChecker
    api_port: int


def _live_gate(plan: _Plan, journal: bootstrap_journal.Journal) -> status.GateResult | None:
    """The gate of the live venv when it was built for these pins; None otherwise."""
    live = _live_version(plan.link, plan.digest)
    if live is None:
        return None
    plan.say(f"checking the live SkyPilot venv {live}")
    current = status.gate(plan.link / "bin" / "sky", plan.env, plan.runner, fresh=True)
    journal.record_gate(current)
    if not current.ok:
        plan.say("the live venv fails the gate: " + "; ".join(current.messages()))
    return current


def _replace(plan: _Plan, journal: bootstrap_journal.Journal) -> status.GateResult:
    """Build, self-test and mark a new version, swap it live, prune the old ones."""
    link = plan.link
    versions = link.parent / f"{link.name}.versions"
    version_dir = _new_version_dir(versions, plan.digest, _resolved(link))
    journal.set_version_dir(version_dir)
    try:
        plan.say(f"installing SkyPilot {pins.SKYPILOT_VERSION} into {version_dir}")
        _build(version_dir, plan.interpreter, plan.env, plan.runner, journal)
        plan.say("self-testing the new venv (sky --version, pins, jobs queue)")
        gate = selftest.run(
            version_dir / "bin" / "sky",
            plan.env,
            plan.runner,
            journal,
            port_check=plan.port_check,
            api_port=plan.api_port,
        )
        _write_marker(version_dir, plan.digest, gate, journal.now())
        journal.begin("swap", [str(link), str(version_dir)])
        _swap(link, version_dir, versions)
    except BaseException as exc:
        if _resolved(link) != version_dir.resolve():
            shutil.rmtree(version_dir, ignore_errors=True)
        journal.fail(exc)
        raise
    status.clear_gate_cache()
    journal.end_effect("swap", removed=_prune(versions, version_dir))
    return gate


def bootstrap(
    path: str | os.PathLike[str] | None,
    python: str | None,
    *,
    runner: Runner | None = None,
    env: Mapping[str, str] | None = None,
    save: bool = True,
    progress: Callable[[str], None] | None = None,
    port_check: selftest.PortChecker | None = None,
    api_port: int = port.API_PORT,
    lock_timeout: float = 900.0,
    clock: Callable[[], float] = time.time,
) -> BootstrapReport:
    """Build (or verify) the pinned SkyPilot venv at ``path`` and make it live.

    Raises:
        ConfigError: unsupported Python, an unusable target path, the lock held
            by another bootstrap, or a foreign API server on the fixed ports.
        ExternalError: a venv/pip step or the self-test failed; the message
            names the step and the remedy.
    """
    env = dict(os.environ if env is None else env)
    runner = runner or SubprocessRunner()
    link = venv_path(path, env)
    _check_target(link)
    link.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    interpreter, py_version = _interpreter(python, env, runner)
    plan = _Plan(
        link,
        pins.pin_hash(py_version),
        interpreter,
        env,
        runner,
        progress or (lambda _msg: None),
        port_check or port.check_port,
        api_port,
    )
    journal_path = _sidecar(link, "bootstrap-journal.json")
    with _locked(_sidecar(link, "bootstrap.lock"), lock_timeout):
        journal = bootstrap_journal.Journal(
            journal_path, clock, venv=link, pin_hash=plan.digest, python=interpreter
        )
        gate = _live_gate(plan, journal)
        if gate is not None and gate.ok:
            state = BootstrapStatus.UNCHANGED
        else:
            state = BootstrapStatus.REPAIRED if link.exists() else BootstrapStatus.CREATED
            gate = _replace(plan, journal)
            plan.say(f"SkyPilot {gate.skypilot_version} is live at {link}")
        journal.finish(state.value)
        if save:
            _save(env, link / "bin" / "sky")
        return _report(state, link, gate, journal_path)


def _resolved(link: Path) -> Path | None:
    return link.resolve() if link.is_symlink() else None
