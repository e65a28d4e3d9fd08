"""Which Python a ``sky`` script runs, and where that Python imports from, read without running it.

The drift gate must read the SkyPilot that ``sky`` really imports, whatever
the install layout: a venv, a conda environment, a system Python (Debian's
``dist-packages``) or a ``pip install --user``. A console script names its
interpreter in its first line, in one of three forms pip, conda and uv write:

- ``#!/abs/path/python3.11 [-flags]`` (the kernel runs that file);
- ``#!/bin/sh`` then ``'''exec' "/abs/path/python" "$0" "$@"`` (pip's and uv's
  trampoline for a path too long or with spaces);
- ``#!/usr/bin/env python3 [-flags]`` (conda's replacement for a long prefix):
  the name is looked up on the ``PATH`` the ``sky`` calls run with.

Anything else (a shell wrapper, a compiled binary, a relative interpreter)
names no Python we can read: the caller refuses. From the interpreter, its
import path follows CPython's own rules, in ``sys.path`` order:

1. ``PYTHONPATH`` (ignored under ``-E``/``-I``);
2. the user site ``$PYTHONUSERBASE`` or ``$HOME/.local`` +
   ``lib/pythonX.Y/site-packages`` (off under ``-s``/``-I``,
   ``PYTHONNOUSERSITE``, and in a venv without system site packages), with
   the HOME of the ``sky`` calls (the isolated state directory's);
3. a venv (``pyvenv.cfg`` beside the interpreter as invoked, or one level
   up): its ``lib/pythonX.Y/site-packages``, then, when
   ``include-system-site-packages = true``, its base Python's;
4. otherwise the prefix found from the resolved interpreter by the standard
   library landmark ``lib/pythonX.Y/os.py`` (a conda environment, pyenv, a
   system Python): ``lib/pythonX.Y/site-packages`` (``lib64`` first), or on
   Debian (``lib/python3/dist-packages`` exists) ``local/lib/pythonX.Y/
   dist-packages``, ``lib/python3/dist-packages``, ``lib/pythonX.Y/dist-packages``.

``-S`` skips 2 to 4, as the interpreter does. ``.pth`` files are not
followed. Every path whose presence or absence the answer rests on is listed
in ``probed`` so the caller's cache can notice a change (a user site created
later included).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HEAD_BYTES", "Layout", "LayoutUnknown", "Shebang", "discover", "parse_shebang"]

HEAD_BYTES = 4096  # a shebang and pip's trampoline fit in the first lines
_PYTHON_NAME = re.compile(r"^python(?P<version>\d+(?:\.\d+)?)?$")
_XY = re.compile(r"^python(?P<xy>\d+\.\d+)$")
_TRUE = ("true", "yes", "1")


class LayoutUnknown(Exception):
    """The binary names no Python whose import path can be read; ``str`` says why."""


@dataclass(frozen=True, slots=True)
class Shebang:
    """The interpreter a script names: an absolute path, or a name looked up on PATH."""

    interpreter: str
    flags: frozenset[str] = frozenset()  # the single-letter options given to it (I, s, S, E)
    on_path: bool = False  # ``#!/usr/bin/env NAME``


@dataclass(frozen=True, slots=True)
class Layout:
    """Where one interpreter imports from, in ``sys.path`` order."""

    interpreter: Path
    kind: str  # "venv", "conda environment", "system install" or "prefix install"
    root: Path  # the venv or the prefix
    python: str | None  # pyvenv.cfg's version, else the ``X.Y`` of ``lib/pythonX.Y``
    sites: tuple[Path, ...]  # candidate directories, present or not
    probed: tuple[Path, ...]  # the files and directories the answer was read from

    def describe(self) -> str:
        return f"{self.interpreter} ({self.kind} {self.root})"


# -- the shebang ---------------------------------------------------------------------------
def _flags(args: list[str]) -> frozenset[str]:
    letters: set[str] = set()
    for arg in args:
        if arg.startswith("-") and not arg.startswith("--"):
            letters.update(arg[1:])
    return frozenset(letters)


def _from_env(args: list[str]) -> Shebang | None:
    """``env [-S] [NAME=VALUE]... python3 [-flags]``."""
    rest = [a for a in args if not a.startswith("-") or a.startswith("--")]
    rest = [a for a in rest if "=" not in a]
    if not rest or not _PYTHON_NAME.match(rest[0]):
        return None
    return Shebang(rest[0], _flags(args[args.index(rest[0]) + 1 :]), on_path=True)


def _python(interpreter: str, args: list[str]) -> Shebang | None:
    if os.path.basename(interpreter) == "env":
        return _from_env(args)
    if not os.path.isabs(interpreter) or not _PYTHON_NAME.match(os.path.basename(interpreter)):
        return None
    return Shebang(interpreter, _flags(args))


def _trampoline(lines: list[str]) -> Shebang | None:
    """pip's and uv's ``'''exec' "/path/python" "$0" "$@"`` second line."""
    if len(lines) < 2 or not lines[1].startswith("'''exec'"):
        return None
    try:
        words = shlex.split(lines[1])
    except ValueError:
        return None
    if len(words) < 2 or words[0] != "exec":
        return None
    args = [w for w in words[2:] if w not in ("$0", '"$0"', "$@", '"$@"')]
    return _python(words[1], args)


