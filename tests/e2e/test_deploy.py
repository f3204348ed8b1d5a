# SPDX-License-Identifier: Apache-2.0
"""Checks of what egw ships for deployment, without a cluster: the Kubernetes manifests in
docker/k8s (the Grafana sidecar ConfigMap among them), the container recipe and entrypoint in
docker/, and the Grafana dashboards and provisioning file in docs/grafana.

The manifests are read with PyYAML (Debian's python3-yaml), and every Kubernetes object in them is
checked against the Kubernetes OpenAPI schemas, offline: tests/e2e/k8s-schemas/validate.mjs runs
the validators that the npm package kubernetes-models (pinned in tests/e2e/k8s-schemas, installed
by scripts/deps.sh) generates from those schemas. The EgressServices of config/demo-manifests are
checked against the CRD's own openAPIV3Schema (python3-jsonschema, as the test API server does).
What egwd may do through RBAC is checked by tests/e2e/test_k8s_e2e.py against the requests egwd
really sent.

Run from the repository root:  python3 -m unittest -v tests/e2e/test_deploy.py
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
K8S = REPO / "docker" / "k8s"
GRAFANA = REPO / "docs" / "grafana"
GRAFANA_CONFIGMAP = "docker/k8s/grafana-dashboards-configmap.yaml"  # goes to Grafana's namespace
NAMESPACE = "egw-system"

sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True
import harness  # noqa: E402  (Debian's Python modules)
import validation  # noqa: E402  (tests/apiserver/validation.py: label rules and the CRD's schema)

yaml = harness.debian_module("yaml")
SCHEMAS = HERE / "k8s-schemas"
# Kinds of custom resources whose CRDs the OpenAPI schemas of Kubernetes do not have.
NOT_IN_KUBERNETES_SCHEMAS = {("monitoring.coreos.com/v1", "PodMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule"),
                             ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition")}


def load_yaml_documents(text, name="<yaml>"):
    """The documents of a YAML file (empty ones left out); a syntax error names the file."""
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        raise ValueError(f"{name}: {e}") from e


def schema_results(objects):
    """[(where, result, error)] of validating [(where, object)] against Kubernetes' OpenAPI schemas."""
    validator = SCHEMAS / "validate.mjs"
    if not (SCHEMAS / "node_modules" / "kubernetes-models").is_dir():
        raise FileNotFoundError(f"{SCHEMAS}/node_modules is missing: run scripts/deps.sh (npm ci there)")
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node is not installed: run scripts/deps.sh")
    r = subprocess.run([node, str(validator)], input=json.dumps([{"where": w, "object": o} for w, o in objects]),
                       capture_output=True, text=True, timeout=120, cwd=SCHEMAS)
    if r.returncode != 0:
        raise RuntimeError(f"validate.mjs failed: {r.stderr}")
    return [(x["where"], x["kind"], x["result"], x["error"]) for x in json.loads(r.stdout)]


# --- what is shipped ------------------------------------------------------------------------------

def manifests():
    """{file name: [documents]} for docker/k8s and the Grafana YAML files."""
    out = {}
    for path in sorted(K8S.glob("*.yaml")) + sorted(GRAFANA.glob("*.yaml")):
        out[str(path.relative_to(REPO))] = load_yaml_documents(path.read_text(), str(path.relative_to(REPO)))
    return out


def dashboards():
    return {str(p.relative_to(REPO)): json.loads(p.read_text()) for p in sorted(GRAFANA.glob("*.json"))}


def _panels(board):
    for p in board.get("panels", []):
        yield p
        yield from p.get("panels", [])


def dashboard_expressions(board):
    exprs = [t["expr"] for p in _panels(board) for t in p.get("targets", []) if t.get("expr")]
    for v in board.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            exprs.append(q["query"] if isinstance(q, dict) else q)
    return exprs


CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
def _get(doc, *path, default=None):
    for p in path:
        if isinstance(doc, dict) and p in doc:
            doc = doc[p]
        elif isinstance(doc, list) and isinstance(p, int) and p < len(doc):
            doc = doc[p]
        else:
            return default
    return doc


def _check_common(name, doc, problems):
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc.get(key):
            problems.append(f"{name}: a document without {key}")
            return False
    kind = doc["kind"]
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        problems.append(f"{name}: {kind} without metadata.name")
        return False
    if kind in CLUSTER_SCOPED and "namespace" in meta:
        problems.append(f"{name}: cluster-scoped {kind} {meta['name']} has a namespace")
    if kind not in CLUSTER_SCOPED and not meta.get("namespace"):
        problems.append(f"{name}: {kind} {meta['name']} has no namespace")
    for e in validation.label_errors(doc):       # what the API server refuses in labels
        problems.append(f"{name}: {kind} {meta['name']}: {e.field}: {e.message()}")
    return True


