"""A SkyPilot 0.12.2 ``sky`` CLI simulator for the adapter's contract tests.

It reproduces the CLI contract of skypilot-0.12.md §12 (outputs, exit codes,
statuses, asynchronous cancellation, controller teardown) without a server,
a cluster or the network, so the real ``SkyCli`` can be exercised end to end.

Layout:

- ``main``: argv parsing and the commands (``--version``, ``jobs launch|queue|
  cancel|logs``, ``down``, ``status``, ``api status|cancel``);
- ``store``: the state file and the caller's identity;
- ``jobs``: tasks read from YAML, scripted status timelines, queue rows;
- ``taskfile``: the few task-YAML keys a launch needs, read without PyYAML;
- ``faults``: scripted fault rules and the recorded error texts;
- ``kubepods``: job pods in the Kubernetes API double (optional, below);
- ``render``: tables and the fixed output blocks;
- ``harness``: test-side helpers (wrapper script, fault files, state reads).

State is one JSON file, ``<dir>/skysim.json``, where ``<dir>`` is
``$SKYSIM_STATE_DIR`` (one simulated API server shared by several clients),
else ``$SKY_RUNTIME_DIR/.sky``, else ``$HOME/.sky``. Every invocation takes an
exclusive ``fcntl.flock`` on ``<dir>/skysim.lock`` around its reads and writes,
so concurrent invocations are safe.

Time is simulated: every ``jobs queue`` call advances a global tick, and a
job's tasks follow their timeline one step per tick (or one step per
``interval`` seconds when a timeline rule asks for ``seconds``). Seconds are
the wall clock's, or, when ``$SKYSIM_CLOCK_FILE`` names a file, the time it
holds: a test's virtual clock, so a job does its work while npa sleeps.

Faults come from the JSON file named by ``$SKYSIM_FAULTS`` (else
``<dir>/faults.json``): a list of rules ``{"command": "jobs.launch", "nth": 2,
"action": "fail", ...}``; see ``faults``. The simulator records every call's
argv and the *names* of its environment variables, never their values.

Job pods (§12 "Job pods"): when ``$SKYSIM_KUBE_URL`` is set, with
``$SKYSIM_KUBE_TOKEN``, ``$SKYSIM_KUBE_CA`` (a CA file) and
``$SKYSIM_KUBE_NAMESPACE`` (default ``default``), every launch creates one pod
per task through that API server (a ``FakeKube``), named
``<cluster_name_on_cloud>-head`` and labelled
``skypilot-cluster-name=<cluster_name_on_cloud>`` (``<task>-<id>-<user hash>``;
like 0.12, ``-v`` queue rows leave ``cluster_name_on_cloud`` null and show
``current_cluster_name``, ``<task>-<id>``, which is not the label). A ``pod_state``
launch rule scripts their status and events. ``kubepods.kube_env(fake,
context)`` returns the variables for a started ``FakeKube``. Without
``$SKYSIM_KUBE_URL`` nothing touches the network.
"""
