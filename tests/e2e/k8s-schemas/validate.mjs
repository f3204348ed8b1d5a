// SPDX-License-Identifier: Apache-2.0
// Validates Kubernetes objects against the Kubernetes OpenAPI schemas, offline, with the
// validators that the npm package kubernetes-models generates from them.
// stdin: a JSON list of {"where": "...", "object": {...}}.
// stdout: a JSON list of {"where", "kind", "result": "ok" | "invalid" | "unknown kind", "error"}.
import { readFileSync } from "node:fs";

const input = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const { where, object } of input) {
  const apiVersion = String(object?.apiVersion ?? "");
  const kind = String(object?.kind ?? "");
  // "v1" -> kubernetes-models/v1/Kind; "apps/v1" -> kubernetes-models/apps/v1/Kind.
  const module = `kubernetes-models/${apiVersion}/${kind}`;
  let Model;
  try {
    Model = (await import(module))[kind];
  } catch {
    Model = undefined;
  }
  if (!/^[A-Za-z0-9./-]+$/.test(module) || typeof Model !== "function") {
    out.push({ where, kind: `${apiVersion} ${kind}`, result: "unknown kind", error: "" });
    continue;
  }
  try {
    new Model(object).validate();
    out.push({ where, kind: `${apiVersion} ${kind}`, result: "ok", error: "" });
  } catch (e) {
    out.push({ where, kind: `${apiVersion} ${kind}`, result: "invalid", error: String(e?.message ?? e) });
  }
}
process.stdout.write(JSON.stringify(out));
