"""Workflow specs the tests (and bench/spec_growth.py) write to disk."""

from __future__ import annotations

__all__ = ["fanout_spec", "growth_chain_spec", "one_step_spec"]


def one_step_spec(name: str, bucket: str) -> str:
    """One image-less state (so it needs staged NPA source) with ``config.bucket``."""
    return f"""\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {{name: {name}}}
config: {{bucket: {bucket}}}
resources:
  default: {{cloud: kubernetes, cpus: 1}}
states:
  train:
    run: {{shell: echo train}}
    terminal: true
"""


def fanout_spec(
    name: str, root_uri: str, *, members: int, max_concurrency: int, outputs: bool = False
) -> str:
    """A runtime spec: a parallel group ``fan`` of ``members`` states (``m0``…), at most
    ``max_concurrency`` at a time, then a serial ``join`` behind it.

    With ``outputs`` each member declares ``<root_uri>/m<i>.json``.
    """
    lines = [
        "apiVersion: npa.workflow/v0.0.1",
        "kind: Workflow",
        f"metadata: {{name: {name}, executionMode: runtime}}",
        f'config: {{root_uri: "{root_uri}"}}',
        "resources:",
        "  default: {cloud: kubernetes, cpus: 1, memory: 1Gi}",
        "states:",
        "  fan:",
        f"    parallel: [{', '.join(f'm{i}' for i in range(members))}]",
        f"    maxConcurrency: {max_concurrency}",
        "    next: join",
    ]
    for i in range(members):
        lines += [f"  m{i}:", "    toolRef: workbench.rerun.report"]
        if outputs:
            lines += ["    outputs:", f'      - {{uri: "{{{{config.root_uri}}}}/m{i}.json"}}']
    lines += ["  join:", "    toolRef: workbench.rerun.report", "    terminal: true"]
    return "\n".join(lines) + "\n"


def growth_chain_spec(states: int) -> str:
    """A valid one-shot chain of ``states`` states, each reading its predecessor's output
    (bench/spec_growth.py times it; tests/unit/workflow/test_growth.py counts it)."""
    lines = [
        "apiVersion: npa.workflow/v0.0.1",
        "kind: Workflow",
        "metadata: {name: growth}",
        'config: {bucket: example-bucket, root_uri: "s3://example-bucket/growth"}',
        "resources:",
        "  default: {cloud: kubernetes, cpus: 1, memory: 1Gi}",
        "states:",
    ]
    for i in range(states):
        lines += [
            f"  s{i}:",
            "    run:",
            f'      shell: "echo step {i} > $OUT"',
            "    outputs:",
            f'      - {{uri: "{{{{config.root_uri}}}}/s{i}/out.txt"}}',
        ]
        if i:
            lines += [
                "    inputs:",
                f'      - {{uri: "{{{{state.s{i - 1}.uri}}}}"}}',
            ]
        lines.append(f"    next: s{i + 1}" if i < states - 1 else "    terminal: true")
    return "\n".join(lines) + "\n"