def _check_crd(name, doc, problems):
    if doc["metadata"]["name"] == "egressips.k8s.ovn.org":
        _check_egress_ip_crd(name, doc, problems)
        return
    spec = doc.get("spec", {})
    want = {"group": "k8s.ovn.org", "scope": "Namespaced"}
    for k, v in want.items():
        if spec.get(k) != v:
            problems.append(f"{name}: CRD spec.{k} is {spec.get(k)!r}, expected {v!r}")
    names = {"kind": "EgressService", "listKind": "EgressServiceList", "plural": "egressservices",
             "singular": "egressservice"}
    if spec.get("names") != names:
        problems.append(f"{name}: CRD names {spec.get('names')} != {names}")
    if doc["metadata"]["name"] != "egressservices.k8s.ovn.org":
        problems.append(f"{name}: CRD name must be egressservices.k8s.ovn.org")
    versions = spec.get("versions") or []
    if [v.get("name") for v in versions] != ["v1"]:
        problems.append(f"{name}: CRD must have exactly version v1")
        return
    v1 = versions[0]
    if v1.get("served") is not True or v1.get("storage") is not True:
        problems.append(f"{name}: v1 must be served and stored")
    if v1.get("subresources") != {"status": {}}:
        problems.append(f"{name}: v1 must have the status subresource (and only it)")
    if v1.get("additionalPrinterColumns") != [{"name": "Assigned Host", "type": "string", "jsonPath": ".status.host"}]:
        problems.append(f"{name}: printer column Assigned Host = .status.host missing")
    schema = _get(v1, "schema", "openAPIV3Schema", default={})
    if schema.get("type") != "object":
        problems.append(f"{name}: openAPIV3Schema must be an object")
    spec_props = _get(schema, "properties", "spec", "properties", default={})
    if _get(spec_props, "sourceIPBy", "enum") != ["LoadBalancerIP", "Network"]:
        problems.append(f"{name}: spec.sourceIPBy must be the enum LoadBalancerIP|Network")
    if _get(spec_props, "network", "type") != "string":
        problems.append(f"{name}: spec.network must be a string")
    selector = _get(spec_props, "nodeSelector", default={})
    if set(_get(selector, "properties", default={})) != {"matchLabels", "matchExpressions"}:
        problems.append(f"{name}: spec.nodeSelector must be a LabelSelector")
    if _get(selector, "properties", "matchExpressions", "items", "required") != ["key", "operator"]:
        problems.append(f"{name}: matchExpressions items need key and operator")
    status = _get(schema, "properties", "status", default={})
    if _get(status, "properties", "host", "type") != "string" or status.get("required") != ["host"]:
        problems.append(f"{name}: status.host must be a required string")


def _check_egress_ip_crd(name, doc, problems):
    """The EgressIP CRD as upstream defines it: cluster-scoped, short name eip, v1 without
    subresources (status is written with the object), its three printer columns, and the fields
    egw reads."""
    spec = doc.get("spec", {})
    if (spec.get("group"), spec.get("scope")) != ("k8s.ovn.org", "Cluster"):
        problems.append(f"{name}: EgressIP CRD must be group k8s.ovn.org, scope Cluster")
    names = {"kind": "EgressIP", "listKind": "EgressIPList", "plural": "egressips", "singular": "egressip",
             "shortNames": ["eip"]}
    if spec.get("names") != names:
        problems.append(f"{name}: CRD names {spec.get('names')} != {names}")
    versions = spec.get("versions") or []
    if [v.get("name") for v in versions] != ["v1"]:
        problems.append(f"{name}: CRD must have exactly version v1")
        return
    v1 = versions[0]
    if v1.get("served") is not True or v1.get("storage") is not True:
        problems.append(f"{name}: v1 must be served and stored")
    if v1.get("subresources", {}) != {}:
        problems.append(f"{name}: v1 must have no subresources (upstream writes status with the object)")
    columns = [(c.get("name"), c.get("jsonPath")) for c in v1.get("additionalPrinterColumns") or []]
    if columns != [("EgressIPs", ".spec.egressIPs[*]"), ("Assigned Node", ".status.items[*].node"),
                   ("Assigned EgressIPs", ".status.items[*].egressIP")]:
        problems.append(f"{name}: printer columns {columns}")
    schema = _get(v1, "schema", "openAPIV3Schema", default={})
    spec_schema = _get(schema, "properties", "spec", default={})
    if spec_schema.get("required") != ["egressIPs", "namespaceSelector"]:
        problems.append(f"{name}: spec must require egressIPs and namespaceSelector")
    if _get(spec_schema, "properties", "egressIPs", "items", "type") != "string":
        problems.append(f"{name}: spec.egressIPs must be a list of strings")
    for sel in ("namespaceSelector", "podSelector"):
        selector = _get(spec_schema, "properties", sel, default={})
        if set(_get(selector, "properties", default={})) != {"matchLabels", "matchExpressions"}:
            problems.append(f"{name}: spec.{sel} must be a LabelSelector")
        if _get(selector, "properties", "matchExpressions", "items", "required") != ["key", "operator"]:
            problems.append(f"{name}: spec.{sel} matchExpressions items need key and operator")
    item = _get(schema, "properties", "status", "properties", "items", "items", default={})
    if item.get("required") != ["egressIP", "node"]:
        problems.append(f"{name}: status.items[] must require egressIP and node")


