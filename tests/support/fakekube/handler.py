"""The request handler of the double: routing, authentication, RBAC denials, faults, watch streaming.

Requests pass, in order: body read, recording, scripted faults, bearer-token
authentication (an unknown token is a 401 everywhere, as on a real server),
then the public endpoints (``/version``, ``/readyz``, ``/livez``,
``/healthz``: anonymous allowed), discovery, and the resource API (denied
for anonymous users and for denied ``(user, verb, resource)`` triples).
Responses are HTTP/1.1 with Content-Length; watches stream chunked JSON lines.
"""

from __future__ import annotations

import json
import queue
import socket
import struct
import time
import traceback
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.support.fakekube import resources, system
from tests.support.fakekube.errors import REASONS, ApiError
from tests.support.fakekube.faults import RequestRecord
from tests.support.fakekube.patch import apply_patch
from tests.support.fakekube.resources import RESOURCES
from tests.support.fakekube.selectors import FieldSelector, LabelSelector

if TYPE_CHECKING:
    from tests.support.fakekube.server import Backend, Server

__all__ = ["ANONYMOUS", "Handler"]

ANONYMOUS = "system:anonymous"
HOLD_LIMIT = 60.0  # a held /readyz answers anyway after this long (a test that forgot)
_INVALID = object()


class _Reset(Exception):
    """Drop the connection without an answer."""


