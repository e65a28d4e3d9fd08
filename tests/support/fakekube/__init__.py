"""A stateful Kubernetes API double for tests (kubernetes.md §10).

The official ``kubernetes`` Python client (``CoreV1Api``, ``PolicyV1Api``,
``NodeV1Api``, ``VersionApi``, ``kubernetes.watch.Watch``,
``kubernetes.config.new_client_from_config``) and ``kubectl`` drive it
unmodified, through a generated kubeconfig. It runs in-process on 127.0.0.1
(ephemeral ports, HTTPS with a test CA, plus plain HTTP), one per test.

Start and stop::

    from tests.support.fakekube import FakeKube

    fake = FakeKube.start(tmp_path)            # or the ``fake_kube`` fixture
    api = kubernetes.config.new_client_from_config(str(fake.kubeconfig), "fake-a")
    ...
    fake.stop()                                # idempotent; also a context manager

Fixtures (``tests/support/fakekube/pytest_plugin.py``; import them into a
conftest): ``fake_kube`` (started, stopped at teardown) and ``kubectl``
(``kubectl("get", "pods", "-o", "json", context="fake-a")`` returns a
``CompletedProcess``; the binary is ``$NPA_TEST_KUBECTL`` or ``kubectl``).

Attributes:

- ``kubeconfig`` (Path); ``contexts``: name -> namespace of the working
  contexts ``fake-a`` (team-a), ``fake-b`` (team-b), ``fake-default`` (no
  namespace key: default); ``current_context`` is ``ambient`` (namespace
  ``ambient``), which code under test must never fall back to;
- ``bad_contexts``: ``bad-token`` (401 everywhere), ``forbidden`` (403 on
  every resource; ``/readyz`` and ``/version`` answer), ``bad-ca`` (TLS
  certificate verification error), ``exec-fail`` (exec credential plugin
  exits 1: kubectl fails; the Python client logs it and goes on anonymously,
  so resources answer 403), ``unreachable`` (connection refused);
- ``url`` (HTTPS), ``http_url`` (plain HTTP: Python client only, kubectl
  sends no credentials over HTTP), ``store``, ``resource_version``.

Served: ``/version`` (all 9 VersionInfo fields, v1.31.4), ``/readyz``,
``/livez``, ``/healthz`` (``?verbose``, ``?exclude=``, ``/readyz/<check>``),
discovery (``/api``, ``/apis``, ``/api/v1``, ``/apis/policy/v1``,
``/apis/node.k8s.io/v1``), and namespaces, nodes (+status), pods (+status,
+log), secrets, configmaps, serviceaccounts, events, resourcequotas (+status),
policy/v1 poddisruptionbudgets (+status), node.k8s.io/v1 runtimeclasses:
create/get/list/watch/update/patch (strategic merge, JSON merge, JSON
patch)/delete/deletecollection, with label and field selectors, ``limit`` and
``continue``, ``dryRun=All``, and server-side Tables for kubectl. Semantics:
kubernetes.md §2 (ServiceAccount admission, pull-secret copy only into an
empty list), §3
(DefaultTolerationSeconds, RuntimeClass merge), §4.2 (ResourceQuota 403),
§5 (409 AlreadyExists, 404 NotFound, DELETE preconditions with the exact
409 message), §10.3 (watch: snapshot, live events, ``timeoutSeconds``, resume
from ``resourceVersion``, ERROR 410 Expired after ``compact()``; bookmarks).

Test controls (Python, outside HTTP). Pods are named, ``namespace=None``
finds the unique pod of that name. Every control writes through the store
(new resourceVersion, watch events) and emits the real components' events:

- objects: ``create(resource, ns, body)``, ``get(resource, ns, name)``,
  ``add_namespace``, ``add_service_account(ns, name, image_pull_secrets=[...],
  automount=)``, ``add_secret(ns, name, string_data=)``,
  ``add_runtime_class(name, handler, node_selector=, tolerations=, overhead=)``,
  ``add_pdb(ns, name, selector=, min_available=, max_unavailable=,
  unhealthy_pod_eviction_policy=, status=)`` (the status follows the pods as
  the disruption controller computes it, ``disruption.py``; ``status=`` pins
  it), ``set_pdb_status(ns, name, status_or_None)``,
  ``set_controller_scale(uid, replicas_or_None)``, ``add_resource_quota(ns, name,
  hard)``, ``add_event(pod_name_or_object, reason, message, type_="Warning",
  component=, container=)``, ``set_pod_log(name, text)``;
- nodes: ``add_node(name, labels=, gpus=, ready=True, unschedulable=False,
  taints=[], cpu="32", memory="256Gi", pods=110)``, ``node(name)``,
  ``set_node_ready(name, bool, unreachable=False)`` (condition + not-ready /
  unreachable taints), ``set_node_taints``, ``set_node_labels`` (None
  removes), ``cordon(name, bool)``, ``set_node_allocatable(name, nvidia_com_gpu="8")``;
- pods: ``pod(name)``, ``pods(ns)``, ``wait_for_pod(name, timeout=)``,
  ``set_pod_phase``, ``set_pod_condition``, ``set_container_status(name,
  container=None, state="waiting"|"running"|"terminated", reason=, message=,
  exit_code=, image_id=, ready=, restart_count=, init=)``;
  ``schedule_pod(name, node=None)`` (simulated scheduler: binds, or sets
  PodScheduled=False/Unschedulable with the real message, e.g. ``0/3 nodes
  are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are
  available: 3 No preemption victims found for incoming pod.``),
  ``mark_unschedulable(name, message=None)``, ``fail_image_pull(name,
  kind="auth"|"not_found"|"timeout"|"rate_limited"|"unavailable",
  message=, backoff=False)``, ``fail_container_config(name, ref, kind="secret"|
  "configmap")``, ``start_pod(name, image_id=, runtime="containerd"|"docker")``
  (missing env Secrets give CreateContainerConfigError; missing pull Secrets
  give FailedToRetrieveImagePullSecret), ``succeed_pod``, ``fail_pod(name,
  exit_code)``, ``crash_loop(name, exit_code=, restarts=)``,
  ``disrupt_pod(name, reason)``; ``graceful_pod_deletion = True`` keeps deleted
  bound pods Terminating until ``finish_pod_deletion(name)``;
- watches: ``compact()`` (older resourceVersions answer 410), ``wait_until(predicate, timeout)``;
- faults: ``fail_next(method, path_regex, status, times=1, nth=1, message=,
  retry_after=, delay=)``, ``reset_next(method, path_regex, times=1, nth=1)``
  (TCP reset; note urllib3 retries idempotent methods 3 times),
  ``delay_next(method, path_regex, seconds, times=1, nth=1)``, ``clear_faults()``;
  the regex is searched in the path (plus ``?query`` when present); method
  ``*`` matches any;
- readiness: ``script_readyz([200, 500, 429, "drop", ("delay", 2.0),
  ("delay", 1.0, 503)], repeat=False)``; ``readyz.calls`` holds the
  monotonic time of every ``/readyz`` request; once the queue is empty, 200 ``ok``;
- RBAC and logs: ``deny(user, verb="*", resource="*")`` (user = context
  name), ``calls(method=, path_regex=, user=)`` -> ``RequestRecord(method,
  path, query, user, time, status, outcome)``.

Client behaviour to know: the official client's default urllib3 ``Retry``
(3 retries) silently retries GET/PUT/DELETE after a connection reset, and
retries 429/503 answers that carry ``Retry-After`` (``fail_next(...,
retry_after=1)``); scripted ``/readyz`` 429s carry no ``Retry-After``. Use
``Configuration.retries = False`` to see every raw answer.

Limits: no PriorityClass admission, no pod spec immutability, no field
managers or server-side apply (415), no aggregated discovery, no protobuf, no
OpenAPI documents (``kubectl create/apply`` need ``--validate=false``), no
``pods/binding``, ``pods/eviction``, ``exec`` or ``attach`` over HTTP; events
are core/v1 only.
"""

from tests.support.fakekube.errors import FakeKubeError
from tests.support.fakekube.fake import FakeKube
from tests.support.fakekube.faults import ReadyzAnswer, RequestRecord

__all__ = ["FakeKube", "FakeKubeError", "ReadyzAnswer", "RequestRecord"]
