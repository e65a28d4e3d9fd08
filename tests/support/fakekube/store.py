"""The double's state: objects, resourceVersions, change history and watchers (kubernetes.md §10.2-§10.3).

One global, monotonically increasing resourceVersion (as etcd's revision)
stamps every write. Every change is kept in a bounded history so that a watch
can resume from a resourceVersion; a version older than the retained history
answers 410 Expired. Watchers receive changes translated through their
selectors, as the API server's watch cache does: an object that starts
matching arrives as ADDED, one that stops matching as DELETED.
"""

from __future__ import annotations

import base64
import copy
import queue
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.fakekube import admission, disruption, objects
from tests.support.fakekube.errors import ApiError
from tests.support.fakekube.resources import RESOURCES
from tests.support.fakekube.selectors import (
    FieldSelector,
    LabelSelector,
)

__all__ = ["Change", "Store", "Watcher"]

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Change:
    rv: int
    resource: str
    namespace: str
    type: str  # ADDED | MODIFIED | DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None


class Watcher:
    """One open watch: a queue of ``(type, object)`` events, ``None`` when closed."""

    def __init__(
        self, resource: str, namespace: str | None, labels: LabelSelector, fields: FieldSelector
    ) -> None:
        self.resource = resource
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.events: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()

    def matches(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(obj)

    def translate(self, change: Change) -> tuple[str, dict[str, Any]] | None:
        if change.resource != self.resource:
            return None
        was, now = self.matches(change.old), self.matches(change.obj)
        if change.type == "DELETED":
            return ("DELETED", change.obj) if was or now else None
        if now:
            return ("MODIFIED" if was else "ADDED", change.obj)
        return ("DELETED", change.obj) if was else None

    def offer(self, change: Change) -> None:
        event = self.translate(change)
        if event is not None:
            self.events.put((event[0], copy.deepcopy(event[1])))


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = obj.setdefault("metadata", {})
    return meta


class Store:
    """All objects of the double, guarded by one re-entrant lock."""

    def __init__(self, *, history_limit: int = 10_000, ca_pem: str = "") -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = 1000
        self.compacted_rv = self.rv
        self.history_limit = history_limit
        self.graceful_pod_deletion = False
        self.ca_pem = ca_pem
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {name: {} for name in RESOURCES}
        self._history: deque[Change] = deque()
        self._watchers: set[Watcher] = set()
        # The disruption controller (disruption.py): budgets whose status a test pinned,
        # controller scales a test set (by controller uid), and a guard against re-entry.
        self.pinned_budgets: set[Key] = set()
        self.controller_scales: dict[str, int] = {}
        self._reconciling = False

    # -- reads -------------------------------------------------------------------------------

    def lookup(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self._objects[resource].get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def items(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(self._objects[resource].items())
                if namespace is None or ns == namespace
            ]

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        found = self.lookup(resource, namespace, name)
        if found is None:
            raise ApiError.not_found(resource, name, RESOURCES[resource].group)
        return found

    def list(
        self,
        resource: str,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        limit: int = 0,
        continue_: str = "",
    ) -> dict[str, Any]:
        kind = RESOURCES[resource]
        with self.lock:
            matching = [
                obj
                for obj in self.items(resource, namespace)
                if labels.matches(_meta(obj).get("labels")) and fields.matches(obj)
            ]
            rv = self.rv
        try:
            start = int(base64.b64decode(continue_).decode().split(":")[1]) if continue_ else 0
        except (ValueError, IndexError) as exc:
            raise ApiError(400, "BadRequest", "continue key is not valid") from exc
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        page = matching[start:]
        if limit and len(page) > limit:
            page = page[:limit]
            meta["continue"] = base64.b64encode(f"{rv}:{start + limit}".encode()).decode()
            meta["remainingItemCount"] = len(matching) - start - limit
        return {
            "kind": f"{kind.kind}List",
            "apiVersion": kind.api_version,
            "metadata": meta,
            "items": page,
        }

    # -- writes ------------------------------------------------------------------------------

    def _commit(
        self, resource: str, obj: dict[str, Any], old: dict[str, Any] | None, type_: str
    ) -> dict[str, Any]:
        meta = _meta(obj)
        key = (meta.get("namespace", ""), meta["name"])
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        if type_ == "DELETED":
            self._objects[resource].pop(key, None)
        else:
            self._objects[resource][key] = obj
        change = Change(self.rv, resource, key[0], type_, copy.deepcopy(obj), copy.deepcopy(old))
        self._history.append(change)
        while len(self._history) > self.history_limit:
            self.compacted_rv = self._history.popleft().rv
        for watcher in list(self._watchers):
            watcher.offer(change)
        self.changed.notify_all()
        committed = copy.deepcopy(obj)
        if resource == "poddisruptionbudgets" and type_ == "DELETED":
            self.pinned_budgets.discard(key)
        if resource in ("pods", "poddisruptionbudgets") and not self._reconciling:
            self.reconcile_budgets(key[0])
        return committed

    def reconcile_budgets(self, namespace: str) -> None:
        """Write the status the disruption controller would compute for each unpinned budget."""
        if not any(ns == namespace for ns, _ in self._objects["poddisruptionbudgets"]):
            return
        self._reconciling = True
        try:
            pods = self.items("pods", namespace)
            for pdb in self.items("poddisruptionbudgets", namespace):
                if (namespace, pdb["metadata"]["name"]) in self.pinned_budgets:
                    continue
                wanted = disruption.status(pdb, pods, scales=self.controller_scales)
                if wanted != pdb.get("status"):
                    old = copy.deepcopy(pdb)
                    pdb["status"] = wanted
                    self._commit("poddisruptionbudgets", pdb, old, "MODIFIED")
        finally:
            self._reconciling = False

    def create(
        self, resource: str, namespace: str, body: dict[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        """POST: defaults, admission, validation, 409 on a duplicate; ``dry_run`` stores nothing.

        Raises:
            ApiError: 400, 403, 404 (namespace), 409 AlreadyExists, 422.
        """
        kind = RESOURCES[resource]
        obj = copy.deepcopy(body)
        obj["kind"], obj["apiVersion"] = kind.kind, kind.api_version
        meta = _meta(obj)
        for field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(field, None)
        if kind.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + objects.random_suffix()
        with self.lock:
            if kind.namespaced and self.lookup("namespaces", "", namespace) is None:
                raise ApiError.not_found("namespaces", namespace)
            admission.admit(kind.name, obj, namespace, self.lookup, self.items)
            objects.validate_metadata(kind.kind, meta, dns_label=resource == "namespaces")
            admission.validate(kind.name, obj)
            if self.lookup(resource, meta.get("namespace", ""), meta["name"]) is not None:
                raise ApiError.already_exists(resource, meta["name"], kind.group)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = objects.now()
            meta["generation"] = 1
            if resource == "poddisruptionbudgets" and (namespace, meta["name"]) not in (
                self.pinned_budgets
            ):
                # The API drops a posted status; the disruption controller writes it.
                obj["status"] = disruption.status(
                    obj, self.items("pods", namespace), scales=self.controller_scales
                )
            if dry_run:
                return copy.deepcopy(obj)
            created = self._commit(resource, obj, None, "ADDED")
            if resource == "namespaces":
                self._populate_namespace(meta["name"])
            return created

    def _populate_namespace(self, namespace: str) -> None:
        self.create("serviceaccounts", namespace, {"metadata": {"name": "default"}})
        self.create(
            "configmaps",
            namespace,
            {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": self.ca_pem}},
        )

    def update(
        self,
        resource: str,
        namespace: str,
        name: str,
        change: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PUT or PATCH: ``change`` maps the current object to the requested one.

        Raises:
            ApiError: 404, 409 (stale resourceVersion or UID precondition), 422.
        """
        kind = RESOURCES[resource]
        with self.lock:
            old = self.get(resource, namespace, name)
            new = change(copy.deepcopy(old))
            new_meta = _meta(new)
            old_meta = old["metadata"]
            wanted_rv = new_meta.get("resourceVersion")
            if wanted_rv not in (None, "", old_meta["resourceVersion"]):
                raise ApiError.conflict(
                    resource,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                    kind.group,
                )
            if new_meta.get("uid") not in (None, "", old_meta["uid"]):
                raise ApiError.conflict(
                    resource,
                    name,
                    f"Precondition failed: UID in precondition: {new_meta['uid']}, UID in object meta: {old_meta['uid']}",
                    kind.group,
                )
            if subresource == "status":
                result = copy.deepcopy(old)
                result["status"] = new.get("status", {})
            else:
                result = new
                if "status" in kind.subresources:
                    result["status"] = copy.deepcopy(old.get("status"))
                    if result["status"] is None:
                        result.pop("status")
                for field in (
                    "uid",
                    "creationTimestamp",
                    "name",
                    "namespace",
                    "deletionTimestamp",
                    "generation",
                ):
                    if field in old_meta:
                        result["metadata"][field] = old_meta[field]
                    else:
                        result["metadata"].pop(field, None)
                # A binding (the scheduler setting nodeName) is not a spec change by the user.
                if (
                    kind.has_spec
                    and subresource != "binding"
                    and result.get("spec") != old.get("spec")
                ):
                    result["metadata"]["generation"] = old_meta.get("generation", 1) + 1
                objects.validate_metadata(
                    kind.kind, result["metadata"], dns_label=resource == "namespaces"
                )
                if resource == "poddisruptionbudgets":
                    disruption.validate(result)
            result["kind"], result["apiVersion"] = kind.kind, kind.api_version
            if resource == "nodes":
                admission.reconcile_node(result)
            if result == old or dry_run:
                return result
            return self._commit(resource, result, old, "MODIFIED")

    def delete(
        self,
        resource: str,
        namespace: str,
        name: str,
        options: dict[str, Any] | None,
        *,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """DELETE with optional ``preconditions`` (kubernetes.md §5.1).

        Returns the deleted (or terminating) object.

        Raises:
            ApiError: 404 NotFound, 409 Conflict with the exact precondition message.
        """
        kind = RESOURCES[resource]
        options = options or {}
        with self.lock:
            current = self.get(resource, namespace, name)
            meta = current["metadata"]
            preconditions = options.get("preconditions") or {}
            for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
                wanted = preconditions.get(field)
                if wanted is not None and wanted != meta.get(field):
                    raise ApiError.conflict(
                        resource,
                        name,
                        f"Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {meta.get(field)}",
                        kind.group,
                    )
            if dry_run:
                return current
            grace = options.get("gracePeriodSeconds")
            if grace is None:
                grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            if (
                resource == "pods"
                and self.graceful_pod_deletion
                and grace > 0
                and current["spec"].get("nodeName")
                and current.get("status", {}).get("phase") not in ("Succeeded", "Failed")
            ):
                if "deletionTimestamp" in meta:
                    return current
                meta["deletionTimestamp"] = objects.now()
                meta["deletionGracePeriodSeconds"] = grace
                return self._commit(
                    resource, current, self.lookup(resource, namespace, name), "MODIFIED"
                )
            if resource == "namespaces":
                for other, spec in RESOURCES.items():
                    if spec.namespaced:
                        for obj in self.items(other, name):
                            self._commit(other, obj, obj, "DELETED")
            return self._commit(resource, current, current, "DELETED")

    def remove(self, resource: str, namespace: str, name: str) -> None:
        """Finish a deletion at once (the kubelet confirming a terminating pod)."""
        with self.lock:
            current = self.get(resource, namespace, name)
            self._commit(resource, current, current, "DELETED")

    # -- watch -------------------------------------------------------------------------------

    def watch(
        self,
        resource: str,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        resource_version: str | None,
    ) -> tuple[Watcher, int]:
        """Register a watcher, pre-loaded with the snapshot or the replayed history.

        Returns the watcher and the number of snapshot events queued.

        Raises:
            ApiError: 410 Expired when ``resource_version`` is older than the retained history.
        """
        watcher = Watcher(resource, namespace, labels, fields)
        with self.lock:
            if resource_version in (None, "", "0"):
                for obj in self.items(resource, namespace):
                    if watcher.matches(obj):
                        watcher.events.put(("ADDED", obj))
            else:
                try:
                    since = int(resource_version)
                except ValueError as exc:
                    raise ApiError(
                        400, "BadRequest", f'invalid resource version "{resource_version}"'
                    ) from exc
                if since < self.compacted_rv:
                    raise ApiError(
                        410,
                        "Expired",
                        f"too old resource version: {since} ({self.compacted_rv + 1})",
                    )
                for change in self._history:
                    if change.rv > since:
                        watcher.offer(change)
            self._watchers.add(watcher)
            return watcher, watcher.events.qsize()

    def unwatch(self, watcher: Watcher) -> None:
        with self.lock:
            self._watchers.discard(watcher)

    def close_watchers(self) -> None:
        with self.lock:
            for watcher in self._watchers:
                watcher.events.put(None)
            self._watchers.clear()

    def compact(self) -> None:
        """Forget the change history: any watch from an older resourceVersion answers 410."""
        with self.lock:
            self._history.clear()
            self.compacted_rv = self.rv
