#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes an egwd configuration and manifests for the shared rig's EgressService mode.

The rig's traffic comes from every host address of 10.128.0.0/14 (262,142 pods). In the rig's
default mode none of them is an endpoint of a Service, so every flow takes egwd's default action
(masquerade). Here the same sources are made the endpoints of SERVICES LoadBalancer Services
(pod i of the /14 belongs to Service i mod SERVICES), each with an EgressService
(sourceIPBy: LoadBalancerIP) served by the rig's node, so the same traffic takes the per-Service
path: endpoint lookup, the Service's version and ingress IP, per-Service counters.

    rig_services.py --config config/bench-rig.json --out DIR [--services 64]

writes DIR/egwd.json (the rig configuration with its manifests directory replaced) and
DIR/manifests/*.json.
"""
import argparse
import ipaddress
import json
import os

POD_NET = ipaddress.ip_network("10.128.0.0/14")
INGRESS_BASE = ipaddress.ip_address("203.0.113.20")  # on the outside port's /24
SLICE_SIZE = 1000


def strip_comments(text):
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--services", type=int, default=64)
    a = ap.parse_args()
    if not 1 <= a.services <= 200:
        ap.error("--services must be 1..200 (ingress IPs 203.0.113.20 and up stay in the /24)")

    with open(a.config) as f:
        cfg = json.loads(strip_comments(f.read()))
    man = os.path.join(os.path.abspath(a.out), "manifests")
    os.makedirs(man, exist_ok=True)
    cfg["state"] = {"source": "files", "path": man}
    node = cfg["node"]["name"]
    with open(os.path.join(a.out, "egwd.json"), "w") as f:
        json.dump(cfg, f, indent=1)

    items = [{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node, "egw.example.com/gateway": "true"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }]
    members = [[] for _ in range(a.services)]
    for i, host in enumerate(POD_NET.hosts()):
        members[i % a.services].append(str(host))
    for s in range(a.services):
        name = "rig-%03d" % s
        items.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": {"type": "LoadBalancer", "selector": {"app": name},
                     "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53}]},
            "status": {"loadBalancer": {"ingress": [{"ip": str(INGRESS_BASE + s)}]}},
        })
        items.append({
            "apiVersion": "k8s.ovn.org/v1", "kind": "EgressService",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": {"sourceIPBy": "LoadBalancerIP",
                     "nodeSelector": {"matchLabels": {"egw.example.com/gateway": "true"}}},
        })
        pods = members[s]
        for k in range(0, len(pods), SLICE_SIZE):
            items.append({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": "%s-%04d" % (name, k // SLICE_SIZE), "namespace": "bench",
                             "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in pods[k:k + SLICE_SIZE]],
                "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}],
            })
    with open(os.path.join(man, "rig.json"), "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)


if __name__ == "__main__":
    main()
