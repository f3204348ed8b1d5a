# SPDX-License-Identifier: Apache-2.0
"""What kube-apiserver refuses on a write, for the test API server (apiserver.py).

Each check returns a list of field errors; `invalid()` turns them into the 422 Status a real
server answers (reason Invalid, details.causes one per error, the message "<Kind> "<name>" is
invalid: ..." with the group after the kind for non-core kinds). A body that cannot be decoded into
the kind (a Lease time that is not a MicroTime) is a 400 BadRequest, as in the real decoder.

  * metadata.labels on every kind: keys are qualified names (an optional lowercase DNS subdomain
    prefix of at most 253 characters and '/', then a name part of at most 63 characters of
    [A-Za-z0-9._-] that starts and ends alphanumeric); values at most 63 characters of the same
    characters, or empty.
  * EgressService: the openAPIV3Schema of docker/k8s/crd-egressservice.yaml (types, the
    sourceIPBy enum, required fields), checked with python3-jsonschema; fields the schema does not
    know are pruned, as a structural schema does.
  * EgressIP: the openAPIV3Schema of docker/k8s/crd-egressip.yaml, checked the same way, but a
    field the schema does not know is refused (400, "strict decoding error: unknown field"), as
    kube-apiserver does for a client asking fieldValidation=Strict (kubectl's default).
  * EgressFirewall: the same with the schema of tests/apiserver/crd-egressfirewall.yaml (Allow or
    Deny, exactly one destination, TCP/UDP/SCTP, ports 1-65535, a dnsName pattern), with
    kube-apiserver's wording for patterns, bounds and property counts.
  * DNSNameResolver: the schema of tests/apiserver/crd-dnsnameresolver.yaml (spec.name and each
    resolved dnsName a lower-case name with the final dot, "*." allowed in front; each resolved
    address's ip, ttlSeconds and lastLookupTime required), unknown fields refused as for EgressIP,
    and a lastLookupTime that is not an RFC 3339 time a 400, as the decoder of metav1.Time does.
  * EgressQoS: the schema of tests/apiserver/crd-egressqos.yaml (DSCP 0-63, dstCIDR of format
    cidr, the name "default" only), unknown fields refused as for EgressIP.
  * Lease: acquireTime and renewTime are MicroTime (RFC 3339 with exactly six fractional digits),
    leaseDurationSeconds > 0, leaseTransitions >= 0, holderIdentity a string.
"""

import copy
import importlib
import json
import os
import re
import sys


def debian_module(name):
    """Imports a module that scripts/deps.sh installs from Debian's packages; when the running
    interpreter is not Debian's own python3 (a pyenv or venv one of the same version), Debian's
    dist-packages directory is added to its path first."""
    try:
        return importlib.import_module(name)
    except ImportError:
        debian = "/usr/lib/python3/dist-packages"
        same = os.path.exists("/usr/bin/python%d.%d" % sys.version_info[:2])
        if same and os.path.isdir(debian) and debian not in sys.path:
            sys.path.append(debian)
            return importlib.import_module(name)
        raise

QNAME_CHARS = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QNAME_RE = re.compile("^" + QNAME_CHARS + "$")
DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE_RE = re.compile("^(" + QNAME_CHARS + ")?$")
MICRO_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")

QNAME_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
             "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
             f"regex used for validation is '{QNAME_CHARS}')")
PREFIX_MSG = ("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
              "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
              "'example.com', regex used for validation is "
              r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
             "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  "
             f"or 'my_value',  or '12345', regex used for validation is '({QNAME_CHARS})?')")

HERE = os.path.dirname(os.path.abspath(__file__))
CRD_PATH = os.path.join(HERE, "..", "..", "docker", "k8s", "crd-egressservice.yaml")
EGRESS_IP_CRD_PATH = os.path.join(HERE, "..", "..", "docker", "k8s", "crd-egressip.yaml")
# OVN-Kubernetes installs this one; egw ships no copy, so the test server keeps its own.
EGRESS_FIREWALL_CRD_PATH = os.path.join(HERE, "crd-egressfirewall.yaml")
# OpenShift installs this one with its DNSNameResolver feature; egw ships no copy either.
DNS_NAME_RESOLVER_CRD_PATH = os.path.join(HERE, "crd-dnsnameresolver.yaml")
EGRESS_QOS_CRD_PATH = os.path.join(HERE, "crd-egressqos.yaml")


