# SPDX-License-Identifier: Apache-2.0
"""Protocol tests of the test API server (tests/apiserver/apiserver.py).

Run: python3 -m unittest discover -s tests/apiserver -p 'test_*.py'
Each test class starts its own server on a free port of 127.0.0.1 and stops it afterwards.
"""

import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "apiserver.py")

NODES = "/api/v1/nodes"
SVCS = "/api/v1/namespaces/default/services"
ES = "/apis/k8s.ovn.org/v1/namespaces/default/egressservices"
EF = "/apis/k8s.ovn.org/v1/namespaces/default/egressfirewalls"
EQ = "/apis/k8s.ovn.org/v1/namespaces/default/egressqoses"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/egw/leases"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
EIPS = "/apis/k8s.ovn.org/v1/egressips"


def node(name, labels=None):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def egress_service(name, host=None):
    o = {"apiVersion": "k8s.ovn.org/v1", "kind": "EgressService",
         "metadata": {"name": name, "namespace": "default"},
         "spec": {"sourceIPBy": "LoadBalancerIP"}}
    if host is not None:
        o["status"] = {"host": host}
    return o


class ServerProcess:
    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="egw-apiserver-test-")
        port_file = os.path.join(self.dir, "port")
        self.proc = subprocess.Popen([sys.executable, SERVER, "--port", "0", "--port-file",
                                      port_file, *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read().decode() if self.proc.poll() is not None else ""
                self.stop()
                raise RuntimeError("apiserver did not start: " + err)
            time.sleep(0.02)
        with open(port_file) as f:
            self.port = int(f.read())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Client:
    def __init__(self, port, token=None, ssl_context=None):
        self.port = port
        self.token = token
        self.ssl_context = ssl_context

    def conn(self, timeout=10):
        if self.ssl_context is not None:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                               context=self.ssl_context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, ctype="application/json", token=None):
        c = self.conn()
        headers = {}
        tok = token if token is not None else self.token
        if tok:
            headers["Authorization"] = "Bearer " + tok
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = ctype
        c.request(method, path, body=data, headers=headers)
        r = c.getresponse()
        raw = r.read()
        c.close()
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = raw.decode()
        return r.status, doc

    def test(self, path, body=None, method="POST"):
        status, doc = self.request(method, "/_test/" + path, body)
        assert status == 200, (status, doc)
        return doc

    def watch(self, path, timeout=10):
        """Opens a watch; returns (connection, response)."""
        c = self.conn(timeout=timeout)
        headers = {"Authorization": "Bearer " + self.token} if self.token else {}
        c.request("GET", path, headers=headers)
        return c, c.getresponse()


def read_events(resp, n):
    out = []
    for _ in range(n):
        line = resp.readline()
        if not line:
            break
        out.append(json.loads(line))
    return out


class ApiServerTest(unittest.TestCase):
    args = ()

    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(*cls.args)
        cls.api = Client(cls.server.port)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        # Start each test from an empty store and no faults.
        self.api.test("faults", {"clear": True})
        self.api.test("config", {"bookmarkInterval": 0, "chunkSize": 0, "watchExpiredAs": "http"})
        for o in self.api.test("state", method="GET")["objects"]:
            self.api.test("delete", {"kind": o["kind"], "namespace": o["metadata"].get("namespace", ""),
                                     "name": o["metadata"]["name"]})
        self.api.test("requests/reset")


class ListTest(ApiServerTest):
    def test_list_shape_and_resource_version(self):
        status, lst = self.api.request("GET", NODES)
        self.assertEqual(status, 200)
        self.assertEqual(lst["kind"], "NodeList")
        self.assertEqual(lst["apiVersion"], "v1")
        self.assertEqual(lst["items"], [])
        rv0 = int(lst["metadata"]["resourceVersion"])
        status, created = self.api.request("POST", NODES, node("n1"))
        self.assertEqual(status, 201)
        self.assertGreater(int(created["metadata"]["resourceVersion"]), rv0)
        self.assertTrue(created["metadata"]["uid"])
        status, lst = self.api.request("GET", NODES)
        self.assertEqual(len(lst["items"]), 1)
        # Items of a built-in kind carry no kind/apiVersion, as on a real server...
        self.assertNotIn("kind", lst["items"][0])
        self.assertEqual(lst["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"])
        # ...those of a custom resource do.
        self.api.request("POST", ES, egress_service("e1"))
        status, lst = self.api.request("GET", ES)
        self.assertEqual(lst["items"][0]["kind"], "EgressService")

    def test_pagination_is_a_consistent_snapshot(self):
        for i in range(7):
            self.api.request("POST", NODES, node(f"n{i}"))
        status, p1 = self.api.request("GET", NODES + "?limit=3")
        self.assertEqual([o["metadata"]["name"] for o in p1["items"]], ["n0", "n1", "n2"])
        self.assertEqual(p1["metadata"]["remainingItemCount"], 4)
        token = p1["metadata"]["continue"]
        # Changes after the first page do not show in the next pages.
        self.api.request("DELETE", NODES + "/n4")
        self.api.request("POST", NODES, node("n35"))
        status, p2 = self.api.request("GET", NODES + "?limit=3&continue=" + token)
        self.assertEqual(status, 200)
        self.assertEqual([o["metadata"]["name"] for o in p2["items"]], ["n3", "n4", "n5"])
        self.assertEqual(p2["metadata"]["resourceVersion"], p1["metadata"]["resourceVersion"])
        status, p3 = self.api.request("GET", NODES + "?limit=3&continue=" + p2["metadata"]["continue"])
        self.assertEqual([o["metadata"]["name"] for o in p3["items"]], ["n6"])
        self.assertNotIn("continue", p3["metadata"])
        # resourceVersion with continue is refused.
        status, st = self.api.request("GET", NODES + "?limit=3&resourceVersion=5&continue=" + token)
        self.assertEqual((status, st["kind"], st["reason"]), (400, "Status", "BadRequest"))
        # After compaction the token has expired.
        self.api.test("compact")
        status, st = self.api.request("GET", NODES + "?limit=3&continue=" + token)
        self.assertEqual((status, st["reason"], st["code"]), (410, "Expired", 410))

    def test_namespaces_and_label_selector(self):
        self.api.request("POST", SVCS, {"apiVersion": "v1", "kind": "Service",
                                        "metadata": {"name": "a", "labels": {"app": "x"}}})
        self.api.request("POST", "/api/v1/namespaces/other/services",
                         {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "b"}})
        _, lst = self.api.request("GET", "/api/v1/services")
        self.assertEqual(sorted(o["metadata"]["namespace"] for o in lst["items"]), ["default", "other"])
        _, lst = self.api.request("GET", SVCS)
        self.assertEqual([o["metadata"]["name"] for o in lst["items"]], ["a"])
        _, lst = self.api.request("GET", "/api/v1/services?labelSelector=app%3Dx")
        self.assertEqual([o["metadata"]["name"] for o in lst["items"]], ["a"])
        _, lst = self.api.request("GET", "/api/v1/services?labelSelector=!app")
        self.assertEqual([o["metadata"]["name"] for o in lst["items"]], ["b"])
        _, lst = self.api.request("GET", "/api/v1/services?labelSelector=app%20in%20(y,x)")
        self.assertEqual([o["metadata"]["name"] for o in lst["items"]], ["a"])

    def test_errors_are_status_objects(self):
        status, st = self.api.request("GET", "/api/v1/configmaps")
        self.assertEqual((status, st["kind"], st["reason"]), (404, "Status", "NotFound"))
        status, st = self.api.request("GET", "/apis/k8s.ovn.org/v1/adminpolicybasedexternalroutes")
        self.assertEqual(status, 404)
        status, st = self.api.request("GET", NODES + "/missing")
        self.assertEqual((status, st["reason"], st["details"]["name"]), (404, "NotFound", "missing"))
        self.assertEqual(st["message"], 'nodes "missing" not found')
        status, st = self.api.request("GET", "/api/v1/namespaces/default/nodes")
        self.assertEqual(status, 404)
        status, st = self.api.request("POST", NODES, node("Bad_Name"))
        self.assertEqual((status, st["reason"]), (422, "Invalid"))
        status, st = self.api.request("POST", SVCS, {"apiVersion": "v1", "kind": "Node",
                                                     "metadata": {"name": "x"}})
        self.assertEqual((status, st["reason"]), (400, "BadRequest"))
        status, st = self.api.request("POST", NODES, node("n1"), ctype="text/plain")
        self.assertEqual((status, st["reason"]), (415, "UnsupportedMediaType"))
        status, st = self.api.request("GET", "/api/v1/nodes?resourceVersion=abc&watch=true")
        self.assertEqual(status, 400)

    def test_discovery(self):
        status, doc = self.api.request("GET", "/apis/k8s.ovn.org/v1")
        self.assertEqual(status, 200)
        names = {r["name"] for r in doc["resources"]}
        self.assertEqual(names, {"egressservices", "egressservices/status", "egressips", "egressfirewalls",
                                 "egressfirewalls/status", "egressqoses", "egressqoses/status"})
        eip = next(r for r in doc["resources"] if r["name"] == "egressips")
        self.assertEqual((eip["kind"], eip["namespaced"]), ("EgressIP", False))
        status, doc = self.api.request("GET", "/apis")
        self.assertIn("coordination.k8s.io", {g["name"] for g in doc["groups"]})


