"""Argv parsing and dispatch of the simulated ``sky`` (skypilot-0.12.md §1, §12).

argparse stands in for click (it starts in a third of the time, and tests
run the simulator hundreds of times); usage errors are printed in click's
shape and exit 2, declined prompts print ``Aborted!`` and exit 1, and
``sky.exceptions.<Class>: <message>`` errors are one stderr line, exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys

from .session import Exit, Session, usage

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    Command = Callable[[Session, argparse.Namespace], int]

__all__ = ["VERSION_FILE", "main"]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# Recorded from the real skypilot==0.12.2 by the real-binary tests, when present (§12).
VERSION_FILE = os.path.join(REPO, "tests", "fixtures", "skypilot", "real", "version.txt")
DEFAULT_VERSION = "skypilot, version 0.12.2\n"


class _Formatter(argparse.HelpFormatter):
    """A fixed width: the default asks shutil for the terminal size on every add_argument."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=100)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors look like click's: ``Usage: …`` then ``Error: …``, exit 2."""

    def __init__(self, *args: Any, arguments: str = "", **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)
        self.arguments = arguments

    def error(self, message: str) -> NoReturn:
        raise usage(self.prog, self.arguments, message)


def _flag(p: argparse.ArgumentParser, *names: str) -> None:
    p.add_argument(*names, action="store_true")


def _launch_parser(jobs: Any) -> None:
    from . import commands

    p = jobs.add_parser("launch", arguments="ENTRYPOINT...")
    p.add_argument("entrypoint", nargs="*")
    p.add_argument("-n", "--name", "-c", "--cluster", dest="name")
    _flag(p, "-y", "--yes")
    _flag(p, "-d", "--detach-run")
    p.add_argument("--async", dest="async_call", action="store_true")
    for option in (
        "--infra",
        "--cloud",
        "--region",
        "--zone",
        "--gpus",
        "--cpus",
        "--memory",
        "--num-nodes",
        "--image-id",
        "--disk-size",
        "--env-file",
        "--secret-file",
        "--workdir",
        "--job-recovery",
        "--pool",
    ):
        p.add_argument(option)
    p.add_argument("-t", "--instance-type")
    _flag(p, "--use-spot")
    for option in ("--ports", "--config"):
        p.add_argument(option, action="append", default=[])
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--secret", action="append", default=[])
    p.set_defaults(func=commands.launch)


def _jobs_parsers(sub: Any) -> None:
    from . import commands

    jobs = sub.add_parser("jobs", arguments="COMMAND [ARGS]...").add_subparsers(
        prog="sky jobs", dest="command", required=True, parser_class=_Parser
    )
    _launch_parser(jobs)
    q = jobs.add_parser("queue", arguments="[JOB_IDS]...")
    _flag(q, "-v", "--verbose")
    q.add_argument("-l", "--limit", type=int, default=50)
    _flag(q, "-a", "--all")
    _flag(q, "-u", "--all-users")
    _flag(q, "-s", "--skip-finished")
    _flag(q, "-r", "--refresh")
    q.add_argument("-o", "--output", choices=("table", "json"), default="table")
    q.add_argument("job_ids", nargs="*", type=int)
    q.set_defaults(func=commands.queue)
    c = jobs.add_parser("cancel", arguments="[JOB_IDS]...")
    c.add_argument("job_ids", nargs="*", type=int)
    c.add_argument("-n", "--name")
    c.add_argument("-p", "--pool")
    _flag(c, "-a", "--all")
    _flag(c, "-u", "--all-users")
    _flag(c, "-y", "--yes")
    _flag(c, "--graceful")
    c.add_argument("--graceful-timeout", type=int)
    c.set_defaults(func=commands.cancel)
    g = jobs.add_parser("logs", arguments="[JOB_ID]")
    g.add_argument("job_id", nargs="?", type=int)
    g.add_argument("-n", "--name")
    g.add_argument("--follow", dest="follow", action="store_true", default=True)
    g.add_argument("--no-follow", dest="follow", action="store_false")
    _flag(g, "--controller")
    _flag(g, "-r", "--refresh")
    _flag(g, "--sync-down")
    g.set_defaults(func=commands.logs)


def _other_parsers(sub: Any) -> None:
    from . import admin, check

    ck = sub.add_parser("check", arguments="[INFRA_LIST]...")
    ck.add_argument("infra_list", nargs="*")
    _flag(ck, "-v", "--verbose")
    ck.add_argument("--workspace")
    ck.add_argument("-o", "--output", choices=("table", "json"), default="table")
    ck.set_defaults(func=check.check)

    d = sub.add_parser("down", arguments="[CLUSTERS]...")
    d.add_argument("clusters", nargs="*")
    _flag(d, "-a", "--all")
    _flag(d, "-u", "--all-users")
    _flag(d, "-y", "--yes")
    _flag(d, "-p", "--purge")
    d.set_defaults(func=admin.down)
    s = sub.add_parser("status", arguments="[CLUSTERS]...")
    s.add_argument("clusters", nargs="*")
    _flag(s, "-r", "--refresh")
    _flag(s, "-v", "--verbose")
    _flag(s, "-u", "--all-users")
    s.add_argument("-o", "--output", choices=("table", "json"), default="table")
    s.set_defaults(func=admin.status)
    api = sub.add_parser("api", arguments="COMMAND [ARGS]...").add_subparsers(
        prog="sky api", dest="command", required=True, parser_class=_Parser
    )
    st = api.add_parser("status", arguments="[REQUEST_IDS]...")
    st.add_argument("request_ids", nargs="*")
    _flag(st, "-a", "--all-status")
    _flag(st, "-v", "--verbose")
    st.add_argument("-o", "--output", choices=("table", "json"), default="table")
    st.set_defaults(func=admin.api_status)
    lg = api.add_parser("logs", arguments="REQUEST_ID")
    lg.add_argument("request_id")
    lg.set_defaults(func=admin.api_logs)
    ac = api.add_parser("cancel", arguments="[REQUEST_IDS]...")
    ac.add_argument("request_ids", nargs="*")
    _flag(ac, "-a", "--all")
    _flag(ac, "-u", "--all-users")
    ac.set_defaults(func=admin.api_cancel)


def _parser() -> _Parser:
    root = _Parser(prog="sky", arguments="COMMAND [ARGS]...")
    # An explicit prog spares argparse a HelpFormatter (and its shutil import) per call.
    sub = root.add_subparsers(prog="sky", dest="group", required=True, parser_class=_Parser)
    _jobs_parsers(sub)
    _other_parsers(sub)
    return root


def _version() -> int:
    """``sky --version``: the recorded real line when present, else the 0.12.2 line."""
    try:
        with open(VERSION_FILE, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        text = DEFAULT_VERSION
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def main(argv: list[str]) -> int:
    """Run one simulated ``sky`` command; returns its exit code."""
    if argv[:1] == ["--version"]:
        return _version()
    session = Session(os.environ, argv)
    try:
        args = _parser().parse_args(argv)
        func: Command = args.func
        code = func(session, args)
    except Exit as stop:
        code = stop.code
        if stop.stderr:
            sys.stderr.write(stop.stderr + "\n")
            sys.stderr.flush()
    except SystemExit as stop:  # -h/--help
        code = stop.code if isinstance(stop.code, int) else 0
    session.finish()
    return code
