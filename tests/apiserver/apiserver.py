#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A small Kubernetes API server for egw's control-plane tests.

It serves the kinds egw reads (Node, Service, EndpointSlice, EgressService, Lease, and for EgressIP:
EgressIP, Namespace, Pod; EgressFirewall; DNSNameResolver, which no state source of egw watches
yet; EgressQoS) the way kube-apiserver does over JSON, from an in-memory multi-version
store that behaves like etcd: one global resourceVersion counter, every write gets the next
revision, and history is kept until it is compacted.

Protocol points it reproduces:
  * list: resourceVersion of the list, limit + continue (each page is read from the snapshot of the
    first page), remainingItemCount, 410 Expired for a continue token older than the compaction
    point, 400 for resourceVersion together with continue; items of built-in kinds carry no
    kind/apiVersion (custom resources do), as on a real server.
  * watch (?watch=true): a chunked stream of newline-terminated JSON events ADDED, MODIFIED,
    DELETED, BOOKMARK (allowWatchBookmarks=true) and ERROR; from resourceVersion R it replays the
    history after R; without one (or "0") it first sends the current objects as ADDED; R older than
    the compaction point gives 410 (an HTTP status, or an ERROR event: --watch-expired-as);
    timeoutSeconds ends the stream cleanly; labelSelector turns objects entering/leaving the
    selection into ADDED/DELETED.
  * a bounded watch cache (--watch-cache-window): a watch resumes only from within the last N
    events of its resource, so a resume after a long disconnect gets 410; 410s are sent as an
    ERROR event in a 200 stream by default, as the watch cache does (--watch-expired-as http: an
    HTTP 410).
  * a cluster's own activity: LoadBalancer Services carry the service controller's finalizer, so a
    delete is a MODIFIED with deletionTimestamp and, --finalizer-delay later, a MODIFIED without
    the finalizer and the DELETED; Node heartbeats (--node-heartbeat) update lastHeartbeatTime of
    every Node condition, events that change nothing egw cares about.
  * get, create (POST, 409 AlreadyExists), update (PUT, resourceVersion precondition -> 409
    Conflict), patch (merge-patch+json, json-patch+json, and strategic-merge-patch+json for
    built-in kinds only; 415 otherwise), delete.
  * the status subresource of Node, Service, EgressService, EgressFirewall, DNSNameResolver, EgressQoS and Pod: a write to the main resource keeps
    the stored status, a write to /status changes only status. EgressIP has none (upstream's CRD
    declares no subresources): its status is written with the object, and /status is 404.
    metadata.generation counts changes of custom resources other than metadata (and status, where
    it is a subresource). Writes that change nothing do not create a revision.
  * bearer-token authentication (--token as --token-user, --admin-token unrestricted), and client
    certificates over TLS (--client-ca, the user is the common name); errors are Status objects
    (kind Status, code, reason, message, details).
  * validation of writes as kube-apiserver does it (validation.py): label keys and values, the
    EgressService CRD's schema (docker/k8s/crd-egressservice.yaml; unknown fields pruned), the
    EgressIP CRD's (docker/k8s/crd-egressip.yaml; unknown fields refused, as fieldValidation=Strict
    does), the EgressFirewall CRD's (tests/apiserver/crd-egressfirewall.yaml), the DNSNameResolver
    CRD's (tests/apiserver/crd-dnsnameresolver.yaml; strict, like EgressIP's), the EgressQoS CRD's
    (tests/apiserver/crd-egressqos.yaml, strict as EgressIP's), Lease
    fields and MicroTime; 422 Invalid with details.causes, or 400 for an undecodable body.
  * RBAC authorization (--rbac docker/k8s/rbac.yaml, authz.py): a request outside the rules gets
    403 Forbidden with kube-apiserver's message.

The test-only control API lives under /_test/ (never on a real server; no authentication):
  POST /_test/upsert       an object (with apiVersion/kind), created or replaced as given (status too)
  POST /_test/delete       {"kind", "namespace", "name"}
  POST /_test/compact      {"resourceVersion": R (default: current), "expireWatches": bool}
  POST /_test/bookmark     send a BOOKMARK now on every watch that asked for bookmarks
  POST /_test/close-watches  end every open watch now, cleanly (like a server-side timeout) or,
                           with {"abort": true}, by dropping the connection
  POST /_test/faults       {"errors": [{"count", "code", "path", "verb"}],
                            "delays": [{"count", "ms", "path", "verb"}],
                            "cuts":   [{"count", "afterBytes" | "afterEvents", "path"}]}
                           (rules are appended; "clear": true removes all first)
  POST /_test/config       {"token", "bookmarkInterval", "chunkSize", "watchExpiredAs",
                            "watchCacheWindow", "nodeHeartbeat", "finalizerDelay",
                            "rbac": a file of RBAC objects to authorize with from now on, or null}
  GET  /_test/requests     every API request seen, in arrival order: [{"verb", "path", "code", "user"}]
                           (code 0 while unanswered; a watch has 200 once its stream is open)
                           and counts per verb
  POST /_test/requests/reset
  GET  /_test/state        {"resourceVersion", "compacted", "watches", "objects"}
  POST /_test/disrupt, GET /_test/history   outages, RBAC refusals and stale watches: see
                           "Disruptions" below

Python 3 with python3-yaml and python3-jsonschema (Debian packages; scripts/deps.sh). Listens on
127.0.0.1.
"""

import argparse
import base64
import bisect
import copy
import json
import os
import random
import signal
import socket
import ssl
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import authz
import validation

# The user of --admin-token: a member of system:masters, whom RBAC does not restrict.
ADMIN = "system:admin"
# What the service controller puts on a LoadBalancer Service, so that deleting one is a MODIFIED
# with deletionTimestamp first, and a DELETED once the controller has cleaned up.
LB_FINALIZER = "service.kubernetes.io/load-balancer-cleanup"


# --------------------------------------------------------------------------------------------
# Resources


class Resource:
    def __init__(self, group, version, plural, kind, namespaced, status, builtin):
        self.group = group
        self.version = version
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced
        self.status = status        # has a status subresource
        self.builtin = builtin      # compiled-in type (strategic merge patch, no kind in list items)

    @property
    def api_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self):
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def prefix(self):
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


RESOURCES = [
    Resource("", "v1", "nodes", "Node", False, True, True),
    Resource("", "v1", "services", "Service", True, True, True),
    Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True, False, True),
    Resource("k8s.ovn.org", "v1", "egressservices", "EgressService", True, True, False),
    Resource("k8s.ovn.org", "v1", "egressfirewalls", "EgressFirewall", True, True, False),
    Resource("network.openshift.io", "v1alpha1", "dnsnameresolvers", "DNSNameResolver", True, True, False),
    Resource("k8s.ovn.org", "v1", "egressqoses", "EgressQoS", True, True, False),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True, False, True),
    Resource("k8s.ovn.org", "v1", "egressips", "EgressIP", False, False, False),
    Resource("", "v1", "namespaces", "Namespace", False, False, True),
    Resource("", "v1", "pods", "Pod", True, True, True),
]
BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
BY_KIND = {r.kind: r for r in RESOURCES}

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """An error answered as a metav1.Status."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self):
        s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
             "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            s["details"] = self.details
        return s


def not_found(res, name):
    details = {"name": name, "kind": res.plural}
    if res.group:
        details["group"] = res.group
    return ApiError(404, "NotFound", f'{res.group_resource} "{name}" not found', details)


def expired(message):
    return ApiError(410, "Expired", message)


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# --------------------------------------------------------------------------------------------
# Label selectors (the string form of ?labelSelector=)


def parse_selector(text):
    """Returns a list of (key, op, values) requirements; raises ApiError on a malformed one."""
    reqs = []
    if not text:
        return reqs
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for p in (x.strip() for x in parts):
        if not p:
            raise ApiError(400, "BadRequest", f'unable to parse requirement: found "", in "{text}"')
        words = p.split()
        if len(words) >= 2 and words[1] in ("in", "notin"):
            rest = p.split(None, 2)[2].strip() if len(words) > 2 else ""
            if not (rest.startswith("(") and rest.endswith(")")):
                raise ApiError(400, "BadRequest", f"unable to parse requirement: {p}")
            vals = [v.strip() for v in rest[1:-1].split(",") if v.strip()]
            reqs.append((words[0], words[1], vals))
        elif "!=" in p:
            k, v = p.split("!=", 1)
            reqs.append((k.strip(), "!=", [v.strip()]))
        elif "==" in p:
            k, v = p.split("==", 1)
            reqs.append((k.strip(), "=", [v.strip()]))
        elif "=" in p:
            k, v = p.split("=", 1)
            reqs.append((k.strip(), "=", [v.strip()]))
        elif p.startswith("!"):
            reqs.append((p[1:].strip(), "!exists", []))
        else:
            reqs.append((p, "exists", []))
    return reqs


def check_label_requirements(reqs, text):
    """A real server refuses keys and values that are not valid label keys and values."""
    for key, op, vals in reqs:
        problems = validation.qualified_name_errors(key)
        for v in vals:
            problems += validation.label_value_errors(v)
        if problems:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {problems[0]} (in {text!r})")
    return reqs


# Fields a fieldSelector may name, beyond metadata.name and metadata.namespace (as kube-apiserver's
# field label conversion functions for these kinds allow).
SELECTABLE_FIELDS = {
    "Node": ("spec.unschedulable",),
    "Service": ("spec.clusterIP", "spec.type"),
}


def field_value(obj, path):
    cur = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if cur is None else str(cur)


def parse_field_selector(text, res):
    """[(field, op, value)] of ?fieldSelector=; 400 for a field this kind cannot be selected on
    (never silently ignored) or a malformed term."""
    reqs = []
    if not text:
        return reqs
    allowed = ("metadata.name", "metadata.namespace") + SELECTABLE_FIELDS.get(res.kind, ())
    for term in text.split(","):
        for op in ("!=", "==", "="):
            if op in term:
                field, value = term.split(op, 1)
                break
        else:
            raise ApiError(400, "BadRequest", f"invalid field selector: {term!r}: no operator")
        field = field.strip()
        if field not in allowed:
            if res.builtin:
                msg = f'field label not supported: {field}'
            else:
                msg = (f'"{field}" is not a known field selector: only "metadata.name", '
                       '"metadata.namespace"')
            raise ApiError(400, "BadRequest", msg)
        reqs.append((field, "!=" if op == "!=" else "=", value.strip()))
    return reqs


def field_selector_matches(reqs, obj):
    for field, op, value in reqs:
        if (field_value(obj, field) == value) != (op == "="):
            return False
    return True


def selector_matches(reqs, obj):
    """Label requirements, and field requirements after a None entry (parse_selectors)."""
    if None in reqs:
        i = reqs.index(None)
        return selector_matches(reqs[:i], obj) and field_selector_matches(reqs[i + 1:], obj)
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key, op, vals in reqs:
        present = key in labels
        if op == "=" and labels.get(key) != vals[0]:
            return False
        if op == "!=" and present and labels[key] == vals[0]:
            return False
        if op == "in" and (not present or labels[key] not in vals):
            return False
        if op == "notin" and present and labels[key] in vals:
            return False
        if op == "exists" and not present:
            return False
        if op == "!exists" and present:
            return False
    return True


# --------------------------------------------------------------------------------------------
# Patches


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"invalid JSON pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _walk(doc, tokens):
    cur = doc
    for t in tokens:
        if isinstance(cur, dict) and t in cur:
            cur = cur[t]
        elif isinstance(cur, list) and t.isdigit() and int(t) < len(cur):
            cur = cur[int(t)]
        else:
            raise ApiError(422, "Invalid", f"the path {'/' + '/'.join(tokens)!r} does not exist")
    return cur


def _json_patch_add(doc, tokens, value):
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise ApiError(422, "Invalid", f"invalid array index {last!r}")
    else:
        raise ApiError(422, "Invalid", "cannot add to a scalar")
    return doc


def _json_patch_remove(doc, tokens):
    if not tokens:
        raise ApiError(422, "Invalid", "cannot remove the whole document")
    parent = _walk(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise ApiError(422, "Invalid", f"the path {'/' + '/'.join(tokens)!r} does not exist")


def json_patch(doc, ops):
    """RFC 6902 JSON patch."""
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, "BadRequest", f"invalid JSON patch operation: {op!r}")
        tokens = _pointer(op["path"])
        kind = op["op"]
        if kind == "add":
            doc = _json_patch_add(doc, tokens, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _json_patch_remove(doc, tokens)
        elif kind == "replace":
            _json_patch_remove(doc, tokens)
            doc = _json_patch_add(doc, tokens, copy.deepcopy(op.get("value")))
        elif kind == "test":
            if _walk(doc, tokens) != op.get("value"):
                raise ApiError(422, "Invalid", f"testing value {op['path']} failed")
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, src))
            if kind == "move":
                _json_patch_remove(doc, src)
            doc = _json_patch_add(doc, tokens, value)
        else:
            raise ApiError(400, "BadRequest", f"unknown JSON patch operation {kind!r}")
    return doc