class WatchTest(ApiServerTest):
    def test_added_modified_deleted_from_list_rv(self):
        self.api.request("POST", NODES, node("n0"))
        _, lst = self.api.request("GET", NODES)
        rv = lst["metadata"]["resourceVersion"]
        c, r = self.api.watch(NODES + f"?watch=true&resourceVersion={rv}")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("Transfer-Encoding"), "chunked")
        self.api.request("POST", NODES, node("n1"))
        self.api.request("PATCH", NODES + "/n1", {"metadata": {"labels": {"a": "b"}}},
                         ctype="application/merge-patch+json")
        self.api.request("DELETE", NODES + "/n1")
        evs = read_events(r, 3)
        c.close()
        self.assertEqual([e["type"] for e in evs], ["ADDED", "MODIFIED", "DELETED"])
        self.assertEqual(evs[0]["object"]["kind"], "Node")
        self.assertEqual(evs[1]["object"]["metadata"]["labels"], {"a": "b"})
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
        self.assertEqual(rvs, sorted(rvs))
        self.assertGreater(rvs[0], int(rv))

    def test_watch_without_rv_starts_with_current_objects(self):
        self.api.request("POST", NODES, node("n0"))
        self.api.request("POST", NODES, node("n1"))
        c, r = self.api.watch(NODES + "?watch=1")
        evs = read_events(r, 2)
        c.close()
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
                         [("ADDED", "n0"), ("ADDED", "n1")])

    def test_replay_from_old_rv_and_other_kinds_filtered(self):
        _, lst = self.api.request("GET", NODES)
        rv = lst["metadata"]["resourceVersion"]
        self.api.request("POST", NODES, node("a"))
        self.api.request("POST", ES, egress_service("e"))
        self.api.request("POST", NODES, node("b"))
        c, r = self.api.watch(NODES + f"?watch=true&resourceVersion={rv}")
        evs = read_events(r, 2)
        c.close()
        self.assertEqual([e["object"]["metadata"]["name"] for e in evs], ["a", "b"])

    def test_timeout_seconds_ends_stream_cleanly(self):
        t0 = time.monotonic()
        c, r = self.api.watch(NODES + "?watch=true&timeoutSeconds=1")
        self.assertEqual(r.read(), b"")       # a complete chunked body (no IncompleteRead)
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, 0.9)    # not before the second asked for
        self.assertLess(took, 5)
        c.close()

    def test_bookmarks_carry_the_latest_rv(self):
        _, lst = self.api.request("GET", NODES)
        rv = lst["metadata"]["resourceVersion"]
        c, r = self.api.watch(NODES + f"?watch=true&resourceVersion={rv}&allowWatchBookmarks=true")
        _, es = self.api.request("POST", ES, egress_service("e"))   # another kind moves the rv
        self.api.test("bookmark")
        ev = read_events(r, 1)[0]
        c.close()
        self.assertEqual(ev["type"], "BOOKMARK")
        self.assertEqual(ev["object"]["kind"], "Node")
        self.assertEqual(ev["object"]["metadata"]["resourceVersion"], es["metadata"]["resourceVersion"])
        # No bookmarks for a watch that did not ask for them.
        c, r = self.api.watch(NODES + f"?watch=true&resourceVersion={rv}&timeoutSeconds=1")
        self.api.test("bookmark")
        self.assertEqual(r.read(), b"")
        c.close()

    def test_periodic_bookmarks(self):
        self.api.test("config", {"bookmarkInterval": 0.2})
        c, r = self.api.watch(NODES + "?watch=true&allowWatchBookmarks=true&timeoutSeconds=3")
        evs = read_events(r, 2)
        c.close()
        self.assertEqual([e["type"] for e in evs], ["BOOKMARK", "BOOKMARK"])

    def test_compacted_rv_gives_410(self):
        _, lst = self.api.request("GET", NODES)
        rv = lst["metadata"]["resourceVersion"]
        self.api.request("POST", NODES, node("a"))
        self.api.test("compact")
        status, st = self.api.request("GET", NODES + f"?watch=true&resourceVersion={rv}")
        self.assertEqual((status, st["kind"], st["code"], st["reason"]), (410, "Status", 410, "Expired"))
        # The same as an ERROR event in a 200 stream.
        self.api.test("config", {"watchExpiredAs": "event"})
        c, r = self.api.watch(NODES + f"?watch=true&resourceVersion={rv}")
        self.assertEqual(r.status, 200)
        ev = read_events(r, 1)[0]
        self.assertEqual(r.read(), b"")
        c.close()
        self.assertEqual((ev["type"], ev["object"]["kind"], ev["object"]["code"]), ("ERROR", "Status", 410))
        # A list at the current rv still works, and a watch from the compaction point too.
        _, lst = self.api.request("GET", NODES)
        c, r = self.api.watch(NODES + f"?watch=true&resourceVersion={lst['metadata']['resourceVersion']}"
                              "&timeoutSeconds=1")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.read(), b"")
        c.close()

    def test_expire_open_watches_mid_stream(self):
        _, lst = self.api.request("GET", NODES)
        c, r = self.api.watch(NODES + f"?watch=true&resourceVersion={lst['metadata']['resourceVersion']}")
        self.api.request("POST", NODES, node("a"))
        self.assertEqual(read_events(r, 1)[0]["type"], "ADDED")
        self.api.test("compact", {"expireWatches": True})
        ev = read_events(r, 1)[0]
        c.close()
        self.assertEqual((ev["type"], ev["object"]["code"], ev["object"]["reason"]), ("ERROR", 410, "Expired"))

    def test_label_selector_transitions(self):
        self.api.request("POST", NODES, node("n", {"role": "gw"}))
        _, lst = self.api.request("GET", NODES + "?labelSelector=role%3Dgw")
        c, r = self.api.watch(NODES + "?watch=true&labelSelector=role%3Dgw&resourceVersion="
                              + lst["metadata"]["resourceVersion"])
        mp = "application/merge-patch+json"
        self.api.request("PATCH", NODES + "/n", {"metadata": {"labels": {"role": None}}}, ctype=mp)
        self.api.request("PATCH", NODES + "/n", {"metadata": {"labels": {"role": "gw"}}}, ctype=mp)
        evs = read_events(r, 2)
        c.close()
        self.assertEqual([e["type"] for e in evs], ["DELETED", "ADDED"])

    def test_close_watches(self):
        c, r = self.api.watch(NODES + "?watch=true")
        self.api.test("close-watches")
        self.assertEqual(r.read(), b"")                 # ended cleanly
        c.close()
        c, r = self.api.watch(NODES + "?watch=true")
        log = self.api.test("requests", method="GET")["requests"]
        self.assertEqual(log[-1], {"verb": "watch", "path": NODES, "code": 200, "user": "system:admin"})   # logged while open
        self.api.test("close-watches", {"abort": True})
        with self.assertRaises(http.client.IncompleteRead):
            r.read()
        c.close()

    def test_small_chunks_and_cut_mid_event(self):
        self.api.test("config", {"chunkSize": 3})
        for i in range(3):
            self.api.request("POST", NODES, node(f"n{i}"))
        c, r = self.api.watch(NODES + "?watch=true")
        self.assertEqual(len(read_events(r, 3)), 3)     # split in 1..3-byte chunks, still whole
        c.close()
        self.api.test("faults", {"cuts": [{"afterEvents": 1}]})
        c, r = self.api.watch(NODES + "?watch=true")
        self.assertEqual(json.loads(r.readline())["object"]["metadata"]["name"], "n0")
        with self.assertRaises(http.client.IncompleteRead):
            r.read()
        c.close()
        self.api.test("faults", {"cuts": [{"afterBytes": 10}]})
        c, r = self.api.watch(NODES + "?watch=true")
        with self.assertRaises(http.client.IncompleteRead) as cm:
            r.read()
        self.assertEqual(len(cm.exception.partial), 10)
        c.close()