def parse_shebang(head: str) -> Shebang | None:
    """The Python a script's first lines name, or None when they name none (module docstring)."""
    if not head.startswith("#!"):
        return None
    lines = head.splitlines()
    # the kernel's split: the interpreter, then the rest as one argument
    interpreter, _, rest = lines[0][2:].strip().partition(" ")
    args = rest.split()
    if interpreter in ("/bin/sh", "/usr/bin/sh"):
        return _trampoline(lines)
    return _python(interpreter, args)


# -- the interpreter's import path ---------------------------------------------------------
def _on_path(name: str, env: Mapping[str, str]) -> tuple[Path, list[Path]]:
    """The first executable ``name`` on the run's PATH, and every directory looked in."""
    looked: list[Path] = []
    for entry in env.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue  # a relative PATH entry depends on the cwd of each call: never trusted
        directory = Path(entry)
        looked.append(directory)
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate, looked
    raise LayoutUnknown(f"the script runs `env {name}`, and no {name} is on the PATH it runs with")


def _cfg(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    return values


def _xy(version: str | None) -> str | None:
    match = re.match(r"^(\d+\.\d+)", version or "")
    return match.group(1) if match else None


def _name_xy(interpreter: Path) -> str | None:
    for candidate in (interpreter.resolve(), interpreter):
        match = _XY.match(candidate.name)
        if match:
            return match.group("xy")
    return None


def _prefix(start: Path, xy: str | None) -> tuple[Path, str, Path]:
    """The prefix above ``start`` holding the standard library, its ``X.Y``, the landmark."""
    for directory in (start, *start.parents):
        if xy is not None:
            landmark = directory / "lib" / f"python{xy}" / "os.py"
            if landmark.is_file():
                return directory, xy, landmark
            continue
        found = sorted((directory / "lib").glob("python3.*/os.py"))
        if len(found) == 1:
            return directory, found[0].parent.name.removeprefix("python"), found[0]
        if len(found) > 1:
            raise LayoutUnknown(
                f"{directory}/lib holds {len(found)} Python versions and the interpreter's "
                "name does not say which it is"
            )
    raise LayoutUnknown(f"no standard library (lib/pythonX.Y/os.py) above {start}")


def _prefix_sites(prefix: Path, xy: str) -> tuple[str, list[Path]]:
    lib = f"python{xy}"
    if (prefix / "lib" / "python3" / "dist-packages").is_dir():
        return "system install", [
            prefix / "local" / "lib" / lib / "dist-packages",
            prefix / "lib" / "python3" / "dist-packages",
            prefix / "lib" / lib / "dist-packages",
        ]
    kind = "conda environment" if (prefix / "conda-meta").is_dir() else "prefix install"
    return kind, [prefix / "lib64" / lib / "site-packages", prefix / "lib" / lib / "site-packages"]


def _user_site(flags: frozenset[str], env: Mapping[str, str], xy: str | None) -> list[Path]:
    ignore_env = bool(flags & {"E", "I"})
    if flags & {"s", "I"} or (env.get("PYTHONNOUSERSITE") and not ignore_env):
        return []
    base = env.get("PYTHONUSERBASE") if not ignore_env else None
    if not base:
        home = env.get("HOME")
        if not home:
            return []
        base = os.path.join(home, ".local")
    lib = Path(base) / "lib"
    if xy is not None:
        return [lib / f"python{xy}" / "site-packages"]
    return sorted(lib.glob("python*/site-packages"))


def _pythonpath(flags: frozenset[str], env: Mapping[str, str]) -> list[Path]:
    if flags & {"E", "I"}:
        return []
    return [Path(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]


def _venv_cfg(interpreter: Path) -> Path | None:
    for directory in (interpreter.parent, interpreter.parent.parent):
        if (directory / "pyvenv.cfg").is_file():
            return directory / "pyvenv.cfg"
    return None


def _venv(
    interpreter: Path, cfg_path: Path, flags: frozenset[str], env: Mapping[str, str]
) -> Layout:
    cfg, root = _cfg(cfg_path), cfg_path.parent
    version = cfg.get("version") or cfg.get("version_info")
    xy = _xy(version) or _name_xy(interpreter)
    own = (
        [root / "lib" / f"python{xy}" / "site-packages"]
        if xy
        else sorted((root / "lib").glob("python*/site-packages"))
    )
    probed, sites = [cfg_path], list(own)
    if cfg.get("include-system-site-packages", "").lower() in _TRUE and cfg.get("home"):
        base, base_xy, landmark = _prefix(Path(cfg["home"]).resolve(), xy)
        sites = [*_user_site(flags, env, base_xy), *own, *_prefix_sites(base, base_xy)[1]]
        probed.append(landmark)
    python = version or xy
    return Layout(interpreter, "venv", root, python, tuple(sites), tuple(probed))


def _installed(interpreter: Path, flags: frozenset[str], env: Mapping[str, str]) -> Layout:
    """A Python that is no venv: conda, pyenv, a system Python (module docstring, 4)."""
    root, xy, landmark = _prefix(interpreter.resolve().parent, _name_xy(interpreter))
    kind, own = _prefix_sites(root, xy)
    sites = (*_user_site(flags, env, xy), *own)
    return Layout(interpreter, kind, root, xy, sites, (landmark,))


def discover(shebang: Shebang, env: Mapping[str, str]) -> Layout:
    """The import path of the interpreter ``shebang`` names, for a run with ``env``.

    Raises:
        LayoutUnknown: the interpreter or its standard library cannot be found.
        OSError: a file that was found could not be read.
    """
    looked: list[Path] = []
    interpreter = Path(shebang.interpreter)
    if shebang.on_path:
        interpreter, looked = _on_path(shebang.interpreter, env)
    if not interpreter.is_file():
        raise LayoutUnknown(f"its interpreter {interpreter} does not exist")
    flags = shebang.flags
    cfg = _venv_cfg(interpreter)
    layout = _venv(interpreter, cfg, flags, env) if cfg else _installed(interpreter, flags, env)
    sites = layout.sites if "S" not in flags else ()
    return Layout(
        interpreter,
        layout.kind,
        layout.root,
        layout.python,
        (*_pythonpath(flags, env), *sites),
        (*looked, interpreter, *layout.probed),
    )