class FieldError:
    """One field.Error: reason is FieldValueInvalid, FieldValueRequired, FieldValueNotSupported,
    FieldValueTypeInvalid or FieldValueTooMany."""

    def __init__(self, reason, field, detail, value=None, has_value=True):
        self.reason = reason
        self.field = field
        self.detail = detail
        self.value = value
        self.has_value = has_value

    def message(self):
        """The cause's message: what field.Error.ErrorBody() says."""
        if self.reason == "FieldValueRequired":
            return "Required value" + (": " + self.detail if self.detail else "")
        if self.reason == "FieldValueNotSupported":
            return f"Unsupported value: {json.dumps(self.value)}: {self.detail}"
        if self.reason == "FieldValueTypeInvalid":
            return f"Invalid value: {json.dumps(self.value)}: {self.detail}"
        if self.reason == "FieldValueTooMany":
            return f"Too many: {self.value}: {self.detail}"
        return f"Invalid value: {render(self.value)}: {self.detail}"


def render(value):
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def invalid_status(kind, group, name, errors):
    """(code, reason, message, details) of the 422 for these field errors."""
    qualified = f"{kind}.{group}" if group else kind
    parts = [f"{e.field}: {e.message()}" for e in errors]
    body = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = {"name": name, "kind": kind,
               "causes": [{"reason": e.reason, "message": e.message(), "field": e.field}
                          for e in errors]}
    if group:
        details["group"] = group
    return 422, "Invalid", f'{qualified} "{name}" is invalid: {body}', details


# --------------------------------------------------------------------------------------------
# Labels