# --------------------------------------------------------------------------------------------
# The store


class Event:
    __slots__ = ("rv", "res", "ns", "type", "obj", "prev")

    def __init__(self, rv, res, ns, etype, obj, prev):
        self.rv = rv
        self.res = res
        self.ns = ns
        self.type = etype
        self.obj = obj
        self.prev = prev


class Store:
    """Objects, their versions and the event history, under one condition variable."""

    def __init__(self, first_rv=1000):
        self.cond = threading.Condition()
        self.rv = first_rv
        self.compacted = 0           # a watch from R needs R >= compacted
        self.objects = {}            # (plural, ns, name) -> current object
        self.versions = {}           # (plural, ns, name) -> [(rv, object or None)]
        self.history = []            # [Event], ordered by rv
        self.history_rvs = []        # rv of each history entry, for bisect
        self.watch_epoch = 0         # bumped to expire every open watch
        self.close_epoch = 0         # bumped to end every open watch (close_abort: cut it)
        self.close_abort = False
        self.bookmark_epoch = 0      # bumped to ask every watch for a bookmark now
        self.watches = 0
        self.shutdown = False
        # The watch cache: a watch can resume only from within the last `window` events of its
        # resource (0: unbounded); older resourceVersions get 410 even before any compaction.
        self.window = 0
        self.res_rvs = {}            # plural -> rvs of its events, ordered
        # Finalizers: objects marked for deletion, and when the simulated controller lets go.
        self.finalizer_delay = 0.3
        self.finalizing = []         # [(due monotonic, res, ns, name)]

    # -- writes (caller holds self.cond) --

    def _commit(self, res, ns, name, new_obj, etype):
        key = (res.plural, ns, name)
        prev = self.objects.get(key)
        self.rv += 1
        rv = self.rv
        if new_obj is None:
            self.objects.pop(key, None)
            obj = copy.deepcopy(prev)
            obj["metadata"]["resourceVersion"] = str(rv)
        else:
            new_obj["metadata"]["resourceVersion"] = str(rv)
            self.objects[key] = new_obj
            obj = new_obj
        self.versions.setdefault(key, []).append((rv, None if new_obj is None else new_obj))
        self.history.append(Event(rv, res, ns, etype, obj, prev))
        self.history_rvs.append(rv)
        self.res_rvs.setdefault(res.plural, []).append(rv)
        self.cond.notify_all()
        return obj

    def create(self, res, ns, obj):
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(
                random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        name = meta.get("name") or ""
        validate_name(res, name)
        if res.namespaced:
            if meta.get("namespace", ns) != ns:
                raise ApiError(400, "BadRequest", "the namespace of the provided object does not "
                               "match the namespace sent on the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        key = (res.plural, ns, name)
        if key in self.objects:
            details = {"name": name, "kind": res.plural}
            if res.group:
                details["group"] = res.group
            raise ApiError(409, "AlreadyExists",
                           f'{res.group_resource} "{name}" already exists', details)
        if res.status and res.kind != "Node":
            obj.pop("status", None)      # create cannot set status (Node's registration can)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta.pop("resourceVersion", None)
        meta.pop("deletionTimestamp", None)
        if not res.builtin:
            meta["generation"] = 1
        if res.kind == "Service" and (obj.get("spec") or {}).get("type") == "LoadBalancer":
            fins = meta.setdefault("finalizers", [])
            if LB_FINALIZER not in fins:
                fins.append(LB_FINALIZER)           # what the service controller adds
        obj["apiVersion"] = res.api_version
        obj["kind"] = res.kind
        obj = validate_write(res, name, obj)
        return copy.deepcopy(self._commit(res, ns, name, obj, "ADDED"))

    def _prepare_update(self, res, old, new, subresource):
        """Applies the rules of a write to the main resource or to /status; returns new."""
        if subresource == "status":
            merged = copy.deepcopy(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            return merged
        if res.status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        meta, old_meta = new.setdefault("metadata", {}), old["metadata"]
        for field in ("uid", "creationTimestamp"):
            if field in old_meta:
                meta[field] = old_meta[field]
        if not res.builtin:
            ignored = ("metadata", "status", "apiVersion", "kind") if res.status else ("metadata", "apiVersion", "kind")

            def spec_of(o):
                return {k: v for k, v in o.items() if k not in ignored}
            gen = old_meta.get("generation", 1)
            meta["generation"] = gen + 1 if spec_of(new) != spec_of(old) else gen
        new["apiVersion"] = res.api_version
        new["kind"] = res.kind
        return new

    def update(self, res, ns, name, obj, subresource, precondition_required):
        key = (res.plural, ns, name)
        old = self.objects.get(key)
        if old is None:
            raise not_found(res, name)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        if meta.get("name", name) != name:
            raise ApiError(400, "BadRequest",
                           "the name of the object does not match the name on the URL")
        if res.namespaced and meta.get("namespace", ns) != ns:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not "
                           "match the namespace sent on the request")
        rv = meta.get("resourceVersion") or ""
        if not rv and precondition_required:
            raise ApiError(422, "Invalid",
                           f'{res.kind}.{res.group} "{name}" is invalid: metadata.resourceVersion: '
                           "Invalid value: 0x0: must be specified for an update",
                           {"name": name, "group": res.group, "kind": res.kind,
                            "causes": [{"reason": "FieldValueInvalid",
                                        "message": "Invalid value: 0x0: must be specified for an update",
                                        "field": "metadata.resourceVersion"}]})
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        meta["name"] = name
        if res.namespaced:
            meta["namespace"] = ns
        new = self._prepare_update(res, old, copy.deepcopy(obj), subresource)
        return self._write_if_changed(res, ns, name, old, new)

    def patch(self, res, ns, name, content_type, patch, subresource):
        key = (res.plural, ns, name)
        old = self.objects.get(key)
        if old is None:
            raise not_found(res, name)
        if content_type == JSON_PATCH:
            patched = json_patch(old, patch)
        else:
            if not isinstance(patch, dict):
                raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
            patched = merge_patch(old, patch)
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise ApiError(422, "Invalid", "the patched object has no metadata")
        pmeta = patched["metadata"]
        if pmeta.get("name") != name or (res.namespaced and pmeta.get("namespace") != ns):
            raise ApiError(422, "Invalid", "metadata.name and metadata.namespace are immutable")
        rv = pmeta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        new = self._prepare_update(res, old, patched, subresource)
        return self._write_if_changed(res, ns, name, old, new)

    def _write_if_changed(self, res, ns, name, old, new):
        def strip(o):
            o = copy.deepcopy(o)
            o["metadata"].pop("resourceVersion", None)
            return o
        new = validate_write(res, name, new)
        if old["metadata"].get("deletionTimestamp"):
            new["metadata"]["deletionTimestamp"] = old["metadata"]["deletionTimestamp"]
            new["metadata"]["deletionGracePeriodSeconds"] = old["metadata"].get("deletionGracePeriodSeconds", 0)
        if strip(new) == strip(old):
            return copy.deepcopy(old)        # a no-op write makes no revision
        out = copy.deepcopy(self._commit(res, ns, name, new, "MODIFIED"))
        self._delete_if_released(res, ns, name, new)
        return out

    def delete(self, res, ns, name):
        """An object without finalizers goes at once (DELETED). One with finalizers is marked: a
        MODIFIED with metadata.deletionTimestamp, and it stays until its finalizers are removed;
        the load-balancer finalizer is removed by the simulated service controller after
        finalizer_delay seconds (MODIFIED without it, then DELETED), as on a cluster."""
        key = (res.plural, ns, name)
        obj = self.objects.get(key)
        if obj is None:
            raise not_found(res, name)
        if not obj["metadata"].get("finalizers"):
            return copy.deepcopy(self._commit(res, ns, name, None, "DELETED"))
        if obj["metadata"].get("deletionTimestamp"):
            return copy.deepcopy(obj)            # already being deleted
        marked = copy.deepcopy(obj)
        marked["metadata"]["deletionTimestamp"] = now_rfc3339()
        marked["metadata"]["deletionGracePeriodSeconds"] = 0
        out = self._commit(res, ns, name, marked, "MODIFIED")
        if LB_FINALIZER in marked["metadata"]["finalizers"]:
            self.finalizing.append((time.monotonic() + self.finalizer_delay, res, ns, name))
        return copy.deepcopy(out)

    def finish_deletions(self, now):
        """The service controller's part: drops the load-balancer finalizer of marked objects."""
        due = [f for f in self.finalizing if f[0] <= now]
        self.finalizing = [f for f in self.finalizing if f[0] > now]
        for _, res, ns, name in due:
            obj = self.objects.get((res.plural, ns, name))
            if obj is None or not obj["metadata"].get("deletionTimestamp"):
                continue
            new = copy.deepcopy(obj)
            new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != LB_FINALIZER]
            if not new["metadata"]["finalizers"]:
                del new["metadata"]["finalizers"]
            self._commit(res, ns, name, new, "MODIFIED")
            self._delete_if_released(res, ns, name, new)

    def _delete_if_released(self, res, ns, name, obj):
        """An object marked for deletion whose last finalizer is gone is deleted."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._commit(res, ns, name, None, "DELETED")
            return True
        return False

    def heartbeat(self):
        """The kubelets' part: every Node's conditions get a new lastHeartbeatTime."""
        now = now_rfc3339()
        res = BY_KIND["Node"]
        for (plural, ns, name), obj in list(self.objects.items()):
            if plural != "nodes":
                continue
            conds = (obj.get("status") or {}).get("conditions")
            if not isinstance(conds, list) or not conds:
                continue
            if all(isinstance(c, dict) and c.get("lastHeartbeatTime") == now for c in conds):
                continue
            new = copy.deepcopy(obj)
            for c in new["status"]["conditions"]:
                if isinstance(c, dict):
                    c["lastHeartbeatTime"] = now
            self._commit(res, ns, name, new, "MODIFIED")

    def too_old_for_window(self, res, rv):
        """The oldest resourceVersion a watch of res can resume from, when rv is older than that."""
        rvs = self.res_rvs.get(res.plural, [])
        if self.window <= 0 or len(rvs) <= self.window:
            return None
        oldest = rvs[-self.window]
        return oldest - 1 if rv < oldest - 1 else None

    def upsert_raw(self, obj):
        """Test control: create or replace as given, status included."""
        res = BY_KIND.get(obj.get("kind"))
        if res is None:
            raise ApiError(400, "BadRequest", f"unknown kind {obj.get('kind')!r}")
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace", "default") if res.namespaced else ""
        name = meta.get("name") or ""
        validate_name(res, name)
        key = (res.plural, ns, name)
        old = self.objects.get(key)
        if old is not None and old["metadata"].get("deletionTimestamp"):
            # Being deleted: on a cluster it must be gone before it can be created again.
            self._commit(res, ns, name, None, "DELETED")
            old = None
        if res.kind == "Service" and (obj.get("spec") or {}).get("type") == "LoadBalancer" \
                and "finalizers" not in meta:
            meta["finalizers"] = [LB_FINALIZER]     # what the service controller adds
        obj["apiVersion"] = res.api_version
        if res.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if old is None:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", now_rfc3339())
            if not res.builtin:
                meta.setdefault("generation", 1)
            return copy.deepcopy(self._commit(res, ns, name, obj, "ADDED"))
        for field in ("uid", "creationTimestamp", "generation"):
            if field in old["metadata"] and field not in meta:
                meta[field] = old["metadata"][field]
        return copy.deepcopy(self._commit(res, ns, name, obj, "MODIFIED"))

    def delete_raw(self, kind, ns, name):
        res = BY_KIND.get(kind)
        if res is None:
            raise ApiError(400, "BadRequest", f"unknown kind {kind!r}")
        return self.delete(res, ns if res.namespaced else "", name)

    def compact(self, rv):
        """Forgets history before rv: a new watch, or a continue, from an older rv gets 410.

        Watches already open keep receiving their events (kube-apiserver's watch cache pushes
        them to established watchers), so the event history itself is kept; only the old object
        versions that consistent pages are read from are dropped."""
        rv = min(max(rv, self.compacted), self.rv)
        self.compacted = rv
        for key in list(self.versions):
            vs = self.versions[key]
            j = bisect.bisect_right([v[0] for v in vs], rv)
            if j > 0:
                vs = vs[j - 1:]
                if vs[0][1] is None:
                    vs = vs[1:]
            if vs:
                self.versions[key] = vs
            else:
                del self.versions[key]
        return rv

    # -- reads (caller holds self.cond) --

    def snapshot(self, res, ns, at_rv):
        """Objects of res (in ns, or all namespaces when ns is None) as of at_rv, sorted by key."""
        out = []
        if at_rv >= self.rv:
            for (plural, ons, name), obj in self.objects.items():
                if plural == res.plural and (ns is None or ons == ns):
                    out.append(((ons, name), obj))
        else:
            for (plural, ons, name), vs in self.versions.items():
                if plural != res.plural or (ns is not None and ons != ns):
                    continue
                obj = None
                for vrv, vobj in vs:
                    if vrv > at_rv:
                        break
                    obj = vobj
                if obj is not None:
                    out.append(((ons, name), obj))
        out.sort(key=lambda t: t[0])
        return out

    def events_after(self, rv):
        i = bisect.bisect_right(self.history_rvs, rv)
        return self.history[i:]


def conflict(res, name):
    details = {"name": name, "kind": res.plural}
    if res.group:
        details["group"] = res.group
    return ApiError(409, "Conflict",
                    f'Operation cannot be fulfilled on {res.group_resource} "{name}": the object '
                    "has been modified; please apply your changes to the latest version and try again",
                    details)


def validate_name(res, name):
    ok = 0 < len(name) <= 253 and all(c.islower() or c.isdigit() or c in "-." for c in name) \
        and name[0].isalnum() and name[-1].isalnum()
    if not ok:
        raise ApiError(422, "Invalid",
                       f'{res.kind} "{name}" is invalid: metadata.name: Invalid value: "{name}": a '
                       "lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                       "characters, '-' or '.', and must start and end with an alphanumeric character",
                       {"name": name, "kind": res.kind,
                        "causes": [{"reason": "FieldValueInvalid", "field": "metadata.name"}]})


def validate_write(res, name, obj):
    """What a real server checks on create, update and patch (validation.py): 422 Invalid with
    the field causes, 400 when the body cannot be decoded into the kind. Returns the object to
    store (a custom resource is pruned to its schema)."""
    try:
        obj, errors = validation.validate(res.kind, obj)
    except validation.DecodeError as e:
        raise ApiError(400, "BadRequest",
                       f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: {e}')
    if errors:
        code, reason, message, details = validation.invalid_status(res.kind, res.group, name, errors)
        raise ApiError(code, reason, message, details)
    return obj


# --------------------------------------------------------------------------------------------
# Faults and request log


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.errors = []
        self.delays = []
        self.cuts = []
        self.requests = []

    @staticmethod
    def _take(rules, verb, path):
        for r in rules:
            if r.get("count", 1) <= 0:
                continue
            if r.get("path") and r["path"] not in path:
                continue
            if r.get("verb") and r["verb"] != verb:
                continue
            r["count"] = r.get("count", 1) - 1
            return r
        return None

    def take_error(self, verb, path):
        with self.lock:
            return self._take(self.errors, verb, path)

    def take_delay(self, verb, path):
        with self.lock:
            return self._take(self.delays, verb, path)

    def take_cut(self, path):
        with self.lock:
            return self._take(self.cuts, "watch", path)

    def record(self, verb, path, code=0):
        """Logs a request as it arrives; the caller sets entry["code"] once it is answered."""
        entry = {"verb": verb, "path": path, "code": code}
        with self.lock:
            self.requests.append(entry)
            if len(self.requests) > 100000:
                del self.requests[:50000]
        return entry

    def snapshot_requests(self):
        with self.lock:
            return [dict(r) for r in self.requests]


# --------------------------------------------------------------------------------------------
# Disruptions: what a real API server did to egw under faults (issue 14), for the election
# tests. Kept apart from the request-level faults above; the rest of the server calls in here at
# four points only (dispatch, the 403 check, the watch loop and the control API).
#
#   POST /_test/disrupt  {"outage": S,                 refuse every API request for S seconds:
#                                                      the connection is closed unanswered, open
#                                                      watches are cut
#                         "warmUp": W,                 after the outage (a restart), answer 403
#                                                      Forbidden to every user but the admin for W
#                                                      seconds, as kube-apiserver does until its
#                                                      RBAC informers are filled (default: the
#                                                      server's --restart-warm-up; alone, from now)
#                         "forbid": [{"verbs": [...], "path": "...", "userAgent": "...",
#                                     "seconds": S}],  answer 403 Forbidden as RBAC does (for S
#                                                      seconds; without "seconds" until cleared)
#                         "hold": [{"path": "...", "seconds": S}],
#                                                      matching watches stay open but send nothing
#                                                      (no event, no bookmark) for S seconds, then
#                                                      deliver everything in order: a stale cache
#                         "clear": true}               ends every disruption first
#   GET  /_test/history  every change the store made, in resourceVersion order:
#                        [{"resourceVersion", "type", "kind", "namespace", "name", "object"}]


class Disruptions:
    def __init__(self):
        self.lock = threading.Lock()
        self.outage_until = 0.0
        self.warm_up = 0.0        # seconds of refusals after every outage (--restart-warm-up)
        self.warm_until = 0.0     # refusing everyone but the admin until then
        self.forbid = []          # {"verbs", "path", "userAgent", "until" (None: until cleared)}
        self.holds = []           # {"path", "until"}

    @staticmethod
    def _active(rule, now):
        return rule.get("until") is None or now < rule["until"]

    def in_outage(self):
        with self.lock:
            return time.monotonic() < self.outage_until

    def warming_up(self):
        with self.lock:
            return time.monotonic() < self.warm_until

    def forbidden(self, verb, path, user_agent):
        now = time.monotonic()
        with self.lock:
            for r in self.forbid:
                if not self._active(r, now):
                    continue
                if r.get("verbs") and verb not in r["verbs"]:
                    continue
                if r.get("path") and r["path"] not in path:
                    continue
                if r.get("userAgent") and r["userAgent"] not in (user_agent or ""):
                    continue
                return True
        return False

    def held(self, path):
        now = time.monotonic()
        with self.lock:
            return any(self._active(h, now) and h.get("path", "") in path for h in self.holds)

    def configure(self, store, doc):
        now = time.monotonic()
        with self.lock:
            if doc.get("clear"):
                self.outage_until = 0.0
                self.warm_until = 0.0
                self.forbid.clear()
                self.holds.clear()
            if doc.get("outage"):
                self.outage_until = now + float(doc["outage"])
                self.warm_until = self.outage_until + float(doc.get("warmUp", self.warm_up))
            elif doc.get("warmUp"):
                self.warm_until = now + float(doc["warmUp"])
            for r in doc.get("forbid", []):
                r = dict(r)
                r["until"] = now + float(r["seconds"]) if r.get("seconds") else None
                self.forbid.append(r)
            for h in doc.get("hold", []):
                self.holds.append({"path": h.get("path", ""), "until": now + float(h.get("seconds", 1))})
        if doc.get("outage"):
            with store.cond:           # the open watches break with the server
                store.close_epoch += 1
                store.close_abort = True
                store.cond.notify_all()
        with store.cond:
            store.cond.notify_all()    # held watches look again

    @staticmethod
    def history(store):
        with store.cond:
            return [{"resourceVersion": str(ev.rv), "type": ev.type, "kind": ev.res.kind,
                     "namespace": ev.ns, "name": ev.obj["metadata"]["name"],
                     "object": copy.deepcopy(ev.obj)} for ev in store.history]


def rbac_forbidden(user, verb, route):
    """The 403 an RBAC authorizer gives when the rule that allowed this request is taken away."""
    if route is None or route[0] != "api":
        return ApiError(403, "Forbidden", f'forbidden: User "{user}" cannot {verb} this path')
    _, res, ns, name, sub = route
    details = {"name": name or "", "kind": res.plural}
    if res.group:
        details["group"] = res.group
    return ApiError(403, "Forbidden", authz.forbidden_message(user, verb, res.group, res.plural, sub, ns or "",
                                                              name or ""), details)


# --------------------------------------------------------------------------------------------
# HTTP


class CutStream(Exception):
    """The watch stream was cut on purpose (fault injection)."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A real API server does not hold small writes back; with Nagle on, every request on a reused
    # connection waits ~40 ms for the delayed ACK of the previous response.
    disable_nagle_algorithm = True
    server_version = "egw-test-apiserver/1"

    # -- plumbing --

    def setup(self):
        super().setup()
        self.peer_cn = None
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.settimeout(10)
            self.connection.do_handshake()
            self.connection.settimeout(None)
            cert = self.connection.getpeercert()
            if cert:
                for rdn in cert.get("subject", ()):
                    for k, v in rdn:
                        if k == "commonName":
                            self.peer_cn = v
                if self.peer_cn is None:
                    self.peer_cn = ""

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("apiserver: %s %s\n" % (self.address_string(), fmt % args))

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_json(self, code, obj, headers=None):
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        if getattr(self, "entry", None) is not None:
            # Logged before the client can see the answer: a test that reads the request log
            # right after its request finds the code there.
            self.entry["code"] = code
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def send_text(self, code, text):
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    # -- dispatch --

    def dispatch(self, method):
        self.entry = None
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            body = self.read_body()
        except (ValueError, OSError):
            self.close_connection = True
            return
        if path.startswith("/_test/") or path == "/_test":
            try:
                self.handle_test(method, path, body)
            except ApiError as e:
                self.send_json(e.code, e.status())
            return
        if self.server.disruptions.in_outage():
            # Disruptions: the server is away; the client sees its connection closed unanswered.
            self.server.faults.record("unknown", path)
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if path in ("/healthz", "/readyz", "/livez"):
            self.send_text(200, "ok")
            return
        verb, route = "unknown", None
        try:
            route = parse_path(path)
            verb = verb_of(method, route, query)
        except ApiError:
            pass
        srv = self.server
        self.entry = entry = srv.faults.record(verb, path)
        user = self.authenticate()
        entry["user"] = user or ""
        if user is None:
            entry["code"] = 401
            self.send_json(401, ApiError(401, "Unauthorized", "Unauthorized").status())
            return
        try:
            self.authorize(user, verb, route)
        except ApiError as e:
            entry["code"] = e.code
            self.send_json(e.code, e.status())
            return
        delay = srv.faults.take_delay(verb, path)
        if delay:
            time.sleep(delay.get("ms", 0) / 1000.0)
        err = srv.faults.take_error(verb, path)
        if err:
            code = int(err.get("code", 500))
            reasons = {500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests",
                       504: "Timeout", 409: "Conflict", 403: "Forbidden"}
            headers = {"Retry-After": "1"} if code == 429 else None
            entry["code"] = code
            self.send_json(code, ApiError(code, reasons.get(code, "InternalError"),
                                          f"injected fault: HTTP {code}").status(), headers)
            return
        if (srv.disruptions.forbidden(verb, path, self.headers.get("User-Agent"))
                or (user != ADMIN and srv.disruptions.warming_up())):
            e = rbac_forbidden(user, verb, route)
            entry["code"] = e.code
            self.send_json(e.code, e.status(), e.headers)
            return
        try:
            if route is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            entry["code"] = self.handle_api(method, verb, route, query, body)
        except ApiError as e:
            entry["code"] = e.code
            self.send_json(e.code, e.status(), e.headers)
        except CutStream:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True

    def authenticate(self):
        """The user a request comes from, or None when its credentials are refused: a client
        certificate's common name, --token-user for the bearer --token, ADMIN for --admin-token
        (and for everyone when the server asks for no credentials at all)."""
        srv = self.server
        if self.peer_cn is not None:
            return self.peer_cn
        with srv.store.cond:
            token, admin_token = srv.token, srv.admin_token
        auth = self.headers.get("Authorization", "")
        if admin_token is not None and auth == "Bearer " + admin_token:
            return ADMIN
        if token is None:
            return ADMIN if srv.client_ca is None else None
        return srv.token_user if auth == "Bearer " + token else None

    def authorize(self, user, verb, route):
        """403 Forbidden unless --rbac's rules let `user` do this (authz.py)."""
        srv = self.server
        if srv.authorizer is None or user == ADMIN or route is None:
            return
        if route[0] == "discovery":
            return                    # system:discovery: every authenticated user
        _, res, ns, name, sub = route
        resource = res.plural + ("/" + sub if sub else "")
        if srv.authorizer.allowed(user, verb, res.group, resource, ns or "", name or ""):
            return
        details = {"name": name or "", "kind": res.plural}
        if res.group:
            details["group"] = res.group
        raise ApiError(403, "Forbidden", authz.forbidden_message(user, verb, res.group, res.plural, sub,
                                                                 ns or "", name or ""), details)

    # -- the Kubernetes API --

    def handle_api(self, method, verb, route, query, body):
        if route[0] == "discovery":
            self.send_json(200, route[1])
            return 200
        _, res, ns, name, sub = route
        store = self.server.store
        if verb == "list":
            obj = self.do_list(res, ns, query)
            self.send_json(200, obj)
            return 200
        if verb == "watch":
            return self.do_watch(res, ns, query)
        if verb == "get":
            with store.cond:
                obj = store.objects.get((res.plural, ns or "", name))
                if obj is None:
                    raise not_found(res, name)
                obj = copy.deepcopy(obj)
            self.send_json(200, obj)
            return 200
        if verb in ("create", "update", "patch"):
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if verb == "patch":
                allowed = [JSON_PATCH, MERGE_PATCH] + ([STRATEGIC_PATCH] if res.builtin else [])
            else:
                allowed = ["application/json"]
            if ctype not in allowed:
                raise ApiError(415, "UnsupportedMediaType",
                               "the body of the request was in an unknown format - accepted media "
                               "types include: " + ", ".join(allowed))
            try:
                doc = json.loads(body.decode() or "null")
            except (ValueError, UnicodeDecodeError) as e:
                raise ApiError(400, "BadRequest", f"error decoding the request body: {e}")
            if verb != "patch":
                if not isinstance(doc, dict):
                    raise ApiError(400, "BadRequest", "the request body must be an object")
                if doc.get("kind", res.kind) != res.kind or \
                        doc.get("apiVersion", res.api_version) != res.api_version:
                    raise ApiError(400, "BadRequest",
                                   f"the API version in the data ({doc.get('apiVersion')}) and kind "
                                   f"({doc.get('kind')}) do not match the request ({res.api_version}, "
                                   f"{res.kind})")
            with store.cond:
                if verb == "create":
                    if sub:
                        raise ApiError(405, "MethodNotAllowed", "create is not allowed on a subresource")
                    out = store.create(res, ns or "", doc)
                    code = 201
                elif verb == "update":
                    out = store.update(res, ns or "", name, doc, sub, not res.builtin)
                    code = 200
                else:
                    out = store.patch(res, ns or "", name, ctype, doc, sub)
                    code = 200
            self.send_json(code, out)
            return code
        if verb == "delete":
            with store.cond:
                out = store.delete(res, ns or "", name)
            self.send_json(200, out)
            return 200
        raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the "
                       f"requested resource")

    def do_list(self, res, ns, query):
        store = self.server.store
        selector = parse_selectors(query, res)
        limit = query.get("limit", "")
        try:
            limit = int(limit) if limit else 0
        except ValueError:
            raise ApiError(400, "BadRequest", f"invalid limit {limit!r}")
        rv_param = query.get("resourceVersion", "")
        cont = query.get("continue", "")
        with store.cond:
            if cont:
                if rv_param:
                    raise ApiError(400, "BadRequest",
                                   "specifying resource version is not allowed when using continue")
                try:
                    tok = json.loads(base64.urlsafe_b64decode(cont + "=" * (-len(cont) % 4)))
                    at_rv, start = int(tok["rv"]), tok["start"]
                except (ValueError, KeyError, TypeError):
                    raise ApiError(400, "BadRequest", "continue key is not valid: incorrect encoded "
                                   "start resourceVersion (version meta.k8s.io/v1)")
                if at_rv < store.compacted:
                    raise expired("The provided continue parameter is too old to display a "
                                  "consistent list result. You can start a new list without the "
                                  "continue parameter.")
            else:
                start = ""
                at_rv = store.rv
                if rv_param and rv_param != "0":
                    want = parse_rv(rv_param)
                    if query.get("resourceVersionMatch") == "Exact":
                        if want < store.compacted:
                            raise expired(f"too old resource version: {want} ({store.compacted})")
                        at_rv = want
                    if want > store.rv:
                        store.cond.wait_for(lambda: store.rv >= want, timeout=3)
                        if want > store.rv:
                            raise too_large(want, store.rv)
                        at_rv = store.rv
                if rv_param == "0":
                    limit = 0                # served from the watch cache: no pagination
            objs = store.snapshot(res, ns, at_rv)
            items, last = [], None
            remaining = 0
            for key, obj in objs:
                k = f"{key[0]}/{key[1]}"
                if start and k <= start:
                    continue
                if not selector_matches(selector, obj):
                    continue
                if limit and len(items) >= limit:
                    remaining += 1
                    continue
                items.append(list_item(res, obj))
                last = k
            meta = {"resourceVersion": str(at_rv)}
            if remaining:
                token = json.dumps({"v": "meta.k8s.io/v1", "rv": at_rv, "start": last + "\x00"})
                meta["continue"] = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
                if not selector:
                    meta["remainingItemCount"] = remaining
        return {"kind": res.kind + "List", "apiVersion": res.api_version, "metadata": meta,
                "items": items}

    # -- watch --

    def do_watch(self, res, ns, query):
        srv, store = self.server, self.server.store
        selector = parse_selectors(query, res)
        bookmarks = query.get("allowWatchBookmarks", "") in ("true", "1")
        rv_param = query.get("resourceVersion", "")
        try:
            timeout = float(query.get("timeoutSeconds") or srv.watch_timeout)
        except ValueError:
            raise ApiError(400, "BadRequest", "invalid timeoutSeconds")
        deadline = time.monotonic() + timeout
        initial = []
        expired_event = None
        with store.cond:
            if rv_param in ("", "0"):
                pos = store.rv
                for _, obj in store.snapshot(res, ns, pos):
                    if selector_matches(selector, obj):
                        initial.append(("ADDED", obj))
            else:
                pos = parse_rv(rv_param)
                oldest = store.too_old_for_window(res, pos)
                if pos < store.compacted or oldest is not None:
                    msg = f"too old resource version: {pos} ({max(store.compacted, oldest or 0)})"
                    if srv.watch_expired_as == "http":
                        raise expired(msg)
                    expired_event = expired(msg).status()
                elif pos > store.rv:
                    store.cond.wait_for(lambda: store.rv >= pos, timeout=3)
                    if pos > store.rv:
                        raise too_large(pos, store.rv)
            epoch = store.watch_epoch
            close_epoch = store.close_epoch
            bookmark_epoch = store.bookmark_epoch
            store.watches += 1
            chunk_size = srv.chunk_size
            bookmark_interval = srv.bookmark_interval
        cut = srv.faults.take_cut(self.path)
        stream = WatchStream(self, cut, chunk_size)
        try:
            # Logged before the client sees the headers: a test that reads the request log once its
            # watch is open finds the code there (as send_json does for ordinary answers).
            self.entry["code"] = 200
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            if expired_event is not None:
                stream.send([{"type": "ERROR", "object": expired_event}])
                stream.end()
                return 200
            stream.send([{"type": t, "object": o} for t, o in initial])
            last_bookmark = time.monotonic()
            while True:
                with store.cond:
                    while True:
                        now = time.monotonic()
                        if store.shutdown or now >= deadline or store.close_epoch != close_epoch:
                            break
                        held = srv.disruptions.held(self.path)   # Disruptions: a stale watch
                        if held:
                            store.cond.wait(timeout=0.05)
                            continue
                        if store.watch_epoch != epoch or store.history_rvs[-1:] > [pos] \
                                or (bookmarks and store.bookmark_epoch != bookmark_epoch):
                            break
                        due = deadline
                        if bookmarks and bookmark_interval > 0:
                            due = min(due, last_bookmark + bookmark_interval)
                            if now >= due:
                                break
                        store.cond.wait(timeout=max(0.01, min(due - now, 1.0)))
                    done = store.shutdown or time.monotonic() >= deadline
                    abort = closing = False
                    if store.close_epoch != close_epoch:
                        # Ended by /_test/close-watches: nothing more is sent on this stream.
                        done = closing = True
                        abort = store.close_abort
                    if closing:
                        events, expire = [], None
                    elif store.watch_epoch != epoch:
                        msg = f"too old resource version: {pos} ({store.compacted})"
                        events, expire = [], expired(msg).status()
                    else:
                        expire = None
                        events = []
                        for ev in store.events_after(pos):
                            out = filter_event(ev, res, ns, selector)
                            if out:
                                events.append(out)
                        if store.history_rvs:
                            pos = max(pos, store.history_rvs[-1])
                    want_bookmark = bookmarks and (
                        store.bookmark_epoch != bookmark_epoch or
                        (bookmark_interval > 0 and time.monotonic() >= last_bookmark + bookmark_interval))
                    bookmark_epoch = store.bookmark_epoch
                    current = store.rv
                if expire is not None:
                    stream.send([{"type": "ERROR", "object": expire}])
                    stream.end()
                    return 200
                if want_bookmark and not done and not closing:
                    events.append({"type": "BOOKMARK", "object": {
                        "kind": res.kind, "apiVersion": res.api_version,
                        "metadata": {"resourceVersion": str(current), "creationTimestamp": None}}})
                    last_bookmark = time.monotonic()
                    pos = max(pos, current)
                if events:
                    stream.send(events)
                if abort:
                    stream.abort()
                if done:
                    stream.end()
                    return 200
        finally:
            with store.cond:
                store.watches -= 1


    # -- the test control API --

    def handle_test(self, method, path, body):
        srv, store, faults = self.server, self.server.store, self.server.faults
        try:
            doc = json.loads(body.decode() or "{}") if body else {}
        except ValueError as e:
            raise ApiError(400, "BadRequest", f"bad JSON: {e}")
        if method == "GET" and path == "/_test/requests":
            reqs = faults.snapshot_requests()
            counts = {}
            for r in reqs:
                counts[r["verb"]] = counts.get(r["verb"], 0) + 1
            self.send_json(200, {"requests": reqs, "counts": counts})
        elif method == "POST" and path == "/_test/requests/reset":
            with faults.lock:
                faults.requests.clear()
            self.send_json(200, {})
        elif method == "GET" and path == "/_test/state":
            with store.cond:
                out = {"resourceVersion": str(store.rv), "compacted": str(store.compacted),
                       "watches": store.watches,
                       "objects": [copy.deepcopy(o) for _, o in sorted(store.objects.items())]}
            self.send_json(200, out)
        elif method == "POST" and path == "/_test/upsert":
            objs = doc if isinstance(doc, list) else [doc]
            out = []
            with store.cond:
                for o in objs:
                    out.append(store.upsert_raw(copy.deepcopy(o)))
            self.send_json(200, out if isinstance(doc, list) else out[0])
        elif method == "POST" and path == "/_test/delete":
            with store.cond:
                out = store.delete_raw(doc.get("kind"), doc.get("namespace", "default"),
                                       doc.get("name", ""))
            self.send_json(200, out)
        elif method == "POST" and path == "/_test/compact":
            with store.cond:
                rv = store.compact(int(doc.get("resourceVersion", store.rv)))
                if doc.get("expireWatches"):
                    store.watch_epoch += 1
                store.cond.notify_all()
            self.send_json(200, {"compacted": str(rv)})
        elif method == "POST" and path == "/_test/close-watches":
            with store.cond:
                store.close_epoch += 1
                store.close_abort = bool(doc.get("abort"))
                store.cond.notify_all()
            self.send_json(200, {})
        elif method == "POST" and path == "/_test/bookmark":
            with store.cond:
                store.bookmark_epoch += 1
                store.cond.notify_all()
            self.send_json(200, {})
        elif method == "POST" and path == "/_test/faults":
            with faults.lock:
                if doc.get("clear"):
                    faults.errors.clear()
                    faults.delays.clear()
                    faults.cuts.clear()
                faults.errors.extend(copy.deepcopy(doc.get("errors", [])))
                faults.delays.extend(copy.deepcopy(doc.get("delays", [])))
                faults.cuts.extend(copy.deepcopy(doc.get("cuts", [])))
            self.send_json(200, {})
        elif method == "POST" and path == "/_test/disrupt":
            srv.disruptions.configure(store, doc)
            self.send_json(200, {})
        elif method == "GET" and path == "/_test/history":
            self.send_json(200, {"history": Disruptions.history(store)})
        elif method == "POST" and path == "/_test/config":
            with store.cond:
                if "token" in doc:
                    srv.token = doc["token"]
                if "bookmarkInterval" in doc:
                    srv.bookmark_interval = float(doc["bookmarkInterval"])
                if "chunkSize" in doc:
                    srv.chunk_size = int(doc["chunkSize"])
                if "watchCacheWindow" in doc:
                    store.window = int(doc["watchCacheWindow"])
                if "nodeHeartbeat" in doc:
                    srv.node_heartbeat = float(doc["nodeHeartbeat"])
                if "finalizerDelay" in doc:
                    store.finalizer_delay = float(doc["finalizerDelay"])
                if "rbac" in doc:
                    srv.authorizer = authz.Authorizer.from_file(doc["rbac"]) if doc["rbac"] else None
                if "watchExpiredAs" in doc:
                    if doc["watchExpiredAs"] not in ("http", "event"):
                        raise ApiError(400, "BadRequest", "watchExpiredAs is http or event")
                    srv.watch_expired_as = doc["watchExpiredAs"]
            self.send_json(200, {})
        else:
            raise ApiError(404, "NotFound", f"no test endpoint {method} {path}")


