"""``sky check [INFRA]...`` (skypilot-0.12.md §12 "check kubernetes"), Kubernetes only.

As 0.12.2 does it (``sky/check.py``, ``sky/clouds/kubernetes.py``), inside the
API server, so with the server's PATH, config and kubeconfig:

- ``socat`` and ``nc`` missing from ``PATH`` disable Kubernetes with the
  recorded reason (``real/check_kubernetes_tools_missing.txt``);
- the allowed contexts are ``kubernetes.allowed_contexts`` of
  ``$SKYPILOT_GLOBAL_CONFIG`` that the kubeconfig defines; none is the
  "No available context found in kubeconfig" reason;
- each such context is enabled, unless a ``check_disabled`` rule gives its
  reason (``{"command": "check", "action": "check_disabled", "reason": "…",
  "context": "<ctx>"}``; without ``context``, every one): SkyPilot's
  per-context "disabled. Reason: …" line, as an unreachable or unauthorised
  cluster produces it.

The exit code is 0 whether Kubernetes is enabled or not; the client then
prints the server it used. The generic faults (``fail``, ``hang``, …) apply
under the command name ``check``. ``-o json`` prints the enabled clouds per
workspace instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil

from .session import Session

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    import argparse

__all__ = ["check"]

DIM, RESET, GREEN, NORMAL, RED, BOLD = (
    "\x1b[2m",
    "\x1b[0m",
    "\x1b[32m",
    "\x1b[22m",
    "\x1b[91m",
    "\x1b[1m",
)
TREE_MID, TREE_LAST = f"{DIM}├── {RESET}", f"{DIM}└── {RESET}"
DOCS = "https://docs.skypilot.co/en/latest/getting-started/installation.html"
TOOL_REASON = (
    "`{tool}` is required to setup Kubernetes cloud with `portforward` default networking "
    "mode and it is not installed. "
)


def _missing_tools(session: Session) -> list[str]:
    path = session.env.get("PATH", "")
    return [tool for tool in ("socat", "nc") if shutil.which(tool, path=path) is None]


def _tools_reason(missing: list[str]) -> str:
    lines = [TOOL_REASON.format(tool=tool) for tool in missing]
    lines += [
        "On Debian/Ubuntu, install the missing dependenc(ies) with:",
        "  $ sudo apt install socat netcat",
        "On MacOS, install with: ",
        "  $ brew install socat netcat",
    ]
    return "\n".join([lines[0], *("    " + line for line in lines[1:])])


def _allowed_contexts(env: dict[str, str]) -> list[str]:
    """``kubernetes.allowed_contexts`` of the generated (block-style YAML) config."""
    try:
        with open(env.get("SKYPILOT_GLOBAL_CONFIG", ""), encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    found, section, inside = [], "", False
    for line in lines:
        if line and not line.startswith(" "):
            section, inside = line.rstrip(":"), False
        elif section == "kubernetes" and line.strip() == "allowed_contexts:":
            inside = True
        elif inside and line.lstrip().startswith("- "):
            found.append(line.lstrip()[2:].strip().strip("'\""))
        elif inside:
            inside = False
    return found


def _defined(env: dict[str, str], context: str) -> bool:
    path = env.get("KUBECONFIG", "").split(os.pathsep)[0]
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return False
    return re.search(rf"\bname:\s*['\"]?{re.escape(context)}['\"]?\s*[,}}\n]", text) is not None


def _contexts_block(texts: dict[str, str], indent: str) -> str:
    rows = [
        f"\n{indent}{TREE_LAST if i == len(texts) - 1 else TREE_MID}{ctx}"
        + (f": {text}" if text else "")
        for i, (ctx, text) in enumerate(texts.items())
    ]
    return f"\n{indent}Allowed contexts:{''.join(rows)}"


def _kubernetes(session: Session) -> tuple[bool, str, dict[str, str]]:
    """(enabled, reason text, context -> text) as ``Kubernetes._check_compute_credentials``."""
    missing = _missing_tools(session)
    if missing:
        return False, _tools_reason(missing), {}
    contexts = [c for c in _allowed_contexts(session.env) if _defined(session.env, c)]
    if not contexts:
        config = session.env.get("SKYPILOT_GLOBAL_CONFIG", "~/.sky/config.yaml")
        return (
            False,
            (
                "No available context found in kubeconfig. Check if you have a valid kubeconfig "
                f'file and check "allowed_contexts" in your {config} file.'
            ),
            {},
        )
    texts = {}
    for context in contexts:
        rule = next(
            (
                r
                for r in session.rules
                if r.get("action") == "check_disabled" and r.get("context", context) == context
            ),
            None,
        )
        if rule is None:
            texts[context] = f"{GREEN}enabled.{RESET}"
        else:
            texts[context] = f"{RED}disabled.{RESET}{DIM} Reason: {rule.get('reason', '')}{RESET}"
    enabled = any(t.startswith(GREEN) for t in texts.values())
    return enabled, "", texts


def _endpoint(session: Session) -> str:
    return session.env.get("SKYPILOT_API_SERVER_ENDPOINT") or f"http://127.0.0.1:{session.port}"


def check(session: Session, a: argparse.Namespace) -> int:
    session.begin("check")
    enabled, reason, texts = _kubernetes(session)
    if a.output == "json":
        session.say(
            json.dumps({"default": {"Kubernetes": ["compute"]} if enabled else {}}, indent=2)
        )
        return 0
    session.say("Checking credentials to enable infra for SkyPilot.")
    if enabled:
        session.say(
            f"{GREEN}{NORMAL}  Kubernetes: enabled [compute]{RESET}{_contexts_block(texts, '    ')}"
            + RESET
        )
        summary = f"\n  {GREEN}Kubernetes [compute]{RESET}" + _contexts_block(
            {c: "" for c, t in texts.items() if "disabled" not in t}, "    "
        )
    else:
        session.say(f"{DIM}  Kubernetes: disabled {RESET}{RESET}")
        if texts:  # per-context reasons: SkyPilot indents the context block once more
            block = _contexts_block(texts, "    ")
            reason = "\n".join("    " + line for line in block.splitlines())
        session.say(f"    Reason [compute]: {reason}")
        summary = "\n  No infra to check/enabled."
    session.say(f"\n{GREEN}🎉 Enabled infra 🎉{RESET}{summary}")
    session.say(
        f"{DIM}\nTo enable a cloud, follow the hints above and rerun: {RESET}{BOLD}sky check{RESET}\n"
        f"{DIM}If any problems remain, refer to detailed docs at: {DOCS}{RESET}"
    )
    session.say("", f"Using SkyPilot API server: {_endpoint(session)}")
    return 0
