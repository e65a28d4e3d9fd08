"""Test-side helpers: the wrapper executable, fault files, and reading the simulator's state.

The wrapper runs the simulator with the test's own interpreter (the venv's),
so ``NPA_SKYPILOT_BIN`` / ``SkyCli(binary=...)`` can point at a real file.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from . import store

__all__ = ["SUPPORT", "read_recorded", "read_state", "state_text", "write_faults", "write_wrapper"]

SUPPORT = Path(__file__).resolve().parents[1]


_SHEBANG_MAX = 120  # the kernel reads 128 bytes of a shebang on older Linux


def _shebang(interpreter: str, flags: str, trampoline: bool) -> str:
    """The interpreter line(s); pip's ``/bin/sh`` trampoline for a long path, as pip writes."""
    if not trampoline and len(interpreter) + len(flags) < _SHEBANG_MAX:
        return f"#!{interpreter} {flags}\n"
    quote = "'" * 3
    return f'#!/bin/sh\n{quote}exec\' {shlex.quote(interpreter)} {flags} "$0" "$@"\n\' {quote}\n'


def write_wrapper(
    directory: Path,
    name: str = "sky",
    *,
    interpreter: Path | None = None,
    flags: str = "-IS",
    trampoline: bool = False,
) -> Path:
    """An executable ``<directory>/<name>`` that runs the simulator with ``interpreter``.

    The default, ``sys.executable`` (the project's venv, which has no skypilot), is a
    binary the drift gate refuses: a test that runs the simulator through the real
    gate takes ``tests.support.skyvenv.simulator``, a healthy install around it.
    """
    path = directory / name
    # -IS: no site-packages and no PYTHON* variables; the simulator needs the stdlib only.
    path.write_text(
        _shebang(str(interpreter or sys.executable), flags, trampoline)
        + f"import sys; sys.path.insert(0, {str(SUPPORT)!r}); "
        "from skysim.main import main; sys.exit(main(sys.argv[1:]))\n",
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def write_faults(path: Path, rules: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(rules), encoding="utf-8")
    return path


def read_state(directory: Path) -> dict[str, Any]:
    """The state of the simulated server whose databases live in ``directory``."""
    return store.load(directory)


def state_text(directory: Path) -> str:
    path = directory / store.STATE_NAME
    return path.read_text(encoding="utf-8") if path.exists() else ""


def read_recorded(path: Path) -> tuple[int, str, str]:
    """A recorded command (``tests/fixtures/skypilot/*.txt``): exit code, stdout, stderr.

    The format is an ``exit: N`` line, then ``--- stdout ---`` and ``--- stderr ---``
    sections holding the streams byte for byte.
    """
    text = path.read_text(encoding="utf-8")
    header, _, rest = text.partition("\n")
    if not header.startswith("exit: ") or not rest.startswith("--- stdout ---\n"):
        raise ValueError(f"{path}: not a recorded command")
    stdout, _, stderr = rest.removeprefix("--- stdout ---\n").partition("--- stderr ---\n")
    return int(header.removeprefix("exit: ")), stdout, stderr