def _check_rbac(docs, problems):
    seen = {}
    for name, doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc.get("rules") or []:
            if set(rule) - {"apiGroups", "resources", "verbs"}:
                problems.append(f"{name}: {doc['kind']} rule with {sorted(set(rule))}: keep rules to groups, "
                                "resources and verbs")
            for group in rule.get("apiGroups") or []:
                for res in rule.get("resources") or []:
                    if "*" in (group, res) or "*" in (rule.get("verbs") or []):
                        problems.append(f"{name}: wildcard in {doc['kind']} rules")
                    key = (doc["kind"], group, res)
                    seen.setdefault(key, set()).update(rule.get("verbs") or [])
    # Every role is bound to the ServiceAccount the DaemonSet uses.
    roles = {(d["kind"], d["metadata"]["name"]) for _, d in docs if d["kind"] in ("ClusterRole", "Role")}
    bound = set()
    for name, doc in docs:
        if doc["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            ref = doc.get("roleRef") or {}
            if ref.get("apiGroup") != "rbac.authorization.k8s.io":
                problems.append(f"{name}: {doc['kind']} roleRef.apiGroup")
            subjects = doc.get("subjects") or []
            if subjects != [{"kind": "ServiceAccount", "name": "egwd", "namespace": NAMESPACE}]:
                problems.append(f"{name}: {doc['kind']} {doc['metadata']['name']} must bind ServiceAccount egwd only")
            if doc["kind"] == "RoleBinding" and ref.get("kind") != "Role":
                problems.append(f"{name}: RoleBinding must reference the Role")
            bound.add((ref.get("kind"), ref.get("name")))
    if roles != bound:
        problems.append(f"roles {sorted(roles)} and bindings {sorted(bound)} differ")


def _quantity(q):
    units = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9}
    m = re.fullmatch(r"(\d+)(m|Ki|Mi|Gi|Ti|k|M|G)?", str(q))
    if not m:
        raise ValueError(f"bad quantity {q!r}")
    n = int(m.group(1))
    return n / 1000 if m.group(2) == "m" else n * units.get(m.group(2), 1)


NEEDED_CAPS = {"IPC_LOCK", "NET_ADMIN", "NET_RAW", "SYS_NICE"}


def _check_daemonset(name, doc, problems, configmaps, service_accounts):
    spec = doc.get("spec", {})
    tmpl = spec.get("template", {})
    pod = tmpl.get("spec", {})
    labels = _get(tmpl, "metadata", "labels", default={})
    if not spec.get("selector", {}).get("matchLabels") or any(
            labels.get(k) != v for k, v in spec["selector"]["matchLabels"].items()):
        problems.append(f"{name}: selector does not match the pod template labels")
    if not pod.get("nodeSelector"):
        problems.append(f"{name}: no nodeSelector restricting egwd to gateway nodes")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            problems.append(f"{name}: {key} is set")
    if pod.get("serviceAccountName") not in service_accounts:
        problems.append(f"{name}: serviceAccountName {pod.get('serviceAccountName')!r} is not shipped")
    grace = pod.get("terminationGracePeriodSeconds")
    if not isinstance(grace, int) or grace < 20:
        problems.append(f"{name}: terminationGracePeriodSeconds must leave time to release the Leases (>= 20)")
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    for v in volumes.values():
        if "hostPath" in v:
            problems.append(f"{name}: hostPath volume {v['name']}")
        if "configMap" in v and v["configMap"].get("name") not in configmaps:
            problems.append(f"{name}: volume {v['name']} names an unknown ConfigMap")
    if not any(_get(v, "emptyDir", "medium", default="").startswith("HugePages") for v in volumes.values()):
        problems.append(f"{name}: no HugePages emptyDir")
    annotations = _get(tmpl, "metadata", "annotations", default={})
    containers = pod.get("containers") or []
    if len(containers) != 1:
        problems.append(f"{name}: expected one container")
        return
    c = containers[0]
    res = c.get("resources", {})
    req, lim = res.get("requests", {}), res.get("limits", {})
    for r in ("cpu", "memory"):
        if r not in lim or req.get(r, lim.get(r)) != lim.get(r):
            problems.append(f"{name}: {r} requests must equal limits (Guaranteed QoS)")
    if set(req) - set(lim) or any(req[k] != lim.get(k) for k in req):
        problems.append(f"{name}: every request must equal its limit (Guaranteed QoS)")
    try:
        cpu = _quantity(lim.get("cpu", "0"))
        if cpu != int(cpu) or cpu < 2:
            problems.append(f"{name}: whole CPUs (>= 2) for the static CPU manager")
    except ValueError as e:
        problems.append(f"{name}: {e}")
    pages = [k for k in lim if k.startswith("hugepages-")]
    if not pages:
        problems.append(f"{name}: no hugepages in limits")
    for k in pages:
        try:
            if _quantity(lim[k]) % _quantity(k[len("hugepages-"):]):
                problems.append(f"{name}: {k} is not a multiple of the page size")
        except ValueError as e:
            problems.append(f"{name}: {e}")
    sc = c.get("securityContext", {})
    if sc.get("privileged") is not False:
        problems.append(f"{name}: privileged must be false")
    caps = sc.get("capabilities", {})
    if caps.get("drop") != ["ALL"]:
        problems.append(f"{name}: drop ALL capabilities first")
    add = set(caps.get("add") or [])
    # SYS_NICE: the NUMA memory-policy calls EAL makes for every hugepage are allowed by
    # containerd's RuntimeDefault seccomp profile only with it (tests/e2e/test_confinement.py).
    if not NEEDED_CAPS <= add:
        problems.append(f"{name}: capabilities must include {', '.join(sorted(NEEDED_CAPS))}")
    if add & {"SYS_ADMIN", "ALL"}:
        problems.append(f"{name}: SYS_ADMIN or ALL capabilities")
    mounts = {m["name"]: m for m in c.get("volumeMounts") or []}
    for m in mounts:
        if m not in volumes:
            problems.append(f"{name}: volumeMount {m} has no volume")
    if _get(mounts, "hugepages", "mountPath") != "/dev/hugepages":
        problems.append(f"{name}: hugepages not mounted at /dev/hugepages")
    ports = {p.get("name"): p for p in c.get("ports") or []}
    metrics = ports.get("metrics")
    if not metrics:
        problems.append(f"{name}: no container port named metrics")
        return
    for probe, path in (("startupProbe", "/startz"), ("readinessProbe", "/readyz"), ("livenessProbe", "/livez")):
        get = _get(c, probe, "httpGet", default={})
        if get.get("path") != path or get.get("port") not in ("metrics", metrics["containerPort"]):
            problems.append(f"{name}: {probe} must GET {path} on the metrics port")
        if not isinstance(_get(c, probe, "timeoutSeconds"), int):
            problems.append(f"{name}: {probe} without timeoutSeconds")
    if add - NEEDED_CAPS:
        problems.append(f"{name}: capabilities egwd does not use: {sorted(add - NEEDED_CAPS)}")
    if _get(sc, "seccompProfile", "type") not in ("RuntimeDefault", "Localhost"):
        problems.append(f"{name}: no seccompProfile (RuntimeDefault or Localhost)")
    if not pod.get("priorityClassName"):
        problems.append(f"{name}: no priorityClassName")
    if annotations.get("prometheus.io/scrape") != "true" or \
            annotations.get("prometheus.io/port") != str(metrics["containerPort"]):
        problems.append(f"{name}: prometheus.io/scrape and prometheus.io/port annotations")
    env = {e["name"] for e in c.get("env") or []}
    if "NODE_NAME" not in env:
        problems.append(f"{name}: NODE_NAME from the downward API is missing")