def qualified_name_errors(key):
    """The problems of a label key, as strings (IsQualifiedName)."""
    errs = []
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not DNS1123_SUBDOMAIN_RE.match(prefix):
                errs.append(PREFIX_MSG)
    else:
        return ["a qualified name " + QNAME_MSG[len("name part "):] +
                " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if name and not QNAME_RE.match(name):
        errs.append(QNAME_MSG)
    return errs


def label_value_errors(value):
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not LABEL_VALUE_RE.match(value):
        errs.append(VALUE_MSG)
    return errs


def label_errors(obj):
    meta = obj.get("metadata") or {}
    labels = meta.get("labels")
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [FieldError("FieldValueTypeInvalid", "metadata.labels", "must be an object", labels)]
    out = []
    for k in sorted(labels):
        for msg in qualified_name_errors(k):
            out.append(FieldError("FieldValueInvalid", "metadata.labels", msg, k))
        v = labels[k]
        if not isinstance(v, str):
            out.append(FieldError("FieldValueTypeInvalid", f"metadata.labels.{k}", "must be a string", v))
            continue
        for msg in label_value_errors(v):
            out.append(FieldError("FieldValueInvalid", "metadata.labels", msg, v))
    return out


# --------------------------------------------------------------------------------------------
# EgressService: the CRD's schema


_crd_schemas = {}


def _v1_schema(path, version="v1"):
    """The openAPIV3Schema of `version` of the CRD in `path` (read once)."""
    if (path, version) not in _crd_schemas:
        yaml = debian_module("yaml")
        with open(path) as f:
            crd = yaml.safe_load(f)
        versions = crd["spec"]["versions"]
        _crd_schemas[path, version] = next(v for v in versions if v["name"] == version)["schema"]["openAPIV3Schema"]
    return _crd_schemas[path, version]


def egress_service_schema():
    """The openAPIV3Schema of the EgressService CRD."""
    return _v1_schema(CRD_PATH)


def egress_ip_schema():
    """The openAPIV3Schema of the EgressIP CRD."""
    return _v1_schema(EGRESS_IP_CRD_PATH)


def unknown_fields(obj, schema, path=""):
    """The paths of obj ("spec.foo", "spec.egressIPs[0]"...) that the structural schema does not
    know, in order: what a strict decoder refuses (apiVersion, kind and metadata are not checked)."""
    out = []
    if not isinstance(schema, dict):
        return out
    if isinstance(obj, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return out
        for k, v in obj.items():
            here = f"{path}.{k}" if path else k
            if not path and k in ("apiVersion", "kind", "metadata"):
                continue
            if props is not None and k in props:
                out += unknown_fields(v, props[k], here)
            elif isinstance(extra, dict):
                out += unknown_fields(v, extra, here)
            elif props is not None or extra is not None:
                out.append(here)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(obj):
            out += unknown_fields(v, schema["items"], f"{path}[{i}]")
    return out


def egress_firewall_schema():
    """The openAPIV3Schema of the EgressFirewall CRD."""
    return _v1_schema(EGRESS_FIREWALL_CRD_PATH)


def dns_name_resolver_schema():
    """The openAPIV3Schema of the DNSNameResolver CRD (v1alpha1)."""
    return _v1_schema(DNS_NAME_RESOLVER_CRD_PATH, "v1alpha1")


# metav1.Time: RFC 3339 to the second, with an optional fraction, "Z" or an offset.
TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def dns_name_resolver_times(obj):
    """Raises DecodeError for a lastLookupTime the decoder of metav1.Time refuses."""
    status = obj.get("status")
    names = status.get("resolvedNames") if isinstance(status, dict) else None
    for rn in names if isinstance(names, list) else []:
        addrs = rn.get("resolvedAddresses") if isinstance(rn, dict) else None
        for a in addrs if isinstance(addrs, list) else []:
            t = a.get("lastLookupTime") if isinstance(a, dict) else None
            if t is not None and (not isinstance(t, str) or not TIME_RE.match(t)):
                raise DecodeError(f'parsing time {json.dumps(t)} as "2006-01-02T15:04:05Z07:00": cannot parse '
                                  f'{json.dumps(t)} as "2006"')


def egress_qos_schema():
    """The openAPIV3Schema of the EgressQoS CRD."""
    return _v1_schema(EGRESS_QOS_CRD_PATH)


def egress_qos_checks(obj, schema):
    """What schema_errors leaves out for EgressQoS: the metadata.name pattern (kube-apiserver
    checks name and generateName against a CRD's metadata schema) and the cidr format."""
    import ipaddress
    out = []
    name = (obj.get("metadata") or {}).get("name")
    pattern = schema["properties"]["metadata"]["properties"]["name"]["pattern"]
    if isinstance(name, str) and not re.search(pattern, name):
        out.append(FieldError("FieldValueInvalid", "metadata.name",
                              f"metadata.name in body should match '{pattern}'", name))
    egress = (obj.get("spec") or {}).get("egress") if isinstance(obj.get("spec"), dict) else None
    for i, rule in enumerate(egress if isinstance(egress, list) else []):
        cidr = rule.get("dstCIDR") if isinstance(rule, dict) else None
        if not isinstance(cidr, str):
            continue
        try:
            ipaddress.ip_network(cidr, strict=False)
            ok = "/" in cidr
        except ValueError:
            ok = False
        if not ok:
            field = f"spec.egress[{i}].dstCIDR"
            out.append(FieldError("FieldValueInvalid", field, f"{field} in body must be of type cidr: {json.dumps(cidr)}",
                                  cidr))
    return out


def prune(obj, schema, top=True):
    """Drops what a structural schema does not specify (apiVersion, kind and metadata stay)."""
    if not isinstance(schema, dict):
        return obj
    if isinstance(obj, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return obj
        out = {}
        for k, v in obj.items():
            if top and k in ("apiVersion", "kind", "metadata"):
                out[k] = v
            elif props is not None and k in props:
                out[k] = prune(v, props[k], False)
            elif isinstance(extra, dict):
                out[k] = prune(v, extra, False)
            elif props is None and extra is None:
                out[k] = v
        return out
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"], False) for v in obj]
    return obj


def _field(path):
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (("." if out else "") + str(p))
    return out


def schema_errors(obj, schema):
    """What the CRD's openAPIV3Schema says of obj, as field errors with kube's wording."""
    jsonschema = debian_module("jsonschema")
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    v = jsonschema.Draft4Validator({k: s for k, s in schema.items()})
    out = []
    for e in sorted(v.iter_errors(body), key=lambda e: (list(map(str, e.absolute_path)), e.validator)):
        path = list(e.absolute_path)
        field = _field(path)
        if e.validator == "required":
            missing = e.message.split("'")[1] if "'" in e.message else "?"
            out.append(FieldError("FieldValueRequired", _field(path + [missing]), "", has_value=False))
        elif e.validator == "enum":
            supported = ", ".join(json.dumps(x) for x in e.validator_value)
            out.append(FieldError("FieldValueNotSupported", field, f"supported values: {supported}",
                                  e.instance))
        elif e.validator == "type":
            got = {dict: "object", list: "array", str: "string", bool: "boolean",
                   int: "integer", float: "number", type(None): "null"}.get(type(e.instance), "?")
            out.append(FieldError("FieldValueTypeInvalid", field,
                                  f"{field} in body must be of type {e.validator_value}: {json.dumps(got)}",
                                  got))
        elif e.validator == "pattern":
            out.append(FieldError("FieldValueInvalid", field,
                                  f"{field} in body should match '{e.validator_value}'", e.instance))
        elif e.validator in ("minimum", "maximum"):
            than = "greater" if e.validator == "minimum" else "less"
            out.append(FieldError("FieldValueInvalid", field,
                                  f"{field} in body should be {than} than or equal to {e.validator_value}",
                                  e.instance))
        elif e.validator == "maxProperties":
            out.append(FieldError("FieldValueTooMany", field,
                                  f"must have at most {e.validator_value} items", len(e.instance)))
        elif e.validator == "minProperties":
            out.append(FieldError("FieldValueRequired", field, "", has_value=False))
        else:
            out.append(FieldError("FieldValueInvalid", field, e.message, e.instance))
    return out


# --------------------------------------------------------------------------------------------
# Lease


class DecodeError(Exception):
    """The body cannot be decoded into the kind (a 400, not a 422)."""


def lease_checks(obj):
    """Decoding problems raise DecodeError; the rest are field errors (ValidateLeaseSpec)."""
    spec = obj.get("spec")
    if spec is None:
        return []
    if not isinstance(spec, dict):
        raise DecodeError("json: cannot unmarshal into Go struct field Lease.spec of type v1.LeaseSpec")
    for f in ("acquireTime", "renewTime"):
        t = spec.get(f)
        if t is None:
            continue
        if not isinstance(t, str):
            raise DecodeError(f"json: cannot unmarshal {type(t).__name__} into Go struct field "
                              f"LeaseSpec.spec.{f} of type string")
        if not MICRO_TIME_RE.match(t):
            raise DecodeError(f'parsing time "{t}" as "2006-01-02T15:04:05.000000Z07:00": cannot '
                              f'parse "{t}" as a MicroTime')
    for f in ("holderIdentity",):
        if f in spec and spec[f] is not None and not isinstance(spec[f], str):
            raise DecodeError(f"json: cannot unmarshal into Go struct field LeaseSpec.spec.{f} of type string")
    errs = []
    for f in ("leaseDurationSeconds", "leaseTransitions"):
        if f in spec and spec[f] is not None and (not isinstance(spec[f], int) or isinstance(spec[f], bool)):
            raise DecodeError(f"json: cannot unmarshal into Go struct field LeaseSpec.spec.{f} of type int32")
    if spec.get("leaseDurationSeconds") is not None and spec["leaseDurationSeconds"] <= 0:
        errs.append(FieldError("FieldValueInvalid", "spec.leaseDurationSeconds", "must be greater than 0",
                               spec["leaseDurationSeconds"]))
    if spec.get("leaseTransitions") is not None and spec["leaseTransitions"] < 0:
        errs.append(FieldError("FieldValueInvalid", "spec.leaseTransitions",
                               "must be greater than or equal to 0", spec["leaseTransitions"]))
    return errs


# --------------------------------------------------------------------------------------------
# Entry point


def validate(kind, obj):
    """(object to store, field errors); raises DecodeError. The object may be pruned."""
    errs = label_errors(obj)
    if kind == "EgressService":
        schema = egress_service_schema()
        obj = prune(copy.deepcopy(obj), schema)
        errs += schema_errors(obj, schema)
    elif kind == "EgressIP":
        schema = egress_ip_schema()
        unknown = unknown_fields(obj, schema)
        if unknown:
            raise DecodeError("strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown))
        errs += schema_errors(obj, schema)
    elif kind == "EgressFirewall":
        schema = egress_firewall_schema()
        obj = prune(copy.deepcopy(obj), schema)
        errs += schema_errors(obj, schema)
    elif kind == "DNSNameResolver":
        schema = dns_name_resolver_schema()
        unknown = unknown_fields(obj, schema)
        if unknown:
            raise DecodeError("strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown))
        dns_name_resolver_times(obj)
        errs += schema_errors(obj, schema)
    elif kind == "EgressQoS":
        schema = egress_qos_schema()
        unknown = unknown_fields(obj, schema)
        if unknown:
            raise DecodeError("strict decoding error: " + ", ".join(f'unknown field "{u}"' for u in unknown))
        errs += egress_qos_checks(obj, schema) + schema_errors(obj, schema)
    elif kind == "Lease":
        errs += lease_checks(obj)
    return obj, errs
