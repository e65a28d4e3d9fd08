"""The ``npa cleanup`` report: the JSON document of ``--json`` (issue 16, cli.md style).

One object: ``status`` (``report`` without ``--yes``, ``cleaned`` with it), the
caches with their sizes, what keeps each and whether it was removed, the places
not looked into (``skipped``: a symlinked root, a relative state directory), the stack,
project and credentials entries (names only), the managed jobs per state
directory, the cluster resources the project's own commands created, the
runbook, and the errors that make the exit code 1.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = [
    "CacheEntry",
    "CleanupReport",
    "ClusterResource",
    "CredentialsEntry",
    "ManagedJob",
    "ManagedJobs",
    "ProjectEntry",
    "SkippedPath",
    "StackEntry",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CacheEntry(_Model):
    kind: str
    path: str
    bytes: int
    needed_by: list[str] = []
    removed: bool = False
    reason: str | None = None  # why it is kept (runs.leftovers.KeepReason), None: removable
    detail: str = ""


class SkippedPath(_Model):
    """A place cleanup did not look into, and why (issue 24)."""

    path: str
    reason: str  # "symlink" or "relative"
    detail: str = ""


class StackEntry(_Model):
    name: str
    path: str


class ProjectEntry(_Model):
    alias: str
    path: str
    stack: str | None = None
    state_dir: str | None = None
    problem: str = ""


class CredentialsEntry(_Model):
    stack: str
    path: str
    names: list[str] = []  # variable names only: values are never read into the report
    problem: str = ""


class ManagedJob(_Model):
    id: int
    name: str
    user: str
    status: str


class ManagedJobs(_Model):
    state_dir: str
    verdict: str  # "records", "no_controller", "never_used" or "unknown"
    jobs: list[ManagedJob] = []  # the non-terminal ones
    detail: str = ""


class ClusterResource(_Model):
    kind: str
    namespace: str
    name: str
    created_by: str


class CleanupReport(_Model):
    status: str  # "report" or "cleaned"
    caches: list[CacheEntry] = []
    skipped: list[SkippedPath] = []
    stacks: list[StackEntry] = []
    projects: list[ProjectEntry] = []
    credentials: list[CredentialsEntry] = []
    managed_jobs: list[ManagedJobs] = []
    cluster_resources: list[ClusterResource] = []
    runbook: list[str] = []
    errors: list[str] = []

    @property
    def exit_code(self) -> int:
        """0 for a report or a clean; 1 when something asked could not be done."""
        return 1 if self.errors else 0
