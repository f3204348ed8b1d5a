#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes egw's Grafana dashboards and the ConfigMap that carries them to the Grafana sidecar.

    python3 docs/grafana/generate.py          # rewrites the dashboards next to it and the ConfigMap
    python3 docs/grafana/generate.py --check  # exits 1 when a file differs from what it would write

The dashboards are data here so that every panel gets the same datasource variable, stable ids
and layout; the JSON files are what Grafana imports (file provisioning, the sidecar ConfigMap, or
Import in the UI). The ConfigMap is a manifest, so it lives with the others in docker/k8s (applied
on its own: it goes to Grafana's namespace). tests/e2e/test_deploy.py checks that they are up to date, and
tests/e2e/test_metrics.py that every metric they query is one egwd exports.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONFIGMAP = "docker/k8s/grafana-dashboards-configmap.yaml"  # relative to the repository
DS = {"type": "prometheus", "uid": "${datasource}"}
# Gateways are told apart by `node` (the PodMonitor copies the pod's node name into it), which stays
# the same across restarts, unlike `instance` (the pod IP and port).
INST = 'node=~"$node"'
RATE = "[$__rate_interval]"


def datasource_variable():
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": [], "skipUrlSync": False}


def query_variable(name, label, query, multi=True):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": f"{name}-variable"}, "definition": query,
            "refresh": 2, "sort": 1, "multi": multi, "includeAll": True, "allValue": ".*",
            "current": {}, "hide": 0, "options": [], "regex": "", "skipUrlSync": False}


def target(expr, legend="", ref="A", instant=False, table=False):
    t = {"refId": ref, "datasource": DS, "expr": expr, "legendFormat": legend, "range": not instant,
         "instant": instant}
    if table:
        t["format"] = "table"
    return t


class Layout:
    """Places panels left to right on a 24-column grid, wrapping to new rows."""

    def __init__(self):
        self.panels, self.x, self.y, self.row_h = [], 0, 0, 0

    def add(self, panel, w, h):
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        panel["id"] = len(self.panels) + 1
        panel["gridPos"] = {"x": self.x, "y": self.y, "w": w, "h": h}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)

    def row(self, title):
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        self.add({"type": "row", "title": title, "collapsed": False, "panels": []}, 24, 1)
        self.x, self.y, self.row_h = 0, self.y + 1, 0


def timeseries(title, targets, unit, description, stack=False, min_zero=True):
    defaults = {"unit": unit, "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10,
                                         "showPoints": "never",
                                         "stacking": {"mode": "normal" if stack else "none"}}}
    if min_zero:
        defaults["min"] = 0
    return {"type": "timeseries", "title": title, "description": description, "datasource": DS,
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}},
            "targets": targets}


def stat(title, expr, unit, description, decimals=None):
    defaults = {"unit": unit, "color": {"mode": "thresholds"},
                "thresholds": {"mode": "absolute", "steps": [{"color": "green", "value": None}]}}
    if decimals is not None:
        defaults["decimals"] = decimals
    return {"type": "stat", "title": title, "description": description, "datasource": DS,
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area", "textMode": "auto"},
            "targets": [target(expr, instant=True)]}


def table(title, expr, description, hide):
    return {"type": "table", "title": title, "description": description, "datasource": DS,
            "fieldConfig": {"defaults": {}, "overrides": []},
            "options": {"showHeader": True},
            "transformations": [{"id": "organize", "options": {"excludeByName": {k: True for k in hide}}}],
            "targets": [target(expr, instant=True, table=True)]}


