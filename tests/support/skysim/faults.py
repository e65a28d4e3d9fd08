"""Scripted faults: which rules apply to this call, and the error texts they print.

A rule is a JSON object::

    {"command": "jobs.launch" | "jobs.queue" | "jobs.cancel" | "jobs.logs" | "down"
                | "status" | "api.status" | "api.logs" | "api.cancel" | "check" | "*",
     "nth": 2 | [1, 3],          # optional: only the n-th invocation(s) of the command
     "action": ...,              # see below
     ...parameters}

Actions and their parameters:

- ``fail``: fail before the server accepts anything. ``kind`` picks a recorded
  text (``KINDS``) or ``stderr`` gives one; ``stdout``; ``exit`` (default 1).
- ``accept_then_fail``: do the work (the job *is* created, the cancel *is*
  scheduled), then print a ``kind``/``stderr`` error instead of the answer, exit 1.
- ``hang``: sleep ``seconds`` (default 30) before acting, or after accepting
  with ``"after_accept": true``. Tests kill the child with a short timeout.
  With ``signal_fifo`` the call writes its pid into that FIFO when it starts
  hanging, and with ``release_fifo`` it hangs until a line is written into it
  (events a test can wait on, instead of time).
- ``say``: print ``lines`` (a list, each flushed as it is written) on ``stream``
  (``stdout``, the default, or ``stderr``) when the call reaches the server, before
  any ``hang``: with a ``hang`` on ``release_fifo`` the call then waits, so a test
  can see those lines while the call is still running.
- ``flood``: print ``bytes`` of filler in lines of ``width`` characters (default
  1 MiB of 4096) on ``stream`` (``stdout``, the default, or ``stderr``) when the
  call reaches the server, before any ``hang`` or ``fail`` (a flood of output
  whose memory cost a test measures).
- ``garbage``: print ``stdout`` (unreadable text) and ``stderr``, exit ``exit``
  (default 0), without acting.
- ``preamble``: print the local-server banner (§1) before the answer.
- ``trailing``: print ``text`` after the answer.
- ``delay_appearance`` (launch): the job shows in the queue only after
  ``queue_calls`` further queue calls; until then the request is RUNNING.
- ``timeline`` (launch): the job's scripted statuses: ``statuses`` (every task)
  or ``tasks`` (one list per task); ``clock`` ``calls`` (default) or
  ``seconds`` with ``interval``; ``failure_reason``.
- ``as_user`` (launch): the job is another operator's (``user_hash``, ``user_name``),
  submitted through the same API server, so it runs on the caller's controller:
  only ``--all-users`` queue reads list it, and ``down`` refuses while it is in
  progress (with ``timeline`` it can drain, e.g. ``["CANCELLING", "CANCELLED"]``:
  one step per queue read).
- ``slow_cancel`` (cancel): CANCELLING lasts ``delay`` queue calls (or
  ``delay_seconds``) before CANCELLED.
- ``controller``: before acting, bring the caller's controller ``"up": true``,
  or remove it (and its jobs) with ``"up": false``.
- ``refuse_down`` (down): report in-progress jobs even when there are none.
- ``partial`` (queue): a partial answer: every user's jobs are listed, but the
  caller's own are left out (only those in ``names``, when given; only while
  their status is ``status``, when given), for at most ``times`` answers that
  hid something; with ``"verbose": true`` only ``-v`` reads are partial.
- ``request_fails`` (launch with ``--async``): the request is accepted (the
  async block is printed, exit 0) but ends FAILED without creating a job;
  ``sky api status`` reports FAILED and ``sky api logs ID`` prints the
  ``kind``/``stderr`` error text.
- ``check_disabled`` (check): SkyPilot's per-context "disabled. Reason:
  ``reason``" for ``context`` (default: every allowed context), as an
  unreachable or unauthorised cluster answers (see ``check``).
- ``pod_state`` (launch, only with ``$SKYSIM_KUBE_URL``; see ``kubepods``): after
  creating the job's pods, write ``pod`` into their status and events:
  ``phase``; ``conditions`` (``[{type, status, reason, message}]``, merged by
  type); ``waiting`` (``{reason, message}`` on every container); ``events``
  (``[{reason, message, type="Warning"}]``). ``task`` (an index) limits it to
  one task's pod. Example: ``{"command": "jobs.launch", "action": "pod_state",
  "pod": {"waiting": {"reason": "ErrImagePull", "message": "… 401 Unauthorized"}}}``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

TYPE_CHECKING = False  # typing costs start-up time in every simulated call
if TYPE_CHECKING:
    from typing import Any

    Rule = dict[str, Any]

__all__ = ["CLUSTER_NOT_UP", "KINDS", "banner", "error_text", "load_rules", "matching"]


CLUSTER_NOT_UP = "sky.exceptions.ClusterNotUpError: No in-progress managed jobs."

# One stderr line per kind, as the 0.12 client prints them (§1: `<module>.<Class>: <message>`).
KINDS: dict[str, str] = {
    "warmup": (
        "sky.exceptions.ApiServerConnectionError: Could not connect to SkyPilot API server at "
        "http://127.0.0.1:{port}. Please ensure that the server is running. "
        "Try: curl http://127.0.0.1:{port}/api/health"
    ),
    "transport": (
        "requests.exceptions.ConnectionError: ('Connection aborted.', "
        "RemoteDisconnected('Remote end closed connection without response'))"
    ),
    "server": (
        "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: "
        "http://127.0.0.1:{port}/{path}"
    ),
    "rate_limit": (
        "requests.exceptions.HTTPError: 429 Client Error: Too Many Requests for url: "
        "http://127.0.0.1:{port}/{path}"
    ),
    "auth": (
        "sky.exceptions.CloudUserIdentityError: Failed to access the Kubernetes cluster: "
        "(401) Unauthorized"
    ),
    "rbac": (
        'sky.exceptions.ResourcesUnavailableError: (403) Forbidden: pods is forbidden: User "'
        'system:serviceaccount:npa:runner" cannot create resource "pods" in API group "" '
        'in the namespace "npa"'
    ),
    "context": (
        "ValueError: Kubernetes context 'npa-missing' not found in kubeconfig "
        "(not in allowed_contexts)."
    ),
    "cluster_not_up": CLUSTER_NOT_UP,
    "unknown": "RuntimeError: simulated unclassified failure",
}


def load_rules(env: Mapping[str, str], directory: str) -> list[Rule]:
    path = env.get("SKYSIM_FAULTS") or os.path.join(directory, "faults.json")
    try:
        with open(path, encoding="utf-8") as handle:
            rules = json.load(handle)
    except FileNotFoundError:
        return []
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise ValueError(f"{path}: faults must be a JSON list of objects")
    return rules


def matching(rules: list[Rule], command: str, n: int) -> list[Rule]:
    """The rules that apply to the ``n``-th invocation of ``command``."""
    out = []
    for rule in rules:
        if rule.get("command", "*") not in ("*", command):
            continue
        nth = rule.get("nth")
        if nth is None or nth == n or (isinstance(nth, list) and n in nth):
            out.append(rule)
    return out


def error_text(rule: Rule, *, port: str, command: str) -> str:
    if "stderr" in rule:
        return str(rule["stderr"])
    template = KINDS[str(rule.get("kind", "transport"))]
    return template.format(port=port, path=command.replace(".", "/"))


def banner(port: str) -> list[str]:
    """The two stdout lines of the call that auto-starts the local API server (§1).

    Byte for byte as recorded from 0.12.2 (real/queue_no_controller_server_start.txt).
    """
    return [
        f"\x1b[2mFailed to connect to SkyPilot API server at http://127.0.0.1:{port}. "
        "Starting a local server.\x1b[0m",
        "\x1b[0m\x1b[32m✓ SkyPilot API server started. \x1b[0m\x1b[0m",
    ]