class WriteTest(ApiServerTest):
    def test_status_subresource(self):
        _, es = self.api.request("POST", ES, egress_service("e", host="ignored"))
        self.assertNotIn("status", self.api.request("GET", ES + "/e")[1])   # create cannot set status
        self.assertEqual(es["metadata"]["generation"], 1)
        mp = "application/merge-patch+json"
        status, out = self.api.request("PATCH", ES + "/e/status", {"status": {"host": "n1"},
                                                                   "spec": {"network": "blue"}},
                                       ctype=mp)
        self.assertEqual(status, 200)
        self.assertEqual(out["status"], {"host": "n1"})
        self.assertNotIn("network", out["spec"])
        self.assertEqual(out["metadata"]["generation"], 1)
        status, out = self.api.request("PATCH", ES + "/e", {"status": {"host": "n2"},
                                                            "spec": {"network": "blue"}}, ctype=mp)
        self.assertEqual(out["status"], {"host": "n1"})
        self.assertEqual(out["spec"]["network"], "blue")
        self.assertEqual(out["metadata"]["generation"], 2)
        # PUT on /status with everything changed only changes status.
        out["spec"]["network"] = "red"
        out["status"]["host"] = "n3"
        status, put = self.api.request("PUT", ES + "/e/status", out)
        self.assertEqual(status, 200)
        self.assertEqual((put["spec"]["network"], put["status"]["host"]), ("blue", "n3"))
        # A no-op patch makes no new revision.
        rv = put["metadata"]["resourceVersion"]
        _, same = self.api.request("PATCH", ES + "/e/status", {"status": {"host": "n3"}}, ctype=mp)
        self.assertEqual(same["metadata"]["resourceVersion"], rv)
        # A stale resourceVersion in a merge patch is a precondition.
        status, st = self.api.request("PATCH", ES + "/e/status",
                                      {"metadata": {"resourceVersion": "1"}, "status": {"host": "x"}},
                                      ctype=mp)
        self.assertEqual((status, st["reason"]), (409, "Conflict"))

    def test_patch_content_types(self):
        self.api.request("POST", NODES, node("n"))
        self.api.request("POST", ES, egress_service("e"))
        sp = "application/strategic-merge-patch+json"
        status, out = self.api.request("PATCH", NODES + "/n", {"metadata": {"labels": {"x": ""}}}, ctype=sp)
        self.assertEqual((status, out["metadata"]["labels"]), (200, {"x": ""}))
        status, st = self.api.request("PATCH", ES + "/e", {"spec": {}}, ctype=sp)
        self.assertEqual((status, st["reason"], st["code"]), (415, "UnsupportedMediaType", 415))
        status, st = self.api.request("PATCH", NODES + "/n", {"metadata": {}}, ctype="application/json")
        self.assertEqual(status, 415)
        status, out = self.api.request("PATCH", NODES + "/n",
                                       [{"op": "add", "path": "/metadata/labels/y", "value": "1"},
                                        {"op": "remove", "path": "/metadata/labels/x"}],
                                       ctype="application/json-patch+json")
        self.assertEqual((status, out["metadata"]["labels"]), (200, {"y": "1"}))
        status, st = self.api.request("PATCH", NODES + "/missing", {}, ctype="application/merge-patch+json")
        self.assertEqual(status, 404)

    def test_lease_conflicts(self):
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "egw"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
        status, created = self.api.request("POST", LEASES, lease)
        self.assertEqual(status, 201)
        status, st = self.api.request("POST", LEASES, lease)
        self.assertEqual((status, st["reason"]), (409, "AlreadyExists"))
        created["spec"]["holderIdentity"] = "b"
        status, updated = self.api.request("PUT", LEASES + "/egw", created)
        self.assertEqual((status, updated["spec"]["holderIdentity"]), (200, "b"))
        # The same (now stale) resourceVersion again: conflict.
        created["spec"]["holderIdentity"] = "c"
        status, st = self.api.request("PUT", LEASES + "/egw", created)
        self.assertEqual((status, st["reason"], st["details"]["kind"]), (409, "Conflict", "leases"))
        # Without a resourceVersion a built-in kind updates unconditionally...
        del created["metadata"]["resourceVersion"]
        status, _ = self.api.request("PUT", LEASES + "/egw", created)
        self.assertEqual(status, 200)
        # ...a custom resource does not.
        _, es = self.api.request("POST", ES, egress_service("e"))
        del es["metadata"]["resourceVersion"]
        status, st = self.api.request("PUT", ES + "/e", es)
        self.assertEqual((status, st["reason"]), (422, "Invalid"))
        status, _ = self.api.request("PUT", LEASES + "/absent", dict(lease, metadata={"name": "absent"}))
        self.assertEqual(status, 404)

    def test_delete(self):
        _, lst = self.api.request("GET", SLICES)
        self.api.request("POST", SLICES, {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                                          "metadata": {"name": "s"}, "addressType": "IPv4",
                                          "endpoints": []})
        status, out = self.api.request("DELETE", SLICES + "/s")
        self.assertEqual(status, 200)
        status, _ = self.api.request("DELETE", SLICES + "/s")
        self.assertEqual(status, 404)
        c, r = self.api.watch(SLICES + "?watch=1&resourceVersion=" + lst["metadata"]["resourceVersion"])
        evs = read_events(r, 2)
        c.close()
        self.assertEqual([e["type"] for e in evs], ["ADDED", "DELETED"])
        self.assertEqual(evs[1]["object"]["metadata"]["resourceVersion"], out["metadata"]["resourceVersion"])