class Handler(BaseHTTPRequestHandler):
    """One connection's requests, answered from the ``Backend``."""

    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    # -- plumbing ----------------------------------------------------------------------------

    @property
    def backend(self) -> Backend:
        return self.server.backend

    def _send(
        self, code: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._record.status = code

    def _json(self, code: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(code, json.dumps(obj).encode(), "application/json", headers)

    def _text(self, code: int, text: str, headers: dict[str, str] | None = None) -> None:
        self._send(
            code,
            text.encode(),
            "text/plain; charset=utf-8",
            {"X-Content-Type-Options": "nosniff", **(headers or {})},
        )

    def _error(self, error: ApiError) -> None:
        headers = {"Retry-After": str(error.retry_after)} if error.retry_after is not None else None
        self._json(error.code, error.body(), headers)

    def _reset(self) -> None:
        self._record.outcome = "reset"
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    def _user(self) -> object:
        header = self.headers.get("Authorization", "")
        if not header:
            return ANONYMOUS
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or token not in self.backend.tokens:
            return _INVALID
        return self.backend.tokens[token]

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        user = self._user()
        self._record = RequestRecord(
            self.command,
            split.path,
            split.query,
            user if isinstance(user, str) else "<invalid>",
            time.monotonic(),
        )
        self.backend.requests.append(self._record)
        try:
            target = f"{split.path}?{split.query}" if split.query else split.path
            fault = self.backend.faults.take(self.command, target)
            if fault is not None:
                time.sleep(fault.delay)
                if fault.action == "reset":
                    raise _Reset
                if fault.action == "status":
                    self._record.outcome = "fault"
                    message = fault.message or _fault_message(fault.status)
                    raise ApiError(
                        fault.status,
                        REASONS.get(fault.status, "Unknown"),
                        message,
                        retry_after=fault.retry_after,
                    )
            if user is _INVALID:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            assert isinstance(user, str)
            params = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
            body = json.loads(raw) if raw.strip() else None
            self._route(split.path.rstrip("/") or "/", params, body, user)
        except _Reset:
            self._reset()
        except ApiError as error:
            self._error(error)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except json.JSONDecodeError as exc:
            self._error(ApiError(400, "BadRequest", f"the request body is not valid JSON: {exc}"))
        except (
            Exception
        ) as exc:  # a bug in the double answers 500, visibly, instead of hanging the client
            traceback.print_exc()
            self._error(ApiError(500, "InternalError", f"fakekube internal error: {exc!r}"))

    # -- routing -----------------------------------------------------------------------------

    def _route(self, path: str, params: dict[str, str], body: Any, user: str) -> None:
        head = path.split("/")[1] if path != "/" else ""
        if path == "/version":
            self._json(200, self.backend.version)
        elif head in ("readyz", "livez", "healthz"):
            self._health(path, params)
        elif path.startswith("/api/v1/") or (path.startswith("/apis/") and path.count("/") >= 4):
            self._resource(path, params, body, user)
        elif user == ANONYMOUS:
            raise ApiError(
                403, "Forbidden", f'forbidden: User "{ANONYMOUS}" cannot get path "{path}"'
            )
        elif path == "/api":
            self._json(200, resources.api_versions(self.backend.server_address))
        elif path == "/apis":
            self._json(200, resources.group_list())
        elif path == "/api/v1":
            self._json(200, resources.api_resource_list("", "v1"))
        elif path.startswith("/apis/") and path.count("/") == 2 and path[6:] in resources.GROUPS:
            self._json(200, resources.group(path[6:]))
        elif (
            path.startswith("/apis/")
            and path.count("/") == 3
            and path[6:].split("/")[0] in resources.GROUPS
        ):
            group, version = path[6:].split("/")
            if resources.GROUPS[group] != version:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            self._json(200, resources.api_resource_list(group, version))
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _health(self, path: str, params: dict[str, str]) -> None:
        parts = path.strip("/").split("/", 1)
        kind = parts[0]
        if kind == "readyz" and len(parts) == 1:
            answer = self.backend.readyz.next()
            time.sleep(answer.delay)
            if answer.reached is not None and answer.release is not None:
                answer.reached.set()  # the test's event: the request is being held now
                answer.release.wait(HOLD_LIMIT)
            if answer.drop:
                raise _Reset
            if answer.status == 429:
                self._text(429, "Too many requests, please try again later.\n")
                return
            if answer.status in (401, 403):
                raise ApiError(answer.status, REASONS[answer.status], REASONS[answer.status])
            ok = answer.status == 200
            code = answer.status
        else:
            ok, code = True, 200
        if len(parts) == 2:
            if not system.known_check(kind, parts[1]):
                self._text(404, "404 page not found\n")
            elif ok:
                self._text(200, "ok")
            else:
                self._text(code, f"internal server error: {parts[1]} failed\n")
            return
        exclude = parse_qs(urlsplit(self.path).query).get("exclude", [])
        self._text(
            code, system.health_body(kind, verbose="verbose" in params, exclude=exclude, ok=ok)
        )

    def _resource(self, path: str, params: dict[str, str], body: Any, user: str) -> None:
        segments = path.strip("/").split("/")
        if segments[0] == "api":
            group, rest = "", segments[2:]
        else:
            group, rest = segments[1], segments[3:]
        watch_prefix = bool(rest) and rest[0] == "watch"
        if watch_prefix:
            rest = rest[1:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        kind = RESOURCES.get(rest[0]) if rest else None
        if (
            kind is None
            or kind.group != group
            or len(rest) > 3
            or (sub and sub not in kind.subresources)
        ):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not kind.namespaced and namespace is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        ns = namespace if kind.namespaced else ""
        watching = watch_prefix or params.get("watch") in ("true", "1")
        verb = _verb(self.command, name, watching)
        if verb == "create" and ns is None:
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        self._authorize(user, verb, kind.name, sub, group, name, namespace, kind.namespaced)
        store = self.backend.store
        if verb in ("list", "watch", "deletecollection"):
            labels = LabelSelector(params.get("labelSelector"))
            fields = FieldSelector(params.get("fieldSelector"), kind.name)
            if verb == "watch":
                self._watch(kind.name, namespace, labels, fields, params)
            elif verb == "list":
                listing = store.list(
                    kind.name,
                    namespace,
                    labels,
                    fields,
                    limit=int(params.get("limit") or 0),
                    continue_=params.get("continue", ""),
                )
                self._respond(kind.name, listing["items"], listing, params, single=False)
            else:
                for obj in store.list(kind.name, namespace, labels, fields)["items"]:
                    store.delete(kind.name, ns or "", obj["metadata"]["name"], body)
                self._json(
                    200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
                )
            return
        self._item(verb, kind.name, ns or "", name or "", sub, body, params)

    def _item(
        self,
        verb: str,
        resource: str,
        ns: str,
        name: str,
        sub: str | None,
        body: Any,
        params: dict[str, str],
    ) -> None:
        """create, get, update, patch or delete one object (or read ``pods/log``)."""
        store = self.backend.store
        dry_run = params.get("dryRun", "") == "All"
        if params.get("dryRun", "All") != "All":
            raise ApiError(400, "BadRequest", f'invalid dry run option: "{params["dryRun"]}"')
        if sub == "log":
            if store.lookup("pods", ns, name) is None:
                raise ApiError.not_found("pods", name)
            self._text(200, self.backend.logs.get((ns, name), ""))
        elif verb == "create":
            self._json(201, store.create(resource, ns, body or {}, dry_run=dry_run))
        elif verb == "get":
            obj = store.get(resource, ns, name)
            self._respond(resource, [obj], obj, params, single=True)
        elif verb in ("update", "patch"):
            content_type = self.headers.get("Content-Type", "")

            def change(old: dict[str, Any]) -> dict[str, Any]:
                if verb == "update":
                    return dict(body or {})
                return apply_patch(old, body, content_type)

            updated = store.update(resource, ns, name, change, subresource=sub, dry_run=dry_run)
            self._json(200, updated)
        else:
            options = dict(body or {})
            if "gracePeriodSeconds" in params:
                options["gracePeriodSeconds"] = int(params["gracePeriodSeconds"])
            deleted = store.delete(resource, ns, name, options, dry_run=dry_run)
            if resource in ("pods", "nodes", "namespaces"):
                self._json(200, deleted)
                return
            group = RESOURCES[resource].group
            details = {"name": name, "kind": resource, "uid": deleted["metadata"]["uid"]}
            if group:
                details["group"] = group
            success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
            self._json(200, {**success, "details": details})

    def _respond(
        self,
        resource: str,
        items: list[dict[str, Any]],
        obj: dict[str, Any],
        params: dict[str, str],
        *,
        single: bool,
    ) -> None:
        if "as=Table" in self.headers.get("Accept", ""):
            rv = obj["metadata"].get("resourceVersion", "")
            self._json(
                200, system.table(resource, items, rv, params.get("includeObject", "Metadata"))
            )
        else:
            self._json(200, obj)

    def _authorize(
        self,
        user: str,
        verb: str,
        resource: str,
        sub: str | None,
        group: str,
        name: str | None,
        namespace: str | None,
        namespaced: bool,
    ) -> None:
        full = f"{resource}/{sub}" if sub else resource
        denied = user == ANONYMOUS or self.backend.denied(user, verb, full)
        if not denied:
            return
        qualified = f"{resource}.{group}" if group else resource
        subject = f'{qualified} "{name}"' if name else qualified
        scope = (
            f'in the namespace "{namespace}"'
            if namespaced and namespace
            else "at the cluster scope"
        )
        raise ApiError(
            403,
            "Forbidden",
            f'{subject} is forbidden: User "{user}" cannot {verb} resource "{full}" in API group "{group}" {scope}',
            name=name,
            kind=resource,
            group=group,
        )

    # -- watch -------------------------------------------------------------------------------

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _event(self, type_: str, obj: dict[str, Any]) -> None:
        self._chunk(json.dumps({"type": type_, "object": obj}).encode() + b"\n")

    def _watch(
        self,
        resource: str,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        params: dict[str, str],
    ) -> None:
        store = self.backend.store
        kind = RESOURCES[resource]
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        bookmarks = params.get("allowWatchBookmarks") == "true"
        initial_end = params.get("sendInitialEvents") == "true"
        rv = None if initial_end else params.get("resourceVersion")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self._record.status = 200
        try:
            watcher, initial = store.watch(resource, namespace, labels, fields, rv)
        except ApiError as error:
            self._event("ERROR", error.body())
            self._chunk(b"")
            return
        deadline = time.monotonic() + timeout if timeout is not None else None
        sent = 0
        try:
            if initial_end and initial == 0:
                self._bookmark(kind.kind, kind.api_version, initial_end=True)
            while not self.backend.stopping.is_set():
                wait = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
                if wait <= 0:
                    break
                try:
                    item = watcher.events.get(timeout=wait)
                except queue.Empty:
                    continue
                if item is None:
                    break
                self._event(*item)
                sent += 1
                if initial_end and sent == initial:
                    self._bookmark(kind.kind, kind.api_version, initial_end=True)
            if bookmarks and not self.backend.stopping.is_set():
                self._bookmark(kind.kind, kind.api_version, initial_end=False)
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        finally:
            store.unwatch(watcher)

    def _bookmark(self, kind: str, api_version: str, *, initial_end: bool) -> None:
        meta: dict[str, Any] = {"resourceVersion": str(self.backend.store.rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        self._event("BOOKMARK", {"kind": kind, "apiVersion": api_version, "metadata": meta})


def _verb(method: str, name: str | None, watching: bool) -> str:
    if method in ("GET", "HEAD"):
        if name is None:
            return "watch" if watching else "list"
        return "get"
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    if method == "DELETE" and name is None:
        return "deletecollection"
    if method == "POST" and name is not None:
        raise ApiError(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    if method in ("PUT", "PATCH") and name is None:
        raise ApiError(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    return verbs[method]


def _fault_message(status: int) -> str:
    if status == 429:
        return "Too many requests, please try again later."
    if status == 504:
        return "Timeout: request did not complete within the allotted timeout"
    if status >= 500:
        return "Internal error occurred: injected by fakekube"
    return REASONS.get(status, "Unknown")
