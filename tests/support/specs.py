"""Small workflow specs the live-submit tests write to disk."""

from __future__ import annotations

__all__ = ["one_step_spec"]


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
