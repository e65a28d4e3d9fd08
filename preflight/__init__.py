"""Preflight checks that run before anything costs cluster time.

``targets`` decides, purely, which images a spec can run: every state
reachable through control flow (all branches of every decision, every loop,
sequence and parallel member), each resolved by the renderer's own selection
rules. ``images`` checks each distinct image once, concurrently, through a
``npa_infra.registry.base.Registry`` and returns the report that
``preflight-images`` prints and ``submit`` gates on.

``pull_probe`` then proves, for the registry-``ok`` images of Kubernetes
steps, that the exact pod identity pulls the exact digest in the exact
context (kubernetes.md §9), through an injected ``kube.base.PodProber``. Its
decisions are pure: ``probe_paths`` (which pod identities), ``probe_pod``
(the manifest and the identity comparison) and ``probe_verdict`` (when to
stop watching, and what was proven); ``probe_runner`` performs one probe's
effects and ``probe_cache`` remembers proven pulls.
"""