class ValidationTest(ApiServerTest):
    """Writes a real server refuses: 422 Invalid with the field causes, or 400 when undecodable."""

    def assertInvalid(self, reply, kind, name, field, fragment, reason="FieldValueInvalid", group=None):
        status, st = reply
        self.assertEqual((status, st["kind"], st["status"], st["reason"], st["code"]),
                         (422, "Status", "Failure", "Invalid", 422), st)
        qualified = f"{kind}.{group}" if group else kind
        self.assertTrue(st["message"].startswith(f'{qualified} "{name}" is invalid: {field}: '), st["message"])
        self.assertEqual((st["details"]["name"], st["details"]["kind"]), (name, kind))
        if group:
            self.assertEqual(st["details"]["group"], group)
        causes = [c for c in st["details"]["causes"] if c["field"] == field and c["reason"] == reason]
        self.assertTrue(any(fragment in c["message"] for c in causes), st["details"]["causes"])

    def test_label_keys_and_values(self):
        self.assertEqual(self.api.request("POST", NODES, node("n"))[0], 201)
        long_name = "egress-service.k8s.ovn.org/" + "a" * 30 + "-" + "b" * 33     # name part: 64
        for labels, fragment in (
                ({long_name: ""}, "name part must be no more than 63 characters"),
                ({"a/b/c": ""}, "a qualified name must consist of"),
                ({"-a": ""}, "name part must consist of alphanumeric characters"),
                ({"Example.com/a": ""}, "prefix part a lowercase RFC 1123 subdomain"),
                ({"/a": ""}, "prefix part must be non-empty"),
                ({("p" * 254) + "/a": ""}, "prefix part must be no more than 253 characters"),
                ({"a": "v" * 64}, "must be no more than 63 characters"),
                ({"a": "bad value"}, "a valid label must be an empty string")):
            with self.subTest(labels=labels):
                self.assertInvalid(self.api.request("PATCH", NODES + "/n", {"metadata": {"labels": labels}},
                                                    ctype="application/merge-patch+json"),
                                   "Node", "n", "metadata.labels", fragment)
                self.assertInvalid(self.api.request("POST", SVCS, {"metadata": {"name": "s", "labels": labels}}),
                                   "Service", "s", "metadata.labels", fragment)
        # The longest valid ones pass, and nothing was stored by the refused writes.
        ok = {"egress-service.k8s.ovn.org/" + "a" * 63: "", "a" * 63: "v" * 63, "x.y/A_b.c-D": "ok_-Z.9"}
        status, out = self.api.request("PATCH", NODES + "/n", {"metadata": {"labels": ok}},
                                       ctype="application/merge-patch+json")
        self.assertEqual((status, out["metadata"]["labels"]), (200, ok))
        self.assertEqual(self.api.request("GET", SVCS + "/s")[0], 404)

    def test_egress_qos_schema(self):
        def qos(*rules, name="default"):
            return {"apiVersion": "k8s.ovn.org/v1", "kind": "EgressQoS",
                    "metadata": {"name": name, "namespace": "default"}, "spec": {"egress": list(rules)}}

        for obj, name, field, fragment, reason in (
                (qos({"dscp": 64}), "default", "spec.egress[0].dscp", "should be less than or equal to 63",
                 "FieldValueInvalid"),
                (qos({"dscp": -1}), "default", "spec.egress[0].dscp", "should be greater than or equal to 0",
                 "FieldValueInvalid"),
                (qos({"dscp": "46"}), "default", "spec.egress[0].dscp", "must be of type integer", "FieldValueTypeInvalid"),
                (qos({"dstCIDR": "10.0.0.0/8"}), "default", "spec.egress[0].dscp", "Required value",
                 "FieldValueRequired"),
                (qos({"dscp": 1, "dstCIDR": "10.0.0.0/33"}), "default", "spec.egress[0].dstCIDR",
                 'must be of type cidr: "10.0.0.0/33"', "FieldValueInvalid"),
                (qos({"dscp": 1, "dstCIDR": "10.0.0.1"}), "default", "spec.egress[0].dstCIDR", "must be of type cidr",
                 "FieldValueInvalid"),
                (qos({"dscp": 1}, name="extra"), "extra", "metadata.name", "should match '^default$'",
                 "FieldValueInvalid")):
            with self.subTest(obj=obj):
                self.assertInvalid(self.api.request("POST", "/apis/k8s.ovn.org/v1/namespaces/default/egressqoses", obj),
                                   "EgressQoS", name, field, fragment, reason=reason, group="k8s.ovn.org")
        # Strict: a field the schema does not know is refused, not pruned.
        status, st = self.api.request("POST", EQ, qos({"dscp": 1, "priority": 3}))
        self.assertEqual((status, st["reason"]), (400, "BadRequest"), st)
        self.assertIn('unknown field "spec.egress[0].priority"', st["message"])
        self.assertEqual(self.api.request("GET", EQ + "/default")[0], 404)
        q = qos({"dscp": 46, "dstCIDR": "2001:db8::/32", "podSelector": {"matchLabels": {"app": "voice"}}},
                {"dscp": 0})
        status, out = self.api.request("POST", EQ, q)
        self.assertEqual((status, out["spec"]), (201, q["spec"]), out)
        # The status is a subresource: a write to the object keeps it, /status changes only it.
        applied = {"status": {"status": "EgressQoS Rules applied"}}
        status, out = self.api.request("PATCH", EQ + "/default/status", applied, ctype="application/merge-patch+json")
        self.assertEqual((status, out["status"]), (200, {"status": "EgressQoS Rules applied"}))
        status, out = self.api.request("PATCH", EQ + "/default", {"spec": {"egress": [{"dscp": 8}]}, "status": {}},
                                       ctype="application/merge-patch+json")
        self.assertEqual((status, out["spec"]["egress"], out["status"]),
                         (200, [{"dscp": 8}], {"status": "EgressQoS Rules applied"}))
        _, lst = self.api.request("GET", "/apis/k8s.ovn.org/v1/egressqoses")
        self.assertEqual([(o["kind"], o["metadata"]["name"]) for o in lst["items"]], [("EgressQoS", "default")])

    def test_egress_firewall_schema(self):
        def firewall(*rules):
            return {"apiVersion": "k8s.ovn.org/v1", "kind": "EgressFirewall",
                    "metadata": {"name": "default", "namespace": "default"}, "spec": {"egress": list(rules)}}

        cidr = {"cidrSelector": "192.0.2.0/24"}
        for fw, field, fragment, reason in (
                (firewall({"type": "allow", "to": cidr}), "spec.egress[0].type",
                 "spec.egress[0].type in body should match '^Allow|Deny$'", "FieldValueInvalid"),
                (firewall({"type": "Deny"}), "spec.egress[0].to", "Required value", "FieldValueRequired"),
                (firewall({"type": "Deny", "to": {}}), "spec.egress[0].to", "Required value", "FieldValueRequired"),
                (firewall({"type": "Deny", "to": {"cidrSelector": "10.0.0.0/8", "dnsName": "a.example"}}),
                 "spec.egress[0].to", "Too many: 2: must have at most 1 items", "FieldValueTooMany"),
                (firewall({"type": "Deny", "to": {"dnsName": "a..example"}}), "spec.egress[0].to.dnsName",
                 "should match", "FieldValueInvalid"),
                (firewall({"type": "Deny", "to": cidr, "ports": [{"protocol": "ICMP", "port": 1}]}),
                 "spec.egress[0].ports[0].protocol", "should match '^TCP|UDP|SCTP$'", "FieldValueInvalid"),
                (firewall({"type": "Deny", "to": cidr, "ports": [{"protocol": "TCP", "port": 0}]}),
                 "spec.egress[0].ports[0].port", "Invalid value: 0: spec.egress[0].ports[0].port in body should be "
                 "greater than or equal to 1", "FieldValueInvalid"),
                (firewall({"type": "Deny", "to": cidr, "ports": [{"protocol": "TCP", "port": 65536}]}),
                 "spec.egress[0].ports[0].port", "should be less than or equal to 65535", "FieldValueInvalid"),
                (firewall({"type": "Deny", "to": cidr, "ports": [{"protocol": "TCP"}]}),
                 "spec.egress[0].ports[0].port", "Required value", "FieldValueRequired")):
            with self.subTest(fw=fw["spec"]):
                self.assertInvalid(self.api.request("POST", EF, fw), "EgressFirewall", "default", field, fragment,
                                   reason=reason, group="k8s.ovn.org")
        self.assertEqual(self.api.request("GET", EF + "/default")[0], 404)
        # A valid one is stored with unknown fields pruned, and its status is a subresource.
        fw = firewall({"type": "Allow", "to": {"dnsName": "*.example.com"},
                       "ports": [{"protocol": "UDP", "port": 53}]},
                      {"type": "Deny", "to": {"nodeSelector": {"matchLabels": {"role": "db"}}}, "extra": 1})
        status, out = self.api.request("POST", EF, fw)
        self.assertEqual(status, 201, out)
        self.assertEqual(out["spec"]["egress"][1],
                         {"type": "Deny", "to": {"nodeSelector": {"matchLabels": {"role": "db"}}}})
        applied = {"status": {"status": "EgressFirewall Rules applied"}}
        status, out = self.api.request("PATCH", EF + "/default/status", applied, ctype="application/merge-patch+json")
        self.assertEqual((status, out["status"]), (200, {"status": "EgressFirewall Rules applied"}))
        _, lst = self.api.request("GET", "/apis/k8s.ovn.org/v1/egressfirewalls")
        self.assertEqual([(o["kind"], o["metadata"]["name"]) for o in lst["items"]], [("EgressFirewall", "default")])

    def test_dns_name_resolver_schema(self):
        dnr = "/apis/network.openshift.io/v1alpha1/namespaces/openshift-ovn-kubernetes/dnsnameresolvers"

        def resolver(name, spec_name):
            return {"apiVersion": "network.openshift.io/v1alpha1", "kind": "DNSNameResolver",
                    "metadata": {"name": name, "namespace": "openshift-ovn-kubernetes"}, "spec": {"name": spec_name}}

        for spec_name, fragment in (("www.example.com", "should match"),  # no final dot
                                    ("example.", "should match"),         # one label
                                    ("*.*.example.com.", "should match"),
                                    ("WWW.example.com.", "should match")):
            with self.subTest(spec_name=spec_name):
                self.assertInvalid(self.api.request("POST", dnr, resolver("r", spec_name)), "DNSNameResolver", "r",
                                   "spec.name", fragment, reason="FieldValueInvalid", group="network.openshift.io")
        obj = resolver("r", "*.example.com.")
        obj["spec"]["extra"] = 1
        status, st = self.api.request("POST", dnr, obj)
        self.assertEqual((status, st["reason"]), (400, "BadRequest"))
        self.assertIn('unknown field "spec.extra"', st["message"])
        self.assertEqual(self.api.request("GET", dnr + "/r")[0], 404)

        status, out = self.api.request("POST", dnr, resolver("r", "*.example.com."))
        self.assertEqual(status, 201, out)
        good = {"status": {"resolvedNames": [
            {"dnsName": "www.example.com.", "resolutionFailures": 0,
             "resolvedAddresses": [{"ip": "192.0.2.1", "ttlSeconds": 30, "lastLookupTime": "2024-05-01T10:00:00Z"}]}]}}
        status, out = self.api.request("PATCH", dnr + "/r/status", good, ctype="application/merge-patch+json")
        self.assertEqual((status, out.get("status")), (200, good["status"]), out)
        # Required fields of a resolved name and address, and metav1.Time.
        bad = {"status": {"resolvedNames": [{"dnsName": "www.example.com."}]}}
        self.assertInvalid(self.api.request("PATCH", dnr + "/r/status", bad, ctype="application/merge-patch+json"),
                           "DNSNameResolver", "r", "status.resolvedNames[0].resolvedAddresses", "Required value",
                           reason="FieldValueRequired", group="network.openshift.io")
        bad = {"status": {"resolvedNames": [{"dnsName": "www.example.com.", "resolvedAddresses": [
            {"ip": "192.0.2.1", "lastLookupTime": "2024-05-01T10:00:00Z"}]}]}}
        self.assertInvalid(self.api.request("PATCH", dnr + "/r/status", bad, ctype="application/merge-patch+json"),
                           "DNSNameResolver", "r", "status.resolvedNames[0].resolvedAddresses[0].ttlSeconds",
                           "Required value", reason="FieldValueRequired", group="network.openshift.io")
        bad = {"status": {"resolvedNames": [{"dnsName": "www.example.com.", "resolvedAddresses": [
            {"ip": "192.0.2.1", "ttlSeconds": 30, "lastLookupTime": "yesterday"}]}]}}
        status, st = self.api.request("PATCH", dnr + "/r/status", bad, ctype="application/merge-patch+json")
        self.assertEqual((status, st["reason"]), (400, "BadRequest"))
        # The refused writes changed nothing, and the list carries the kind (a custom resource).
        _, out = self.api.request("GET", dnr + "/r")
        self.assertEqual(out["status"], good["status"])
        _, lst = self.api.request("GET", "/apis/network.openshift.io/v1alpha1/dnsnameresolvers")
        self.assertEqual([(o["kind"], o["metadata"]["name"]) for o in lst["items"]], [("DNSNameResolver", "r")])

    def test_egress_service_schema(self):
        es = egress_service("e")
        es["spec"]["sourceIPBy"] = "NodeIP"
        self.assertInvalid(self.api.request("POST", ES, es), "EgressService", "e", "spec.sourceIPBy",
                           'Unsupported value: "NodeIP": supported values: "LoadBalancerIP", "Network"',
                           reason="FieldValueNotSupported", group="k8s.ovn.org")
        es = egress_service("e")
        es["spec"]["network"] = 100
        self.assertInvalid(self.api.request("POST", ES, es), "EgressService", "e", "spec.network",
                           "spec.network in body must be of type string", reason="FieldValueTypeInvalid",
                           group="k8s.ovn.org")
        es = egress_service("e")
        es["spec"]["nodeSelector"] = {"matchExpressions": [{"key": "k"}]}
        self.assertInvalid(self.api.request("POST", ES, es), "EgressService", "e",
                           "spec.nodeSelector.matchExpressions[0].operator", "Required value",
                           reason="FieldValueRequired", group="k8s.ovn.org")
        # Unknown fields are pruned; a valid one is stored.
        es = egress_service("e")
        es["spec"]["unknownField"] = 1
        status, out = self.api.request("POST", ES, es)
        self.assertEqual((status, out["spec"]), (201, {"sourceIPBy": "LoadBalancerIP"}))
        # status.host is required once status is written, and must be a string.
        self.assertInvalid(self.api.request("PATCH", ES + "/e/status", {"status": {"other": "x"}},
                                            ctype="application/merge-patch+json"),
                           "EgressService", "e", "status.host", "Required value", reason="FieldValueRequired",
                           group="k8s.ovn.org")
        self.assertInvalid(self.api.request("PATCH", ES + "/e/status", {"status": {"host": 7}},
                                            ctype="application/merge-patch+json"),
                           "EgressService", "e", "status.host", "must be of type string",
                           reason="FieldValueTypeInvalid", group="k8s.ovn.org")
        status, out = self.api.request("PATCH", ES + "/e/status", {"status": {"host": "n1"}},
                                       ctype="application/merge-patch+json")
        self.assertEqual((status, out["status"]), (200, {"host": "n1"}))
        # A spec merge patch with a bad value is refused and leaves the object as it was.
        self.assertEqual(self.api.request("PATCH", ES + "/e", {"spec": {"sourceIPBy": "x"}},
                                          ctype="application/merge-patch+json")[0], 422)
        self.assertEqual(self.api.request("GET", ES + "/e")[1]["spec"]["sourceIPBy"], "LoadBalancerIP")

    def test_egress_ip_schema_scope_and_status(self):
        eip = {"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP", "metadata": {"name": "eip-a"},
               "spec": {"egressIPs": ["192.0.2.10", "2001:db8::10"],
                        "namespaceSelector": {"matchLabels": {"env": "prod"}}},
               "status": {"items": [{"node": "gw-1", "egressIP": "192.0.2.10"}]}}
        # Required fields and types, as the CRD's schema says.
        bad = json.loads(json.dumps(eip))
        del bad["spec"]["namespaceSelector"]
        self.assertInvalid(self.api.request("POST", EIPS, bad), "EgressIP", "eip-a", "spec.namespaceSelector",
                           "Required value", reason="FieldValueRequired", group="k8s.ovn.org")
        bad = json.loads(json.dumps(eip))
        bad["spec"]["egressIPs"] = "192.0.2.10"
        self.assertInvalid(self.api.request("POST", EIPS, bad), "EgressIP", "eip-a", "spec.egressIPs",
                           "must be of type array", reason="FieldValueTypeInvalid", group="k8s.ovn.org")
        # An unknown field is refused, not pruned, and nothing is stored.
        for where in ("spec", "podSelector"):
            bad = json.loads(json.dumps(eip))
            if where == "spec":
                bad["spec"]["egressIP"] = "192.0.2.1"
                field = "spec.egressIP"
            else:
                bad["spec"]["podSelector"] = {"matchLabel": {"app": "web"}}
                field = "spec.podSelector.matchLabel"
            with self.subTest(field=field):
                status, st = self.api.request("POST", EIPS, bad)
                self.assertEqual((status, st["reason"]), (400, "BadRequest"), st)
                self.assertIn(f'strict decoding error: unknown field "{field}"', st["message"])
        self.assertEqual(self.api.request("GET", EIPS + "/eip-a")[0], 404)
        # Cluster-scoped: created without a namespace, not found under one. There is no status
        # subresource (upstream's CRD has none): create keeps status, and /status does not exist.
        status, out = self.api.request("POST", EIPS, eip)
        self.assertEqual(status, 201, out)
        self.assertNotIn("namespace", out["metadata"])
        self.assertEqual(out["status"], eip["status"])
        self.assertEqual(self.api.request("GET", "/apis/k8s.ovn.org/v1/namespaces/default/egressips/eip-a")[0], 404)
        for method in ("GET", "PATCH", "PUT"):
            with self.subTest(method=method):
                status, _ = self.api.request(method, EIPS + "/eip-a/status", {"status": {"items": []}},
                                             ctype="application/merge-patch+json")
                self.assertEqual(status, 404)
        # A write to the object changes status with it, and counts in metadata.generation.
        status, out = self.api.request("PATCH", EIPS + "/eip-a",
                                       {"status": {"items": [{"node": "gw-2", "egressIP": "2001:db8::10"}]}},
                                       ctype="application/merge-patch+json")
        self.assertEqual(status, 200, out)
        self.assertEqual(out["status"]["items"], [{"node": "gw-2", "egressIP": "2001:db8::10"}])
        self.assertEqual(out["spec"]["egressIPs"], ["192.0.2.10", "2001:db8::10"])
        self.assertEqual(out["metadata"]["generation"], 2)
        out["status"] = {"items": [{"node": "gw-1", "egressIP": "192.0.2.10"}]}
        status, out = self.api.request("PUT", EIPS + "/eip-a", out)
        self.assertEqual(status, 200, out)
        self.assertEqual(out["status"]["items"], [{"node": "gw-1", "egressIP": "192.0.2.10"}])
        self.assertEqual(out["metadata"]["generation"], 3)
        # The status schema holds for writes to the object.
        self.assertInvalid(self.api.request("PATCH", EIPS + "/eip-a", {"status": {"items": [{"node": "x"}]}},
                                            ctype="application/merge-patch+json"),
                           "EgressIP", "eip-a", "status.items[0].egressIP", "Required value",
                           reason="FieldValueRequired", group="k8s.ovn.org")
        status, st = self.api.request("PATCH", EIPS + "/eip-a",
                                      {"status": {"items": [{"node": "x", "egressIP": "192.0.2.10", "ip": "y"}]}},
                                      ctype="application/merge-patch+json")
        self.assertEqual((status, st.get("reason")), (400, "BadRequest"), st)
        self.assertIn('strict decoding error: unknown field "status.items[0].ip"', st["message"])

    def test_namespaces_and_pods(self):
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"env": "prod"}}}
        self.assertEqual(self.api.request("POST", "/api/v1/namespaces", ns)[0], 201)
        status, out = self.api.request("GET", "/api/v1/namespaces/shop")
        self.assertEqual((status, out["metadata"]["labels"]), (200, {"env": "prod"}))
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "labels": {"app": "web"}},
               "spec": {"nodeName": "worker-1"}}
        self.assertEqual(self.api.request("POST", "/api/v1/namespaces/shop/pods", pod)[0], 201)
        # A pod's addresses are status, written by its kubelet through /status.
        status, out = self.api.request("PATCH", "/api/v1/namespaces/shop/pods/web-1/status",
                                       {"status": {"phase": "Running", "podIPs": [{"ip": "10.128.0.5"}]}},
                                       ctype="application/merge-patch+json")
        self.assertEqual((status, out["status"]["podIPs"]), (200, [{"ip": "10.128.0.5"}]), out)
        status, out = self.api.request("GET", "/api/v1/pods?labelSelector=app%3Dweb")
        self.assertEqual([i["metadata"]["name"] for i in out["items"]], ["web-1"])
        self.assertEqual(self.api.request("GET", "/api/v1/namespaces/shop/status")[0], 404)

    def test_lease_fields_and_micro_time(self):
        def lease(**spec):
            return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
                    "spec": spec}
        good = "2026-11-24T10:00:00.123456Z"
        for t in ("2026-11-24T10:00:00Z", "2026-11-24T10:00:00.123Z", "2026-11-24 10:00:00.123456Z",
                  "2026-11-24T10:00:00.1234567Z", "yesterday"):
            with self.subTest(time=t):
                status, st = self.api.request("POST", LEASES, lease(renewTime=t))
                self.assertEqual((status, st["kind"], st["reason"]), (400, "Status", "BadRequest"), st)
                self.assertIn('Lease in version "v1" cannot be handled as a Lease', st["message"])
                self.assertIn(t, st["message"])
        self.assertEqual(self.api.request("POST", LEASES, lease(holderIdentity=5))[0], 400)
        self.assertInvalid(self.api.request("POST", LEASES, lease(leaseDurationSeconds=0)), "Lease", "l",
                           "spec.leaseDurationSeconds", "must be greater than 0", group="coordination.k8s.io")
        self.assertInvalid(self.api.request("POST", LEASES, lease(leaseTransitions=-1)), "Lease", "l",
                           "spec.leaseTransitions", "must be greater than or equal to 0",
                           group="coordination.k8s.io")
        status, out = self.api.request("POST", LEASES, lease(holderIdentity="a", leaseDurationSeconds=3,
                                                             acquireTime=good, renewTime="2026-11-24T11:00:00.000001+01:00"))
        self.assertEqual(status, 201, out)
        out["spec"]["renewTime"] = "2026-11-24T10:00:01Z"
        self.assertEqual(self.api.request("PUT", LEASES + "/l", out)[0], 400)