class WatchStream:
    """Writes watch events as HTTP chunks, optionally split small and cut on purpose."""

    def __init__(self, handler, cut, chunk_size):
        self.h = handler
        self.sent = 0
        self.events = 0
        self.cut = cut
        self.chunk_size = chunk_size

    def _chunk(self, data):
        if data:
            self.h.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")

    def send(self, events):
        payload = b""
        limit = None
        for ev in events:
            line = (json.dumps(ev, separators=(",", ":")) + "\n").encode()
            counted = ev["type"] != "BOOKMARK"
            if self.cut and limit is None:
                if "afterEvents" in self.cut:
                    if counted and self.events == int(self.cut["afterEvents"]):
                        limit = self.sent + len(payload) + max(1, len(line) // 2)
                elif "afterBytes" in self.cut and \
                        self.sent + len(payload) + len(line) > int(self.cut["afterBytes"]):
                    limit = int(self.cut["afterBytes"])
            payload += line
            self.events += counted
        if limit is not None:
            payload = payload[:max(0, limit - self.sent)]
        if self.chunk_size > 0:
            i = 0
            while i < len(payload):
                n = random.randint(1, self.chunk_size)
                self._chunk(payload[i:i + n])
                i += n
        else:
            self._chunk(payload)
        self.sent += len(payload)
        self.h.wfile.flush()
        if limit is not None:
            self.abort()

    def abort(self):
        """Drops the connection without ending the chunked body."""
        try:
            self.h.wfile.flush()
            self.h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise CutStream()

    def end(self):
        self.h.wfile.write(b"0\r\n\r\n")
        self.h.wfile.flush()


def parse_selectors(query, res):
    """?labelSelector= and ?fieldSelector= as one requirement list (labels, None, fields)."""
    text = query.get("labelSelector", "")
    reqs = check_label_requirements(parse_selector(text), text)
    fields = parse_field_selector(query.get("fieldSelector", ""), res)
    return reqs + [None] + fields if fields else reqs


def filter_event(ev, res, ns, selector):
    if ev.res is not res or (ns is not None and ev.ns != ns):
        return None
    if ev.type == "ADDED":
        return {"type": "ADDED", "object": ev.obj} if selector_matches(selector, ev.obj) else None
    if ev.type == "DELETED":
        return {"type": "DELETED", "object": ev.obj} if selector_matches(selector, ev.obj) else None
    now = selector_matches(selector, ev.obj)
    before = ev.prev is not None and selector_matches(selector, ev.prev)
    if now and before:
        return {"type": "MODIFIED", "object": ev.obj}
    if now:
        return {"type": "ADDED", "object": ev.obj}
    if before:
        return {"type": "DELETED", "object": ev.obj}
    return None


def list_item(res, obj):
    obj = copy.deepcopy(obj)
    if res.builtin:
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
    return obj


def parse_rv(text):
    try:
        v = int(text)
        if v < 0:
            raise ValueError
        return v
    except ValueError:
        raise ApiError(400, "BadRequest", f'invalid resource version "{text}"')


def too_large(want, current):
    return ApiError(504, "Timeout", f"Too large resource version: {want}, current: {current}",
                    {"causes": [{"reason": "ResourceVersionTooLarge",
                                 "message": "Too large resource version"}],
                     "retryAfterSeconds": 1},
                    {"Retry-After": "1"})


def discovery(path):
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]}
    if path == "/apis":
        groups = {}
        for r in RESOURCES:
            if r.group:
                gv = {"groupVersion": r.api_version, "version": r.version}
                groups[r.group] = {"name": r.group, "versions": [gv], "preferredVersion": gv}
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(groups.values())}
    resources = []
    for r in RESOURCES:
        if r.prefix == path:
            verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
            resources.append({"name": r.plural, "singularName": r.kind.lower(),
                              "namespaced": r.namespaced, "kind": r.kind, "verbs": verbs})
            if r.status:
                resources.append({"name": r.plural + "/status", "singularName": "",
                                  "namespaced": r.namespaced, "kind": r.kind,
                                  "verbs": ["get", "patch", "update"]})
    if not resources:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": path[len("/apis/"):] if path.startswith("/apis/") else "v1",
            "resources": resources}