def dashboard(uid, title, description, variables, layout, links=True):
    board = {
        "id": None,
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["egw", "dpdk", "egress"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "annotations": {"list": []},
        "templating": {"list": [datasource_variable()] + variables},
        "panels": layout.panels,
    }
    if links:
        board["links"] = [{"type": "dashboards", "tags": ["egw"], "title": "egw", "asDropdown": True,
                           "includeVars": True, "keepTime": True}]
    return board


def instance_variable():
    return query_variable("node", "Gateway", "label_values(egw_build_info, node)")


# --- the dashboards -----------------------------------------------------------------------------

def overview():
    l = Layout()
    l.add(stat("Gateways", f"count(egw_build_info{{{INST}}})", "none", "egwd instances scraped."), 4, 4)
    l.add(stat("Forwarded", f"sum(rate(egw_lcore_packets_total{{{INST}, direction=\"tx\"}}{RATE}))", "pps",
               "Packets the workers transmitted, all gateways."), 5, 4)
    l.add(stat("Dropped", f"sum(rate(egw_drops_total{{{INST}}}{RATE}))", "pps",
               "Packets dropped for any reason (see Drops by reason)."), 5, 4)
    l.add(stat("NAT sessions", f"sum(egw_sessions_active{{{INST}}})", "none", "NAT sessions open now."), 5, 4)
    l.add(stat("Services programmed", f"sum(egw_service_programmed{{{INST}}})", "none",
               "EgressServices translated by some gateway now."), 5, 4)

    l.row("Ports")
    def per_port(metric, what, ref="A", sign=""):
        return target(f"{sign}sum by (node, port) (rate({metric}{{{INST}}}{RATE}))",
                      "{{node}} {{port}} " + what, ref=ref)

    l.add(timeseries("Packets per port", [
        per_port("egw_port_rx_packets_total", "rx"),
        per_port("egw_port_tx_packets_total", "tx", "B", "-"),
    ], "pps", "Received (up) and transmitted (down) packets per port.", min_zero=False), 12, 8)
    l.add(timeseries("Bytes per port", [
        per_port("egw_port_rx_bytes_total", "rx"),
        per_port("egw_port_tx_bytes_total", "tx", "B", "-"),
    ], "Bps", "Received (up) and transmitted (down) bytes per port.", min_zero=False), 12, 8)
    l.add(timeseries("Port losses and errors", [
        per_port("egw_port_rx_missed_total", "missed"),
        per_port("egw_port_rx_nombuf_total", "no mbuf", "B"),
        per_port("egw_port_rx_errors_total", "rx errors", "C"),
        per_port("egw_port_tx_errors_total", "tx errors", "D"),
    ], "pps", "Missed: the NIC's receive queue overflowed (workers too slow). No mbuf: the pool ran dry."), 12, 8)
    l.add(timeseries("Link state", [
        target(f"egw_port_up{{{INST}}}", "{{node}} {{port}}"),
    ], "bool_on_off", "1 while the port's link is up."), 12, 8)

    l.row("Services")
    l.add(timeseries("Egress packets per Service", [
        target(f"sum by (namespace, service) (rate(egw_service_packets_total{{{INST}, direction=\"egress\"}}{RATE}))",
               "{{namespace}}/{{service}}"),
        target(f"sum(rate(egw_default_action_packets_total{{{INST}, direction=\"egress\"}}{RATE}))",
               "(default action)", ref="B"),
    ], "pps", "Packets from each Service's pods translated toward the outside.", stack=True), 12, 8)
    l.add(timeseries("Egress bytes per Service", [
        target(f"sum by (namespace, service) (rate(egw_service_bytes_total{{{INST}, direction=\"egress\"}}{RATE}))",
               "{{namespace}}/{{service}}"),
        target(f"sum(rate(egw_default_action_bytes_total{{{INST}, direction=\"egress\"}}{RATE}))",
               "(default action)", ref="B"),
    ], "Bps", "Bytes from each Service's pods translated toward the outside.", stack=True), 12, 8)

    l.row("Drops and load")
    l.add(timeseries("Drops by reason", [
        target(f"sum by (reason) (rate(egw_drops_total{{{INST}}}{RATE})) > 0", "{{reason}}"),
    ], "pps", "Dropped packets per reason; the reasons are listed in docs/metrics.md.", stack=True), 12, 8)
    l.add(timeseries("Worker lcore load", [
        target(f"sum by (node, lcore) (rate(egw_lcore_busy_cycles_total{{{INST}}}{RATE}))"
               f" / sum by (node, lcore) (rate(egw_lcore_cycles_total{{{INST}}}{RATE}))",
               "{{node}} lcore {{lcore}}"),
    ], "percentunit", "Share of each worker's cycles spent in iterations that moved packets: its real load "
                      "(a polling core always shows 100% CPU)."), 12, 8)
    l.add(timeseries("NAT sessions per lcore", [
        target(f"sum by (node, lcore, family) (egw_sessions_active{{{INST}}})", "{{node}} lcore {{lcore}} {{family}}"),
        target(f"sum by (node, family) (egw_sessions_capacity{{{INST}}})", "{{node}} {{family}} capacity", ref="B"),
    ], "none", "Open NAT sessions per worker and address family, and the gateway's limit of each family "
               "(sessions.max, sessions.max_ipv6)."), 12, 8)
    l.add(timeseries("Hand-offs and held packets", [
        target(f"sum by (node, lcore) (rate(egw_lcore_handoffs_total{{{INST}}}{RATE}))",
               "{{node}} lcore {{lcore}} hand-off"),
        target(f"sum by (node, lcore) (rate(egw_lcore_held_total{{{INST}}}{RATE}))",
               "{{node}} lcore {{lcore}} held for ARP", ref="B"),
    ], "pps", "Packets passed to the worker that owns their session, and packets waiting for ARP."), 12, 8)
    return dashboard("egw-overview", "egw / Overview",
                     "Throughput per port and per Service, drops by reason, worker load.",
                     [instance_variable()], l)


def services():
    sel = f'{INST}, namespace=~"$namespace", service=~"$service"'
    l = Layout()
    l.add(table("EgressServices", f"egw_service_info{{{sel}}}",
                "Every EgressService egwd knows, with its mode, VRF and status.host.",
                ["Time", "Value", "__name__", "job"]), 24, 7)
    l.row("Traffic")
    l.add(timeseries("Packets", [
        target(f"sum by (namespace, service, direction) (rate(egw_service_packets_total{{{sel}}}{RATE}))",
               "{{namespace}}/{{service}} {{direction}}"),
    ], "pps", "Translated packets; egress is pod to outside, reply is outside to pod."), 12, 8)
    l.add(timeseries("Bytes", [
        target(f"sum by (namespace, service, direction) (rate(egw_service_bytes_total{{{sel}}}{RATE}))",
               "{{namespace}}/{{service}} {{direction}}"),
    ], "Bps", "Translated bytes (whole Ethernet frames), by direction."), 12, 8)
    l.row("Sessions and NAT ports")
    l.add(timeseries("Open sessions", [
        target(f"sum by (namespace, service) (egw_service_sessions_active{{{sel}}})", "{{namespace}}/{{service}}"),
    ], "none", "NAT sessions of each Service open now."), 8, 8)
    l.add(timeseries("New sessions", [
        target(f"sum by (namespace, service) (rate(egw_service_sessions_created_total{{{sel}}}{RATE}))",
               "{{namespace}}/{{service}}"),
    ], "ops", "NAT sessions created per second."), 8, 8)
    l.add(timeseries("NAT port allocation failures", [
        target(f"sum by (namespace, service) (rate(egw_service_snat_allocation_failures_total{{{sel}}}{RATE}))",
               "{{namespace}}/{{service}}"),
    ], "ops", "New connections dropped because every NAT port toward their destination was taken "
              "(drop reason port_exhausted). Any non-zero rate means the Service needs more addresses "
              "or a wider sessions.port_min..port_max."), 8, 8)
    l.add(timeseries("NAT port use per address", [
        target(f"max by (node, address) (egw_snat_sessions{{{INST}}}"
               f" / on (node, address, kind) egw_snat_ports_capacity{{{INST}}})", "{{node}} {{address}}"),
    ], "percentunit", "Sessions on each NAT address over the ports available toward one destination. "
                      "Exhaustion happens per destination, so this is an upper bound of the risk: at "
                      "100% every port is in use if all sessions go to the same remote address and port."),
          12, 8)
    l.add(timeseries("Endpoints", [
        target(f"sum by (namespace, service) (egw_service_endpoints{{{sel}}})", "{{namespace}}/{{service}}"),
    ], "none", "Pods (cluster-networked IPv4 endpoints) behind each Service."), 12, 8)
    variables = [
        instance_variable(),
        query_variable("namespace", "Namespace", f"label_values(egw_service_info{{{INST}}}, namespace)"),
        query_variable("service", "Service",
                       f'label_values(egw_service_info{{{INST}, namespace=~"$namespace"}}, service)'),
    ]
    return dashboard("egw-services", "egw / Services",
                     "Per-EgressService packets, bytes, sessions, NAT port use and allocation failures.",
                     variables, l)


def control_plane():
    l = Layout()
    l.add(stat("Configuration generation", f"max(egw_config_generation{{{INST}}})", "none",
               "Policy tables published since egwd started (highest over the gateways)."), 6, 4)
    l.add(stat("Since last publication", f"time() - max(egw_config_last_publish_timestamp_seconds{{{INST}}})", "s",
               "Seconds since the newest policy generation was published."), 6, 4)
    l.add(stat("Services known", f"count(egw_service_info{{{INST}}})", "none",
               "EgressServices in egwd's view, served here or not."), 6, 4)
    l.add(stat("Uptime", f"time() - min(egw_start_time_seconds{{{INST}}})", "s",
               "Since the oldest selected egwd started."), 6, 4)
    l.row("Publication")
    l.add(timeseries("Generation", [
        target(f"egw_config_generation{{{INST}}}", "{{node}}"),
    ], "none", "Each step is a new policy snapshot handed to the workers."), 12, 8)
    l.add(timeseries("Publication latency", [
        target(f"histogram_quantile(0.99, sum by (node, le) "
               f"(rate(egw_config_publish_duration_seconds_bucket{{{INST}}}{RATE})))", "{{node}} p99"),
        target(f"histogram_quantile(0.5, sum by (node, le) "
               f"(rate(egw_config_publish_duration_seconds_bucket{{{INST}}}{RATE})))", "{{node}} p50", ref="B"),
        target(f"sum by (node) (rate(egw_config_publish_duration_seconds_sum{{{INST}}}{RATE}))"
               f" / sum by (node) (rate(egw_config_publish_duration_seconds_count{{{INST}}}{RATE}))",
               "{{node}} mean", ref="C"),
    ], "s", "From handing a new snapshot to the workers until the old one is freed (RCU grace period)."), 12, 8)
    l.add(timeseries("Publications", [
        target(f"sum by (node) (increase(egw_config_publish_duration_seconds_count{{{INST}}}{RATE}))",
               "{{node}}"),
    ], "none", "Policy snapshots published per interval."), 12, 8)
    l.add(timeseries("Services programmed", [
        target(f"sum by (node) (egw_service_programmed{{{INST}}})", "{{node}} programmed"),
        target(f"sum by (node) (egw_services_known{{{INST}}})", "{{node}} known", ref="B"),
    ], "none", "EgressServices each gateway translates, and those it knows."), 12, 8)
    l.row("Kubernetes API (state.source kubernetes)")
    l.add(stat("Leaders", f"sum(egw_leader{{{INST}}})", "none",
               "egwd instances holding the leader Lease: 1 when the election works, 0 for up to a Lease "
               "duration during a failover, never more than 1.", decimals=0), 6, 4)
    l.add(stat("Resources not synced", f"count(egw_k8s_synced{{{INST}}} == 0) or vector(0)", "none",
               "Watched resources whose first list has not completed; egwd programs no Service until every "
               "one is synced.", decimals=0), 6, 4)
    l.add(stat("Watches down", f"count(egw_k8s_watch_open{{{INST}}} == 0) or vector(0)", "none",
               "Watch streams not open right now. Brief dips at the server's watch timeout are routine; "
               "a lasting one means the API server is unreachable.", decimals=0), 6, 4)
    l.add(stat("Worst cache staleness", f"max(time() - egw_k8s_last_sync_timestamp_seconds{{{INST}}})", "s",
               "How long ago the stalest cache was last known current (0 while its watch is open). "
               "egwd keeps forwarding with what it has meanwhile."), 6, 4)
    l.add(timeseries("Watch restarts", [
        target(f"sum by (node, resource, reason) (increase(egw_k8s_watch_restarts_total{{{INST}}}{RATE}))",
               "{{node}} {{resource}} {{reason}}"),
    ], "none", "Watch streams that ended, by reason: closed is the server's timeout (routine), expired "
               "is 410 Gone and costs a relist, error is a refused or cut connection or an HTTP error."), 12, 8)
    l.add(timeseries("Relists and list failures", [
        target(f"sum by (node, resource) (increase(egw_k8s_relists_total{{{INST}}}{RATE}))",
               "{{node}} {{resource}} relists"),
        target(f"sum by (node, resource) (increase(egw_k8s_list_failures_total{{{INST}}}{RATE}))",
               "{{node}} {{resource}} failed lists", ref="B"),
    ], "none", "Complete lists after the first (after a 410 or the relist period), and list attempts "
               "that failed."), 12, 8)
    l.add(timeseries("Watch events", [
        target(f"sum by (node, resource) (rate(egw_k8s_watch_events_total{{{INST}}}{RATE}))",
               "{{node}} {{resource}}"),
    ], "ops", "ADDED, MODIFIED and DELETED events applied per second, by resource."), 12, 8)
    l.add(timeseries("Cache staleness", [
        target(f"time() - egw_k8s_last_sync_timestamp_seconds{{{INST}}}", "{{node}} {{resource}}"),
    ], "s", "Seconds since each resource's cache was last known current; 0 while its watch is open."), 12, 8)
    l.row("Leader election")
    l.add(timeseries("Leader", [
        target(f"egw_leader{{{INST}}}", "{{node}}"),
    ], "none", "1 on the egwd holding the leader Lease. With election external it is 0 everywhere."), 12, 8)
    l.add(timeseries("Live gateways and assigned Services", [
        target(f"max(egw_election_live_gateways{{{INST}}})", "live gateways"),
        target(f"max(egw_election_assigned_services{{{INST}}})", "Services with a host", ref="B"),
    ], "none", "As the leader sees them: gateways with a current liveness Lease, and EgressServices it "
               "has given a host."), 12, 8)
    l.add(timeseries("Write-backs", [
        target(f"sum by (node, object) (increase(egw_k8s_writes_total{{{INST}}}{RATE}))",
               "{{node}} {{object}}"),
        target(f"sum by (node, object) (increase(egw_k8s_write_failures_total{{{INST}}}{RATE}))",
               "{{node}} {{object}} failed", ref="B"),
    ], "none", "The leader's status.host and node label PATCHes, and those that failed (retried with "
               "backoff)."), 12, 8)
    l.add(timeseries("Leader changes and Lease renewals", [
        target(f"sum by (node) (increase(egw_leader_transitions_total{{{INST}}}{RATE}))",
               "{{node}} became leader"),
        target(f"sum by (node) (increase(egw_election_lease_renewals_total{{{INST}}}{RATE}))",
               "{{node}} liveness renewals", ref="B"),
    ], "none", "Times each egwd took the leader Lease, and its liveness Lease renewals (steady when "
               "healthy: one per retry period)."), 12, 8)
    l.row("Build")
    l.add(table("Versions", f"egw_build_info{{{INST}}}", "egw and DPDK version of every gateway.",
                ["Time", "Value", "__name__", "job"]), 24, 6)
    return dashboard("egw-control-plane", "egw / Control plane",
                     "Configuration generation and publication latency, Services known and programmed, Kubernetes "
                     "watch health and leader election, versions.",
                     [instance_variable()], l)


DASHBOARDS = {"overview.json": overview, "services.json": services, "control-plane.json": control_plane}


def dashboard_text(build):
    return json.dumps(build(), indent=2) + "\n"


def configmap_text():
    lines = [
        "# SPDX-License-Identifier: Apache-2.0",
        "# Generated by docs/grafana/generate.py from its dashboards; do not edit.",
        "# Not in kustomization.yaml: it goes to Grafana's namespace. kubectl apply -f this file.",
        "# The Grafana sidecar (kube-prometheus-stack's k8s-sidecar) imports ConfigMaps labelled",
        "# grafana_dashboard: \"1\" from the namespaces it watches (here: monitoring).",
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        "  name: egw-grafana-dashboards",
        "  namespace: monitoring",
        "  labels:",
        "    app.kubernetes.io/name: egw",
        "    grafana_dashboard: \"1\"",
        "  annotations:",
        "    grafana_folder: egw",
        "data:",
    ]
    for name, build in DASHBOARDS.items():
        lines.append(f"  egw-{name}: |")
        lines.extend("    " + line if line else "" for line in dashboard_text(build).splitlines())
    return "\n".join(lines) + "\n"


def outputs():
    out = {HERE / name: dashboard_text(build) for name, build in DASHBOARDS.items()}
    out[REPO / CONFIGMAP] = configmap_text()
    return out


def main(argv):
    check = "--check" in argv
    stale = []
    for path, text in outputs().items():
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(REPO)))
        else:
            path.write_text(text)
    if stale:
        print("out of date (run python3 docs/grafana/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