class ClusterBehaviourTest(ApiServerTest):
    """The watch cache window, finalizers, heartbeats and selectors, as on a real cluster."""
    args = ("--watch-cache-window", "5", "--finalizer-delay", "0.2")

    def setUp(self):
        super().setUp()
        self.api.test("config", {"watchExpiredAs": "event", "nodeHeartbeat": 0, "watchCacheWindow": 5})

    def test_resume_outside_the_window_gets_410_as_an_error_event(self):
        _, lst = self.api.request("GET", NODES)
        rv0 = lst["metadata"]["resourceVersion"]
        for i in range(5):
            self.api.request("POST", NODES, node(f"n{i}"))
        # Five node events since rv0: still inside the window, all replayed.
        c, r = self.api.watch(NODES + "?watch=1&resourceVersion=" + rv0)
        self.assertEqual(r.status, 200)
        self.assertEqual([e["type"] for e in read_events(r, 5)], ["ADDED"] * 5)
        c.close()
        # Other kinds' events do not push nodes out of the window...
        for i in range(8):
            self.api.request("POST", ES, egress_service(f"e{i}"))
        c, r = self.api.watch(NODES + "?watch=1&resourceVersion=" + rv0)
        self.assertEqual(read_events(r, 1)[0]["object"]["metadata"]["name"], "n0")
        c.close()
        # ...a sixth node event does: 410 as an ERROR event in a 200 stream, then the stream ends.
        self.api.request("POST", NODES, node("n5"))
        c, r = self.api.watch(NODES + "?watch=1&resourceVersion=" + rv0)
        self.assertEqual(r.status, 200)
        evs = [json.loads(line) for line in r.read().splitlines()]
        c.close()
        self.assertEqual(len(evs), 1, evs)
        self.assertEqual(evs[0]["type"], "ERROR")
        st = evs[0]["object"]
        self.assertEqual((st["kind"], st["code"], st["reason"]), ("Status", 410, "Expired"))
        self.assertRegex(st["message"], r"^too old resource version: \d+ \(\d+\)$")
        # A list still works, and so does a watch from its resourceVersion.
        _, lst = self.api.request("GET", NODES)
        self.assertEqual(len(lst["items"]), 6)
        c, r = self.api.watch(NODES + "?watch=1&timeoutSeconds=1&resourceVersion=" + lst["metadata"]["resourceVersion"])
        self.assertEqual(r.read(), b"")
        c.close()
        # The alternative: an HTTP 410.
        self.api.test("config", {"watchExpiredAs": "http"})
        status, st = self.api.request("GET", NODES + "?watch=1&resourceVersion=" + rv0)
        self.assertEqual((status, st["reason"]), (410, "Expired"))

    def test_load_balancer_service_deletion_goes_through_the_finalizer(self):
        _, lst = self.api.request("GET", SVCS)
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"},
               "spec": {"type": "LoadBalancer"}}
        status, created = self.api.request("POST", SVCS, svc)
        self.assertEqual(created["metadata"]["finalizers"], ["service.kubernetes.io/load-balancer-cleanup"])
        c, r = self.api.watch(SVCS + "?watch=1&resourceVersion=" + lst["metadata"]["resourceVersion"])
        status, out = self.api.request("DELETE", SVCS + "/lb")
        self.assertEqual(status, 200)
        self.assertTrue(out["metadata"]["deletionTimestamp"])
        self.assertEqual(self.api.request("GET", SVCS + "/lb")[0], 200)     # still there, being deleted
        evs = read_events(r, 4)
        c.close()
        self.assertEqual([e["type"] for e in evs], ["ADDED", "MODIFIED", "MODIFIED", "DELETED"])
        self.assertIn("deletionTimestamp", evs[1]["object"]["metadata"])
        self.assertNotIn("finalizers", evs[2]["object"]["metadata"])
        self.assertEqual(self.api.request("GET", SVCS + "/lb")[0], 404)
        # Seeded through the control API too; a ClusterIP Service has no finalizer and goes at once.
        self.api.test("upsert", dict(svc, metadata={"name": "lb2", "namespace": "default"}))
        self.assertEqual(self.api.request("GET", SVCS + "/lb2")[1]["metadata"]["finalizers"],
                         ["service.kubernetes.io/load-balancer-cleanup"])
        self.api.request("POST", SVCS, {"metadata": {"name": "plain"}, "spec": {"type": "ClusterIP"}})
        self.assertEqual(self.api.request("DELETE", SVCS + "/plain")[0], 200)
        self.assertEqual(self.api.request("GET", SVCS + "/plain")[0], 404)

    def test_node_heartbeats(self):
        self.api.request("POST", NODES, node("n1"))
        _, lst = self.api.request("GET", NODES)
        self.api.test("config", {"nodeHeartbeat": 1})
        c, r = self.api.watch(NODES + "?watch=1&resourceVersion=" + lst["metadata"]["resourceVersion"])
        evs = read_events(r, 2)
        c.close()
        self.api.test("config", {"nodeHeartbeat": 0})
        self.assertEqual([e["type"] for e in evs], ["MODIFIED", "MODIFIED"])
        beats = [e["object"]["status"]["conditions"][0]["lastHeartbeatTime"] for e in evs]
        self.assertNotEqual(beats[0], beats[1])
        self.assertEqual(evs[1]["object"]["metadata"]["labels"], {})

    def test_field_selectors_are_honoured_or_refused(self):
        for name in ("a", "b"):
            self.api.request("POST", NODES, node(name))
            self.api.request("POST", ES, egress_service(name))
        _, lst = self.api.request("GET", NODES + "?fieldSelector=metadata.name%3Da")
        self.assertEqual([o["metadata"]["name"] for o in lst["items"]], ["a"])
        _, lst = self.api.request("GET", NODES + "?fieldSelector=metadata.name!%3Da")
        self.assertEqual([o["metadata"]["name"] for o in lst["items"]], ["b"])
        _, lst = self.api.request("GET", "/apis/k8s.ovn.org/v1/egressservices?fieldSelector=metadata.namespace%3Dother")
        self.assertEqual(lst["items"], [])
        _, lst = self.api.request("GET", ES + "?fieldSelector=metadata.namespace%3Ddefault,metadata.name%3D%3Db")
        self.assertEqual([o["metadata"]["name"] for o in lst["items"]], ["b"])
        # On a watch too.
        _, lst = self.api.request("GET", NODES)
        c, r = self.api.watch(NODES + "?watch=1&fieldSelector=metadata.name%3Db&resourceVersion="
                              + lst["metadata"]["resourceVersion"])
        for name in ("a", "b"):
            self.api.request("PATCH", NODES + "/" + name, {"metadata": {"labels": {"x": "1"}}},
                             ctype="application/merge-patch+json")
        evs = read_events(r, 1)
        c.close()
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs], [("MODIFIED", "b")])
        # Fields a kind cannot be selected on are refused, never ignored.
        status, st = self.api.request("GET", NODES + "?fieldSelector=status.phase%3DRunning")
        self.assertEqual((status, st["reason"], st["message"]), (400, "BadRequest",
                                                                 "field label not supported: status.phase"))
        status, st = self.api.request("GET", ES + "?watch=1&fieldSelector=spec.sourceIPBy%3DNetwork")
        self.assertEqual((status, st["reason"]), (400, "BadRequest"))
        self.assertIn('"spec.sourceIPBy" is not a known field selector', st["message"])
        self.assertEqual(self.api.request("GET", NODES + "?fieldSelector=metadata.name")[0], 400)
        # Malformed label selectors too.
        self.assertEqual(self.api.request("GET", NODES + "?labelSelector=a%20b%3Dc")[0], 400)
        self.assertEqual(self.api.request("GET", NODES + "?labelSelector=x%3D" + "v" * 64)[0], 400)
        self.assertEqual(self.api.request("GET", NODES + "?labelSelector=x%3D1")[0], 200)


