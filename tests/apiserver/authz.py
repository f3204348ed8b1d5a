# SPDX-License-Identifier: Apache-2.0
"""RBAC authorization for the test API server (apiserver.py), from a manifest such as
docker/k8s/rbac.yaml.

The manifest's ClusterRoles, Roles, ClusterRoleBindings and RoleBindings are read as kube-apiserver's
RBAC authorizer reads them: a ClusterRoleBinding grants its ClusterRole everywhere, a RoleBinding
grants its Role or ClusterRole in the binding's namespace only; a rule matches on apiGroups,
resources ("resource/subresource" for a subresource), verbs and resourceNames, "*" matching
anything. Subjects are Users, Groups and ServiceAccounts (user
"system:serviceaccount:<namespace>:<name>", groups "system:serviceaccounts" and
"system:serviceaccounts:<namespace>"); every authenticated user is in "system:authenticated" and may
read discovery, as the default system:discovery binding allows.

A refused request gets the Status a real server sends (403, reason Forbidden):
  leases.coordination.k8s.io "egw-leader" is forbidden: User "system:serviceaccount:egw-system:egwd"
  cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "default"
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validation import debian_module  # noqa: E402


class Rule:
    def __init__(self, doc):
        self.groups = set(doc.get("apiGroups") or [])
        self.resources = set(doc.get("resources") or [])
        self.verbs = set(doc.get("verbs") or [])
        self.names = set(doc.get("resourceNames") or [])

    def allows(self, verb, group, resource, name):
        if "*" not in self.verbs and verb not in self.verbs:
            return False
        if "*" not in self.groups and group not in self.groups:
            return False
        if "*" not in self.resources and resource not in self.resources:
            _, _, sub = resource.partition("/")
            if not sub or f"*/{sub}" not in self.resources:
                return False
        if self.names and name not in self.names:
            return False
        return True


def groups_of(user):
    groups = {"system:authenticated"}
    if user.startswith("system:serviceaccount:"):
        ns = user.split(":")[2]
        groups |= {"system:serviceaccounts", f"system:serviceaccounts:{ns}"}
    return groups


def subject_matches(subject, user, groups, binding_ns):
    kind = subject.get("kind")
    if kind == "User":
        return subject.get("name") == user
    if kind == "Group":
        return subject.get("name") in groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return user == f"system:serviceaccount:{ns}:{subject.get('name')}"
    return False


class Authorizer:
    """Who may do what, from RBAC objects (a list of dicts)."""

    def __init__(self, objects):
        self.cluster_roles = {}
        self.roles = {}
        self.bindings = []          # (namespace or None, roleRef, subjects)
        for o in objects:
            if not isinstance(o, dict):
                continue
            kind, meta = o.get("kind"), o.get("metadata") or {}
            rules = [Rule(r) for r in o.get("rules") or []]
            if kind == "ClusterRole":
                self.cluster_roles[meta.get("name")] = rules
            elif kind == "Role":
                self.roles[(meta.get("namespace", "default"), meta.get("name"))] = rules
            elif kind == "ClusterRoleBinding":
                self.bindings.append((None, o.get("roleRef") or {}, o.get("subjects") or []))
            elif kind == "RoleBinding":
                self.bindings.append((meta.get("namespace", "default"), o.get("roleRef") or {},
                                      o.get("subjects") or []))

    @classmethod
    def from_file(cls, path):
        yaml = debian_module("yaml")
        with open(path) as f:
            return cls([d for d in yaml.safe_load_all(f) if d])

    def allowed(self, user, verb, group, resource, namespace, name):
        """May `user` do `verb` on `resource` ("plural" or "plural/subresource") of API `group`,
        in `namespace` ("" for cluster-scoped) and `name` ("" for a collection)?"""
        groups = groups_of(user)
        for binding_ns, ref, subjects in self.bindings:
            if binding_ns is not None and binding_ns != namespace:
                continue
            if not any(subject_matches(s, user, groups, binding_ns) for s in subjects):
                continue
            if ref.get("kind") == "ClusterRole":
                rules = self.cluster_roles.get(ref.get("name"), [])
            else:
                rules = self.roles.get((binding_ns, ref.get("name")), [])
            if any(r.allows(verb, group, resource, name) for r in rules):
                return True
        return False


def forbidden_message(user, verb, group, plural, subresource, namespace, name):
    """The message of kube-apiserver's 403 (the resource qualified by its group, then why)."""
    qualified = f"{plural}.{group}" if group else plural
    head = f'{qualified} "{name}"' if name else qualified
    resource = f"{plural}/{subresource}" if subresource else plural
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return (f'{head} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
            f'in API group "{group}" {where}')
