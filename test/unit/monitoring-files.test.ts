// deploy/monitoring ships the alerting rules twice, as a Prometheus rule file and as the Prometheus Operator's
// PrometheusRule: the two must be the same rules. (What the rules and the dashboard read is tested against a
// real serve, and the rules with promtool, in test/e2e/monitoring.test.ts.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

const DIR = fileURLToPath(new URL("../../deploy/monitoring/", import.meta.url));
const read = (file: string) => readFileSync(DIR + file, "utf8");

test("the PrometheusRule holds exactly the rule file's groups", () => {
  const rules = parse(read("alerts.rules.yaml")) as { groups: unknown[] };
  const resource = parse(read("prometheusrule.yaml")) as { apiVersion: string; kind: string; metadata: { namespace: string }; spec: unknown };
  assert.equal(resource.apiVersion, "monitoring.coreos.com/v1");
  assert.equal(resource.kind, "PrometheusRule");
  assert.equal(resource.metadata.namespace, "imprimatur");
  assert.deepEqual(resource.spec, rules);
});

test("the dashboard's panels have distinct ids and each target a query, and the kustomization ships every file", () => {
  const dashboard = JSON.parse(read("dashboard.json")) as { uid: string; panels: Array<{ id: number; targets: Array<{ expr: string; refId: string }> }> };
  assert.equal(dashboard.uid, "imprimatur");
  const ids = dashboard.panels.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length);
  for (const p of dashboard.panels) {
    assert.ok(p.targets.length > 0);
    for (const t of p.targets) assert.ok(t.expr.length > 0 && t.refId.length > 0);
  }
  const kustomization = parse(read("kustomization.yaml")) as { resources: string[]; configMapGenerator: Array<{ files: string[] }> };
  assert.deepEqual(kustomization.resources.sort(), ["prometheusrule.yaml", "servicemonitor.yaml"]);
  assert.deepEqual(kustomization.configMapGenerator[0]!.files, ["dashboard.json"]);
});