class FaultTest(ApiServerTest):
    def test_errors_delays_and_request_log(self):
        self.api.test("faults", {"errors": [{"count": 2, "code": 500, "path": "/nodes"}]})
        self.assertEqual(self.api.request("GET", NODES)[0], 500)
        status, st = self.api.request("GET", NODES)
        self.assertEqual((status, st["reason"]), (500, "InternalError"))
        self.assertEqual(self.api.request("GET", NODES)[0], 200)
        self.assertEqual(self.api.request("GET", SVCS)[0], 200)
        self.api.test("faults", {"delays": [{"count": 1, "ms": 300, "verb": "list"}]})
        t0 = time.monotonic()
        self.api.request("GET", NODES)
        self.assertGreaterEqual(time.monotonic() - t0, 0.29)
        self.api.request("POST", NODES, node("n"))
        self.api.request("PATCH", NODES + "/n", {"metadata": {"labels": {"a": "b"}}},
                         ctype="application/merge-patch+json")
        log = self.api.test("requests", method="GET")
        self.assertEqual(log["counts"], {"list": 5, "create": 1, "patch": 1})
        self.assertEqual([r["code"] for r in log["requests"][:3]], [500, 500, 200])
        self.assertEqual(log["requests"][-1], {"verb": "patch", "path": NODES + "/n", "code": 200,
                                               "user": "system:admin"})