def _check_podmonitor(name, doc, problems, pod_labels):
    spec = doc.get("spec", {})
    sel = _get(spec, "selector", "matchLabels", default={})
    if not sel or any(pod_labels.get(k) != v for k, v in sel.items()):
        problems.append(f"{name}: PodMonitor selector does not select the egwd pods")
    eps = spec.get("podMetricsEndpoints") or []
    if not eps or eps[0].get("port") != "metrics" or eps[0].get("path", "/metrics") != "/metrics":
        problems.append(f"{name}: PodMonitor must scrape port metrics at /metrics")
        return
    if eps[0].get("honorLabels") is not True:
        problems.append(f"{name}: PodMonitor needs honorLabels: true (egwd's namespace/service labels)")
    if not any(r.get("targetLabel") == "node" and r.get("sourceLabels") == ["__meta_kubernetes_pod_node_name"]
               for r in eps[0].get("relabelings") or []):
        problems.append(f"{name}: PodMonitor must set the node label the dashboards select by")
    if not _get(doc, "metadata", "labels", "release"):
        problems.append(f"{name}: PodMonitor without the release label kube-prometheus-stack selects by")


def _check_networkpolicy(name, doc, problems, pod_labels):
    spec = doc.get("spec", {})
    sel = _get(spec, "podSelector", "matchLabels", default={})
    if not sel or any(pod_labels.get(k) != v for k, v in sel.items()):
        problems.append(f"{name}: NetworkPolicy does not select the egwd pods")
    if "Ingress" not in (spec.get("policyTypes") or []):
        problems.append(f"{name}: NetworkPolicy must restrict Ingress")
    for rule in spec.get("ingress") or []:
        ports = rule.get("ports") or []
        if not ports or any(p.get("port") not in ("metrics", 9469) for p in ports):
            problems.append(f"{name}: an ingress rule admits more than the metrics port")
        if not rule.get("from"):
            problems.append(f"{name}: an ingress rule admits every source")


def _check_grafana_configmap(name, doc, problems):
    if _get(doc, "metadata", "labels", "grafana_dashboard") != "1":
        problems.append(f"{name}: the sidecar ConfigMap needs the label grafana_dashboard: \"1\"")
    data = doc.get("data") or {}
    boards = {Path(k).name: json.loads(v) for k, v in data.items()}
    for path, board in dashboards().items():
        if boards.get("egw-" + Path(path).name) != board:
            problems.append(f"{name}: {path} differs from its copy in the ConfigMap")