def parse_path(path):
    """("api", res, ns or None, name or None, subresource or None) or ("discovery", body)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        rest = None
    if rest == [] or path in ("/api", "/apis"):
        d = discovery(path)
        if d is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return ("discovery", d)
    if rest is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    res = BY_PATH.get((group, version, rest[0]))
    if res is None or len(rest) > 3 or (ns is not None and not res.namespaced):
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    name = rest[1] if len(rest) >= 2 else None
    sub = rest[2] if len(rest) == 3 else None
    if sub is not None and (sub != "status" or not res.status):
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    if res.namespaced and name is not None and ns is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return ("api", res, ns, name, sub)


def verb_of(method, route, query):
    if route[0] == "discovery":
        return "get"
    name = route[3]
    if method == "GET":
        if name:
            return "get"
        return "watch" if query.get("watch", "") in ("true", "1") else "list"
    if method == "POST":
        if name:
            raise ApiError(405, "MethodNotAllowed", "POST on a named resource is not allowed")
        if route[1].namespaced and route[2] is None:
            raise ApiError(405, "MethodNotAllowed", "create needs a namespace in the path")
        return "create"
    if not name:
        raise ApiError(405, "MethodNotAllowed", f"{method} needs a resource name")
    return {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "unknown")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, args):
        super().__init__(addr, Handler)
        self.store = Store()
        self.faults = Faults()
        self.disruptions = Disruptions()
        self.disruptions.warm_up = args.restart_warm_up
        self.token = args.token
        self.token_user = args.token_user
        self.admin_token = args.admin_token
        self.authorizer = authz.Authorizer.from_file(args.rbac) if args.rbac else None
        self.client_ca = args.client_ca
        self.bookmark_interval = args.bookmark_interval
        self.watch_timeout = args.watch_timeout
        self.chunk_size = args.chunk_size
        self.watch_expired_as = args.watch_expired_as
        self.store.window = args.watch_cache_window
        self.store.finalizer_delay = args.finalizer_delay
        self.node_heartbeat = args.node_heartbeat
        self.verbose = args.verbose
        threading.Thread(target=self.controllers, daemon=True).start()
        self.ssl_ctx = None
        if args.tls_cert:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(args.tls_cert, args.tls_key)
            if args.client_ca:
                ctx.load_verify_locations(args.client_ca)
                ctx.verify_mode = ssl.CERT_OPTIONAL
            self.ssl_ctx = ctx

    def controllers(self):
        """What a cluster's other parts do by themselves: kubelets' heartbeats on Node status, the
        service controller removing its finalizer from a LoadBalancer Service being deleted."""
        last_beat = time.monotonic()
        while True:
            time.sleep(0.05)
            now = time.monotonic()
            with self.store.cond:
                if self.store.shutdown:
                    return
                self.store.finish_deletions(now)
                if self.node_heartbeat > 0 and now - last_beat >= self.node_heartbeat:
                    last_beat = now
                    self.store.heartbeat()

    def get_request(self):
        sock, addr = self.socket.accept()
        if self.ssl_ctx is not None:
            sock = self.ssl_ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        if self.verbose:
            super().handle_error(request, client_address)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--port-file", help="write the port here once listening")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--client-ca", help="accept client certificates signed by this CA")
    ap.add_argument("--token", help="require this bearer token (or a client certificate)")
    ap.add_argument("--token-user", default="system:serviceaccount:egw-system:egwd",
                    help="the user that --token authenticates as (what --rbac's bindings name)")
    ap.add_argument("--admin-token", help="also accept this bearer token, for an unrestricted user")
    ap.add_argument("--rbac", help="authorize requests with the RBAC objects of this YAML file "
                                   "(e.g. docker/k8s/rbac.yaml); without it everything is allowed")
    ap.add_argument("--restart-warm-up", type=float, default=0.0,
                    help="seconds of 403s (to all but the admin) after every /_test/disrupt outage, "
                         "as a restarted kube-apiserver gives until its RBAC informers are filled")
    ap.add_argument("--bookmark-interval", type=float, default=1.0,
                    help="seconds between BOOKMARKs on watches that allow them; 0 = on demand only")
    ap.add_argument("--watch-timeout", type=float, default=1800.0,
                    help="watch length when the client gives no timeoutSeconds")
    ap.add_argument("--chunk-size", type=int, default=0,
                    help="split watch output into chunks of 1..N bytes (0 = one chunk per write)")
    ap.add_argument("--watch-expired-as", choices=("http", "event"), default="event",
                    help="answer a watch from a compacted resourceVersion with an ERROR event in a 200 "
                         "stream, as kube-apiserver's watch cache does (default), or HTTP 410")
    ap.add_argument("--watch-cache-window", type=int, default=100,
                    help="a watch resumes only from within the last N events of its resource, older "
                         "resourceVersions get 410 (0 = the whole history)")
    ap.add_argument("--node-heartbeat", type=float, default=0,
                    help="every S seconds each Node's conditions get a new lastHeartbeatTime, as "
                         "kubelets do (0 = never)")
    ap.add_argument("--finalizer-delay", type=float, default=0.3,
                    help="seconds between a LoadBalancer Service's deletion mark and its removal")
    ap.add_argument("--seed", help="a JSON file with a list of objects to load at start")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        ap.error("--tls-cert and --tls-key go together")
    if args.client_ca and not args.tls_cert:
        ap.error("--client-ca needs --tls-cert")

    server = Server((args.host, args.port), args)
    if args.seed:
        with open(args.seed) as f:
            seed = json.load(f)
        with server.store.cond:
            for obj in seed if isinstance(seed, list) else seed.get("items", []):
                server.store.upsert_raw(obj)
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    if args.verbose:
        sys.stderr.write(f"apiserver: listening on {args.host}:{port}\n")

    def stop(signum, frame):
        with server.store.cond:
            server.store.shutdown = True
            server.store.cond.notify_all()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