class RestartTest(ApiServerTest):
    """A restart (an outage) is followed by --restart-warm-up seconds of 403s for all but the
    admin, as kube-apiserver refuses until its RBAC informers are filled."""
    args = ("--token", "user-token", "--admin-token", "admin-token", "--restart-warm-up", "1.5")

    def get(self, token):
        try:
            return self.api.request("GET", NODES, token=token)
        except (OSError, http.client.HTTPException):
            return None, None       # the server is away: the connection closed unanswered

    def until_answered(self, token, deadline=5.0):
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            status, doc = self.get(token)
            if status is not None:
                return status, doc, time.monotonic()
            time.sleep(0.02)
        self.fail("the server did not come back")

    def test_outage_then_warm_up_refusals(self):
        self.assertEqual(self.get("user-token")[0], 200)
        self.api.test("disrupt", {"outage": 0.5})
        self.assertEqual(self.get("user-token"), (None, None))
        t0 = time.monotonic()
        status, doc, back = self.until_answered("user-token")
        self.assertEqual((status, doc["reason"]), (403, "Forbidden"))
        self.assertIn('User "', doc["message"])
        self.assertEqual(self.get("admin-token")[0], 200)     # system:masters are not held back
        # Refused for the warm-up, then allowed: both measured on the client's clock.
        end = time.monotonic() + 5
        while self.get("user-token")[0] == 403 and time.monotonic() < end:
            time.sleep(0.05)
        allowed = time.monotonic()
        self.assertEqual(self.get("user-token")[0], 200)
        self.assertGreaterEqual(allowed - t0, 0.5 + 1.5 - 0.1)
        self.assertLess(allowed - back, 1.5 + 1.0)
        codes = [r["code"] for r in self.api.test("requests", method="GET")["requests"]]
        self.assertIn(403, codes)

    def test_warm_up_per_disruption_overrides_the_default(self):
        self.api.test("disrupt", {"outage": 0.3, "warmUp": 0})
        status, _, _ = self.until_answered("user-token")
        self.assertEqual(status, 200)
        self.api.test("disrupt", {"warmUp": 0.5})            # alone: a warm-up from now
        self.assertEqual(self.get("user-token")[0], 403)
        self.api.test("disrupt", {"clear": True})
        self.assertEqual(self.get("user-token")[0], 200)