def manifest_problems(files=None):
    """Everything wrong with the shipped manifests, as sentences; [] when they are fine."""
    files = manifests() if files is None else files
    problems = []
    docs = []
    for name, documents in files.items():
        if not documents:
            problems.append(f"{name}: no document")
        for doc in documents:
            if not isinstance(doc, dict):
                problems.append(f"{name}: a document that is not a mapping")
            elif name.endswith(("provisioning.yaml", "kustomization.yaml")):
                continue  # files for Grafana and kustomize, not Kubernetes objects
            elif _check_common(name, doc, problems):
                docs.append((name, doc))
    for where, kind, result, error in schema_results(docs):
        if result == "invalid":
            problems.append(f"{where}: {kind} does not match the Kubernetes OpenAPI schema: {error}")
        elif result != "ok" and tuple(kind.split(" ", 1)) not in NOT_IN_KUBERNETES_SCHEMAS:
            problems.append(f"{where}: {kind} is not a kind of the Kubernetes OpenAPI schemas")
    kinds = {}
    for name, doc in docs:
        kinds.setdefault(doc["kind"], []).append((name, doc))
    for kind in ("Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                 "Role", "RoleBinding", "ConfigMap", "DaemonSet", "PodMonitor", "NetworkPolicy", "PrometheusRule"):
        if kind not in kinds:
            problems.append(f"no {kind} is shipped")
    for name, doc in kinds.get("CustomResourceDefinition", []):
        _check_crd(name, doc, problems)
    _check_rbac(docs, problems)
    configmaps = {d["metadata"]["name"] for _, d in kinds.get("ConfigMap", [])}
    accounts = {d["metadata"]["name"] for _, d in kinds.get("ServiceAccount", [])}
    pod_labels = {}
    for name, doc in kinds.get("DaemonSet", []):
        _check_daemonset(name, doc, problems, configmaps, accounts)
        pod_labels = _get(doc, "spec", "template", "metadata", "labels", default={})
    for name, doc in kinds.get("PodMonitor", []):
        _check_podmonitor(name, doc, problems, pod_labels)
    for name, doc in kinds.get("NetworkPolicy", []):
        _check_networkpolicy(name, doc, problems, pod_labels)
    for name, doc in kinds.get("ConfigMap", []):
        if name == GRAFANA_CONFIGMAP:
            _check_grafana_configmap(name, doc, problems)
    namespaces = {d["metadata"]["name"] for _, d in kinds.get("Namespace", [])}
    for name, doc in docs:
        ns = doc["metadata"].get("namespace")
        if ns and ns not in namespaces and name != GRAFANA_CONFIGMAP:
            problems.append(f"{name}: {doc['kind']} in namespace {ns}, which is not shipped")
    return problems


def egwd_config_from_configmap():
    for doc in load_yaml_documents((K8S / "configmap.yaml").read_text()):
        if doc.get("kind") == "ConfigMap":
            return doc["data"]["egwd.json"]
    raise AssertionError("no ConfigMap in docker/k8s/configmap.yaml")


# --- the tests ----------------------------------------------------------------------------------

class Manifests(unittest.TestCase):
    def test_manifests_validate(self):
        self.assertEqual(manifest_problems(), [])

    def test_validation_catches_mistakes(self):
        def mutated(change):
            files = manifests()
            for docs in files.values():
                for d in docs:
                    change(d)
            return manifest_problems(files)

        def port_as_text(d):
            if d.get("kind") == "DaemonSet":
                d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "9100"

        def rule_without_verbs(d):
            if d.get("kind") == "Role":
                del d["rules"][0]["verbs"]

        def bad_label(d):
            if d.get("kind") == "Namespace":
                d["metadata"]["labels"] = {"egress-service.k8s.ovn.org/" + "x" * 64: ""}

        def privileged(d):
            if d.get("kind") == "DaemonSet":
                d["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True

        def burstable(d):
            if d.get("kind") == "DaemonSet":
                d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "512Mi"

        def no_status(d):
            if d.get("kind") == "CustomResourceDefinition":
                d["spec"]["versions"][0]["subresources"] = {}

        def cluster_scope(d):
            if d.get("kind") == "CustomResourceDefinition":
                d["spec"]["scope"] = "Cluster"

        def container(d):
            return d["spec"]["template"]["spec"]["containers"][0] if d.get("kind") == "DaemonSet" else None

        def sys_ptrace(d):
            if container(d):
                container(d)["securityContext"]["capabilities"]["add"].append("SYS_PTRACE")

        def no_sys_nice(d):
            if container(d):
                container(d)["securityContext"]["capabilities"]["add"].remove("SYS_NICE")

        def startup_on_livez(d):
            if container(d):
                container(d)["startupProbe"]["httpGet"]["path"] = "/livez"

        def no_timeout(d):
            if container(d):
                del container(d)["readinessProbe"]["timeoutSeconds"]

        def no_honor_labels(d):
            if d.get("kind") == "PodMonitor":
                d["spec"]["podMetricsEndpoints"][0]["honorLabels"] = False

        def open_policy(d):
            if d.get("kind") == "NetworkPolicy":
                d["spec"]["ingress"][0]["ports"] = []

        for change, words in ((port_as_text, "containerPort must be integer"),
                              (rule_without_verbs, "must have required property verbs"),
                              (bad_label, "name part must be no more than 63 characters"),
                              (privileged, "privileged"), (burstable, "Guaranteed"),
                              (no_status, "status subresource"), (cluster_scope, "scope"),
                              (sys_ptrace, "does not use: ['SYS_PTRACE']"), (no_sys_nice, "SYS_NICE"), (startup_on_livez, "/startz"), (no_timeout, "timeoutSeconds"),
                              (open_policy, "more than the metrics port"), (no_honor_labels, "honorLabels")):
            problems = mutated(change)
            self.assertTrue(any(words in p for p in problems), f"{change.__name__}: {problems}")

    def test_kustomization_lists_the_core_manifests(self):
        (k,) = load_yaml_documents((K8S / "kustomization.yaml").read_text())
        self.assertEqual(k["kind"], "Kustomization")
        for f in k["resources"]:
            self.assertTrue((K8S / f).is_file(), f)
        self.assertEqual(set(k["resources"]), {"namespace.yaml", "crd-egressservice.yaml", "crd-egressip.yaml", "rbac.yaml",
                                               "configmap.yaml", "daemonset.yaml", "networkpolicy.yaml"})

    def test_every_object_is_a_kind_of_the_schemas(self):
        results = schema_results([(n, d) for n, docs in manifests().items() for d in docs
                                  if isinstance(d, dict) and "kind" in d and "apiVersion" in d
                                  and d["kind"] != "Kustomization"])
        checked = {kind for _, kind, result, _ in results if result == "ok"}
        for kind in ("v1 Namespace", "v1 ServiceAccount", "v1 ConfigMap", "apps/v1 DaemonSet",
                     "rbac.authorization.k8s.io/v1 ClusterRole", "rbac.authorization.k8s.io/v1 RoleBinding",
                     "apiextensions.k8s.io/v1 CustomResourceDefinition"):
            self.assertIn(kind, checked)

    def test_demo_egress_services_match_the_crd_schema(self):
        schema = validation.egress_service_schema()
        seen = 0
        for path in sorted((REPO / "config" / "demo-manifests").glob("*")):
            docs = load_yaml_documents(path.read_text(), str(path)) if path.suffix in (".yaml", ".json") else []
            for d in [i for d in docs for i in (d.get("items", []) if d.get("kind") == "List" else [d])]:
                if isinstance(d, dict) and d.get("kind") == "EgressService":
                    seen += 1
                    self.assertEqual([e.message() for e in validation.schema_errors(d, schema)], [], path)
        self.assertGreaterEqual(seen, 2)
        bad = {"apiVersion": "k8s.ovn.org/v1", "kind": "EgressService", "metadata": {"name": "x"},
               "spec": {"sourceIPBy": "Nodes"}}
        self.assertTrue(validation.schema_errors(bad, schema))


def alert_rules():
    """The alerting rules of docker/k8s/prometheusrule.yaml: [{alert, expr, ...}]."""
    (doc,) = load_yaml_documents((K8S / "prometheusrule.yaml").read_text())
    return [r for g in doc["spec"]["groups"] for r in g["rules"]]


# Names the alerts read that egwd does not export: Prometheus' own `up` and the kubelet's probe
# counter (kube-prometheus-stack scrapes the kubelet's /metrics/probes).
ALERT_NAMES_NOT_FROM_EGWD = {"up", "prober_probe_total"}


class Alerts(unittest.TestCase):
    ISSUE = {"EgwNoLeader", "EgwSeveralLeaders", "EgwWatchDown", "EgwReceiveMisses", "EgwSnatAllocationFailures",
             "EgwSessionTableNearlyFull", "EgwProbeFailures"}

    def test_the_alerts_the_operations_guide_explains(self):
        names = {r["alert"] for r in alert_rules()}
        self.assertTrue(self.ISSUE <= names, self.ISSUE - names)
        guide = (REPO / "docs" / "operations.md").read_text()
        for r in alert_rules():
            self.assertIn(r["labels"]["severity"], ("warning", "critical"), r["alert"])
            self.assertTrue(r["annotations"].get("summary") and r["annotations"].get("description"), r["alert"])
            self.assertTrue(f"`{r['alert']}`" in guide, f"{r['alert']} is not explained in docs/operations.md")

    def test_promtool_checks_and_unit_tests(self):
        promtool = shutil.which("promtool")
        if promtool is None:
            self.skipTest("promtool is not installed (Debian package prometheus, scripts/deps.sh)")
        (doc,) = load_yaml_documents((K8S / "prometheusrule.yaml").read_text())
        with tempfile.TemporaryDirectory(prefix="egw-rules-") as tmp:
            # JSON is YAML: the spec as it is is a Prometheus rules file.
            (Path(tmp) / "rules.yaml").write_text(json.dumps(doc["spec"], indent=1))
            shutil.copy(REPO / "tests" / "e2e" / "prometheus" / "rules_test.yaml", tmp)
            r = subprocess.run([promtool, "check", "rules", "rules.yaml"], cwd=tmp, capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(f"SUCCESS: {len(alert_rules())} rules found", r.stdout)
            r = subprocess.run([promtool, "test", "rules", "rules_test.yaml"], cwd=tmp, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            # Every alert has a test that fires it.
            tested = set(re.findall(r"alertname: (\w+)\n\s+exp_alerts:\n\s+- ", (Path(tmp) / "rules_test.yaml").read_text()))
            self.assertEqual(tested, {r["alert"] for r in alert_rules()})


class Entrypoint(unittest.TestCase):
    ENV = {"NODE_NAME": "gw-1", "PCIDEVICE_INTEL_COM_EGW_INSIDE": "0000:03:02.0",
           "PCIDEVICE_INTEL_COM_EGW_OUTSIDE": "0000:03:0a.1"}

    def render(self, env):
        with tempfile.TemporaryDirectory(prefix="egw-deploy-") as tmp:
            (Path(tmp) / "egwd.json").write_text(egwd_config_from_configmap())
            full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "EGW_CONFIG_DIR": tmp,
                    "EGW_RUN_DIR": str(Path(tmp) / "run"), "EGW_RENDER_ONLY": "1", **env}
            return subprocess.run(["sh", str(REPO / "docker" / "entrypoint.sh")], env=full, capture_output=True,
                                  text=True, timeout=30)

    def test_renders_the_configmap_for_this_pod(self):
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("needs two CPUs")
        r = self.render(self.ENV)
        self.assertEqual(r.returncode, 0, r.stderr)
        cfg = json.loads(r.stdout)
        self.assertEqual(cfg["node"]["name"], "gw-1")
        self.assertEqual(cfg["eal"]["pci_allow"], ["0000:03:02.0", "0000:03:0a.1"])
        self.assertEqual([p["device"] for p in cfg["ports"]], ["0000:03:02.0", "0000:03:0a.1"])
        cpus = sorted(os.sched_getaffinity(0))
        self.assertEqual(cfg["eal"]["main_lcore"], cpus[0])
        self.assertEqual(cfg["workers"], cpus[1:])
        self.assertEqual(cfg["state"], {"source": "kubernetes", "kubeconfig": ""})
        port = int(cfg["metrics"]["listen"].rsplit(":", 1)[1])
        (ds,) = [d for d in load_yaml_documents((K8S / "daemonset.yaml").read_text()) if d["kind"] == "DaemonSet"]
        ports = ds["spec"]["template"]["spec"]["containers"][0]["ports"]
        self.assertIn({"name": "metrics", "containerPort": port, "protocol": "TCP"}, ports)
        self.assertEqual(cfg["metrics"]["listen"], f"[::]:{port}")  # both families

    def test_a_missing_variable_is_an_error(self):
        env = dict(self.ENV)
        del env["PCIDEVICE_INTEL_COM_EGW_OUTSIDE"]
        r = self.render(env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("${PCIDEVICE_INTEL_COM_EGW_OUTSIDE} is not set", r.stderr)

    def test_egwd_accepts_the_rendered_configuration(self):
        egwd = Path(os.environ.get("EGWD", REPO / "build" / "control" / "egwd"))
        if not os.access(egwd, os.X_OK):
            self.skipTest(f"no egwd at {egwd}")
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("needs two CPUs")
        r = self.render(self.ENV)
        self.assertEqual(r.returncode, 0, r.stderr)
        cpus = sorted(os.sched_getaffinity(0))
        prefix = f"egw-deploy-{os.getpid()}"
        # EAL arguments before "--" replace the file's eal section, so egwd gets past the loader
        # without hugepages or NICs; it then stops at the first PCI port, which does not exist
        # here. Exit 2 means the loader refused the file.
        eal = ["-l", ",".join(map(str, cpus[:2])), "--no-huge", "-m", "512", "--no-pci", "--no-telemetry",
               "--file-prefix", prefix, "--"]

        def start(config):
            with tempfile.TemporaryDirectory(prefix="egw-deploy-") as tmp:
                path = Path(tmp) / "egwd.json"
                path.write_text(json.dumps(config))
                try:
                    return subprocess.run([str(egwd), *eal, "-c", str(path)], capture_output=True, text=True,
                                          timeout=60)
                finally:
                    harness.remove_dpdk_runtime_dir(prefix)

        config = json.loads(r.stdout)
        p = start(config)
        if p.returncode == 2 and "the kubernetes source is not available in this build" in p.stderr:
            # The loader accepted the file (that check comes after it); go on with the files
            # source to reach the ports.
            config["state"] = {"source": "files", "path": "."}
            p = start(config)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn('no DPDK device named \"0000:03:02.0\"', p.stdout + p.stderr)


class Dockerfile(unittest.TestCase):
    BASE = {"libc6", "libgcc-s1", "libstdc++6"}  # in debian:12-slim already

    def stages(self):
        stages, current = [], None
        text = (REPO / "docker" / "Dockerfile").read_text().replace("\\\n", " ")
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            word, _, rest = line.partition(" ")
            if word.upper() == "FROM":
                current = {"from": rest.split()[0], "as": rest.split()[-1] if " AS " in rest.upper() else None,
                           "lines": []}
                stages.append(current)
            elif current is not None:
                current["lines"].append((word.upper(), rest))
        return stages

    @staticmethod
    def packages(stage):
        out = set()
        for word, rest in stage["lines"]:
            if word == "RUN" and "apt-get install" in rest:
                install = rest.split("apt-get install", 1)[1].split("&&")[0]
                out |= {w for w in install.split() if not w.startswith("-")}
        return out

    def test_two_stages_on_debian_12(self):
        build, runtime = self.stages()
        self.assertEqual(build["from"], "debian:12")
        self.assertEqual(build["as"], "build")
        self.assertEqual(runtime["from"], "debian:12-slim")
        self.assertTrue(any(w == "COPY" and r.startswith("--from=build ") for w, r in runtime["lines"]))
        self.assertTrue(any(w == "ENTRYPOINT" and "egw-entrypoint" in r for w, r in runtime["lines"]))
        self.assertTrue(os.access(REPO / "docker" / "entrypoint.sh", os.X_OK))
        dev = self.packages(build)
        self.assertTrue({"libdpdk-dev", "meson", "ninja-build", "nlohmann-json3-dev", "libyaml-cpp-dev",
                         "libspdlog-dev", "libfmt-dev", "libcurl4-openssl-dev"} <= dev, dev)
        runtime_pkgs = self.packages(runtime)
        self.assertFalse({p for p in runtime_pkgs if p.endswith("-dev")}, "no -dev package at run time")
        self.assertIn("librte-mempool-ring23", runtime_pkgs, "the default mempool driver is a plugin")
        self.assertIn("librte-bus-pci23", runtime_pkgs)

    def test_egwctl_and_oci_labels_in_the_image(self):
        build, runtime = self.stages()
        text = (REPO / "docker" / "Dockerfile").read_text()
        self.assertIn("control/egwctl", text)
        self.assertIn("/out/usr/local/bin/egwctl", text)
        self.assertIn("libcli11-dev", self.packages(build))
        labels = " ".join(r for w, r in runtime["lines"] if w == "LABEL")
        for key in ("title", "description", "version", "revision", "licenses"):
            self.assertIn(f"org.opencontainers.image.{key}=", labels)
        self.assertIn("kubectl -n egw-system exec ds/egwd -- egwctl", (REPO / "docs" / "operations.md").read_text())

    def test_runtime_stage_has_every_library_egwd_links(self):
        egwd = Path(os.environ.get("EGWD", REPO / "build" / "control" / "egwd"))
        if not os.access(egwd, os.X_OK) or not shutil.which("ldd") or not shutil.which("dpkg") \
                or not shutil.which("readelf"):
            self.skipTest("needs a built egwd, ldd, readelf and dpkg")
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                            subprocess.run(["readelf", "-d", str(egwd)], capture_output=True, text=True).stdout)
        paths = dict(re.findall(r"^\s*(\S+) => (\S+)", subprocess.run(["ldd", str(egwd)], capture_output=True,
                                                                         text=True).stdout, re.M))
        runtime = self.packages(self.stages()[1]) | self.BASE
        missing = []
        for lib in needed:
            if lib.startswith("ld-linux"):
                continue
            path = paths.get(lib)
            self.assertIsNotNone(path, f"ldd does not resolve {lib}")
            owners = set()
            for candidate in {path, os.path.realpath(path), "/usr" + path, path.replace("/usr/lib/", "/lib/", 1)}:
                r = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
                if r.returncode == 0:
                    owners |= {o.split(":")[0].strip() for o in r.stdout.split(": ")[0].split(",")}
            if not owners & runtime:
                missing.append(f"{lib} ({', '.join(sorted(owners)) or 'no package'})")
        self.assertEqual(missing, [], "libraries egwd links that the runtime image lacks")


class Grafana(unittest.TestCase):
    UIDS = {"docs/grafana/overview.json": "egw-overview", "docs/grafana/services.json": "egw-services",
            "docs/grafana/control-plane.json": "egw-control-plane"}

    def test_dashboards_are_provisioning_ready(self):
        boards = dashboards()
        self.assertEqual({p: b["uid"] for p, b in boards.items()}, self.UIDS)
        for path, b in boards.items():
            self.assertIsNone(b["id"], path)
            self.assertTrue(8 <= len(b["uid"]) <= 40, path)
            variables = b["templating"]["list"]
            self.assertEqual(variables[0]["type"], "datasource", path)
            self.assertEqual(variables[0]["query"], "prometheus", path)
            ds_name = variables[0]["name"]
            ids = [p["id"] for p in _panels(b)]
            self.assertEqual(len(ids), len(set(ids)), f"{path}: panel ids repeat")
            for p in _panels(b):
                if p["type"] == "row":
                    continue
                self.assertEqual(p["datasource"], {"type": "prometheus", "uid": "${" + ds_name + "}"}, p["title"])
                self.assertTrue(p.get("description"), f"{path}: {p['title']} has no description")
                for t in p["targets"]:
                    self.assertEqual(t["datasource"]["uid"], "${" + ds_name + "}")
            for v in variables[1:]:
                self.assertEqual(v["datasource"]["uid"], "${" + ds_name + "}")
            self.assertTrue(dashboard_expressions(b), path)

    def test_counters_are_only_read_through_rate_or_increase(self):
        for path, b in dashboards().items():
            for expr in dashboard_expressions(b):
                for m in re.finditer(r"\begw_[a-z0-9_]*_total\b", expr):
                    before = expr[:m.start()].rstrip()
                    self.assertTrue(before.endswith("rate(") or before.endswith("increase("),
                                    f"{path}: {expr}")

    def test_generated_files_are_up_to_date(self):
        r = subprocess.run([sys.executable, "-B", str(GRAFANA / "generate.py"), "--check"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_provisioning_file(self):
        (doc,) = load_yaml_documents((GRAFANA / "provisioning.yaml").read_text())
        self.assertEqual(doc["apiVersion"], 1)
        (p,) = doc["providers"]
        self.assertEqual(p["type"], "file")
        self.assertEqual(p["orgId"], 1)
        self.assertTrue(p["options"]["path"])


if __name__ == "__main__":
    unittest.main()