class AuthTest(ApiServerTest):
    args = ("--token", "secret")

    def test_bearer_token(self):
        status, st = self.api.request("GET", NODES)
        self.assertEqual((status, st["kind"], st["reason"], st["code"]), (401, "Status", "Unauthorized", 401))
        self.assertEqual(self.api.request("GET", NODES, token="wrong")[0], 401)
        self.assertEqual(self.api.request("GET", NODES, token="secret")[0], 200)
        self.api.test("config", {"token": "rotated"})
        self.assertEqual(self.api.request("GET", NODES, token="secret")[0], 401)
        self.assertEqual(self.api.request("GET", NODES, token="rotated")[0], 200)
        self.api.test("config", {"token": "secret"})


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)


RBAC = os.path.join(HERE, "..", "..", "docker", "k8s", "rbac.yaml")
EGWD = "system:serviceaccount:egw-system:egwd"


class AuthzTest(ApiServerTest):
    """--rbac docker/k8s/rbac.yaml: egwd's token gets what the manifest grants, nothing more."""
    args = ("--token", "egwd-token", "--admin-token", "admin-token", "--rbac", RBAC)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.egwd = Client(cls.server.port, token="egwd-token")
        cls.api = Client(cls.server.port, token="admin-token")

    def assertForbidden(self, reply, message, name, kind, group=None):
        status, st = reply
        self.assertEqual((status, st["kind"], st["status"], st["reason"], st["code"]),
                         (403, "Status", "Failure", "Forbidden", 403), st)
        self.assertEqual(st["message"], message)
        want = {"name": name, "kind": kind}
        if group:
            want["group"] = group
        self.assertEqual(st["details"], want)

    def test_rules_of_the_manifest(self):
        self.api.request("POST", NODES, node("n1"))
        self.api.request("POST", ES, egress_service("web"))
        merge = "application/merge-patch+json"
        # Granted: reads, node label patches, EgressService status, Leases in egw-system.
        self.assertEqual(self.egwd.request("GET", NODES)[0], 200)
        self.assertEqual(self.egwd.request("GET", NODES + "?watch=1&timeoutSeconds=1")[0], 200)
        self.assertEqual(self.egwd.request("GET", "/apis/k8s.ovn.org/v1/egressservices")[0], 200)
        self.assertEqual(self.egwd.request("PATCH", NODES + "/n1", {"metadata": {"labels": {"a": "b"}}},
                                           ctype=merge)[0], 200)
        self.assertEqual(self.egwd.request("PATCH", ES + "/web/status", {"status": {"host": "n1"}},
                                           ctype=merge)[0], 200)
        own = "/apis/coordination.k8s.io/v1/namespaces/egw-system/leases"
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "egw-leader"},
                 "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 15}}
        status, created = self.egwd.request("POST", own, lease)
        self.assertEqual(status, 201, created)
        self.assertEqual(self.egwd.request("PUT", own + "/egw-leader", created)[0], 200)
        self.assertEqual(self.egwd.request("GET", own + "?watch=1&timeoutSeconds=1")[0], 200)
        self.assertEqual(self.egwd.request("GET", "/apis/coordination.k8s.io/v1")[0], 200)   # discovery
        # Refused, with kube-apiserver's message (egwd never reads one object by name but Leases).
        self.assertForbidden(self.egwd.request("GET", NODES + "/n1"),
                             f'nodes "n1" is forbidden: User "{EGWD}" cannot get resource "nodes" in API group "" '
                             "at the cluster scope", "n1", "nodes")
        self.assertForbidden(self.egwd.request("POST", NODES, node("n2")),
                             f'nodes is forbidden: User "{EGWD}" cannot create resource "nodes" in API group "" '
                             "at the cluster scope", "", "nodes")
        self.assertForbidden(self.egwd.request("DELETE", NODES + "/n1"),
                             f'nodes "n1" is forbidden: User "{EGWD}" cannot delete resource "nodes" in API group "" '
                             "at the cluster scope", "n1", "nodes")
        self.assertForbidden(self.egwd.request("PATCH", ES + "/web", {"spec": {"network": "x"}}, ctype=merge),
                             f'egressservices.k8s.ovn.org "web" is forbidden: User "{EGWD}" cannot patch resource '
                             '"egressservices" in API group "k8s.ovn.org" in the namespace "default"',
                             "web", "egressservices", "k8s.ovn.org")
        self.assertForbidden(self.egwd.request("PUT", ES + "/web/status", egress_service("web", "n1")),
                             f'egressservices.k8s.ovn.org "web" is forbidden: User "{EGWD}" cannot update resource '
                             '"egressservices/status" in API group "k8s.ovn.org" in the namespace "default"',
                             "web", "egressservices", "k8s.ovn.org")
        self.assertForbidden(self.egwd.request("GET", LEASES + "/egw-leader"),
                             f'leases.coordination.k8s.io "egw-leader" is forbidden: User "{EGWD}" cannot get '
                             'resource "leases" in API group "coordination.k8s.io" in the namespace "egw"',
                             "egw-leader", "leases", "coordination.k8s.io")
        self.assertForbidden(self.egwd.request("DELETE", own + "/egw-leader"),
                             f'leases.coordination.k8s.io "egw-leader" is forbidden: User "{EGWD}" cannot delete '
                             'resource "leases" in API group "coordination.k8s.io" in the namespace "egw-system"',
                             "egw-leader", "leases", "coordination.k8s.io")
        # Other credentials: no token is 401; the admin token may do anything.
        self.assertEqual(Client(self.server.port).request("GET", NODES)[0], 401)
        self.assertEqual(self.api.request("DELETE", NODES + "/n1")[0], 200)
        # The request log says who asked.
        users = {(r["verb"], r["code"], r["user"]) for r in self.api.test("requests", method="GET")["requests"]}
        self.assertIn(("create", 403, EGWD), users)
        self.assertIn(("delete", 200, "system:admin"), users)
        self.assertIn(("list", 401, ""), users)


@unittest.skipUnless(shutil.which("openssl"), "the openssl command is not installed")
class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="egw-apiserver-tls-")
        d = cls.dir
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
                "-days", "1", "-subj", "/CN=egw-test-ca", cwd=d)
        with open(os.path.join(d, "san.ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        for name, ext in (("server", ["-extfile", "san.ext"]), ("client", [])):
            openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                    f"{name}.csr", "-subj", f"/CN=egw-{name}", cwd=d)
            openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                    "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", *ext, cwd=d)
        cls.server = ServerProcess("--tls-cert", os.path.join(d, "server.crt"), "--tls-key",
                                   os.path.join(d, "server.key"), "--client-ca",
                                   os.path.join(d, "ca.crt"), "--token", "secret")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def context(self, client_cert):
        ctx = ssl.create_default_context(cafile=os.path.join(self.dir, "ca.crt"))
        if client_cert:
            ctx.load_cert_chain(os.path.join(self.dir, "client.crt"), os.path.join(self.dir, "client.key"))
        return ctx

    def test_token_or_client_certificate(self):
        plain = Client(self.server.port, ssl_context=self.context(False))
        self.assertEqual(plain.request("GET", NODES)[0], 401)
        self.assertEqual(plain.request("GET", NODES, token="secret")[0], 200)
        with_cert = Client(self.server.port, ssl_context=self.context(True))
        self.assertEqual(with_cert.request("GET", NODES)[0], 200)

    def test_server_certificate_is_checked(self):
        ctx = ssl.create_default_context()      # system CAs: our test CA is unknown
        c = http.client.HTTPSConnection("127.0.0.1", self.server.port, timeout=5, context=ctx)
        with self.assertRaises(ssl.SSLError):
            c.request("GET", NODES)
        c.close()


if __name__ == "__main__":
    unittest.main()
