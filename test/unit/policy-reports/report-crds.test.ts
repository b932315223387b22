// deploy/crds/reports/: the four report CRDs are where the writer looks for them (group, version, kind, plural,
// scope), structural and within what kube-apiserver v1.20 accepts, and every report the builders make validates
// against them with nothing the apiserver would prune (so a read-back compares equal). The e2e test
// (test/e2e/policy-reports.test.ts) has a real apiserver accept them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv } from "ajv";
import { parse } from "yaml";
import { buildPolicyReport } from "../../../src/core/policy-reports/policy-report-objects.ts";
import { REPORT_APIS, REPORT_FORMATS, type ReportApi } from "../../../src/core/policy-reports/report-formats.ts";
import type { ResourceScan } from "../../../src/core/policy-reports/resource-scan.ts";

const DIR = join(fileURLToPath(new URL("../../../", import.meta.url)), "deploy/crds/reports");

interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  required?: string[];
  enum?: string[];
  [keyword: string]: unknown;
}
interface Crd {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: {
    group: string;
    scope: string;
    names: { kind: string; plural: string; listKind: string; singular: string; shortNames?: string[] };
    versions: Array<{
      name: string;
      served: boolean;
      storage: boolean;
      additionalPrinterColumns?: Array<{ jsonPath: string }>;
      schema: { openAPIV3Schema: Schema };
    }>;
  };
}

const APIS: ReportApi[] = REPORT_FORMATS.flatMap((f) => [REPORT_APIS[f].namespaced, REPORT_APIS[f].cluster]);
const readCrd = async (api: ReportApi): Promise<Crd> => parse(await readFile(join(DIR, `${api.plural}.${api.group}.yaml`), "utf8")) as Crd;

test("the kustomization lists the four CRDs, each where the writer looks for it", async () => {
  const kustomization = parse(await readFile(join(DIR, "kustomization.yaml"), "utf8")) as { resources: string[] };
  assert.deepEqual([...kustomization.resources].sort(), APIS.map((a) => `${a.plural}.${a.group}.yaml`).sort());
  for (const api of APIS) {
    const crd = await readCrd(api);
    assert.equal(crd.apiVersion, "apiextensions.k8s.io/v1");
    assert.equal(crd.kind, "CustomResourceDefinition");
    assert.equal(crd.metadata.name, `${api.plural}.${api.group}`);
    assert.equal(crd.spec.group, api.group);
    assert.equal(crd.spec.scope, api.namespaced ? "Namespaced" : "Cluster");
    assert.equal(crd.spec.names.kind, api.kind);
    assert.equal(crd.spec.names.plural, api.plural);
    assert.equal(crd.spec.names.listKind, `${api.kind}List`);
    assert.deepEqual(
      crd.spec.versions.map((v) => [v.name, v.served, v.storage]),
      [[api.version, true, true]],
    );
  }
  // The short names kubectl users know.
  assert.deepEqual(
    (await Promise.all(APIS.map(readCrd))).map((c) => c.spec.names.shortNames),
    [["polr"], ["cpolr"], ["reps"], ["creps"]],
  );
});

/** Keywords a v1.20 structural schema may use here (no CEL rules, no defaults needed). */
const ALLOWED = new Set([
  "type",
  "description",
  "properties",
  "items",
  "required",
  "enum",
  "format",
  "additionalProperties",
  "x-kubernetes-map-type",
  "x-kubernetes-list-type",
]);

function walk(schema: Schema, path: string, visit: (s: Schema, path: string) => void): void {
  visit(schema, path);
  for (const [name, child] of Object.entries(schema.properties ?? {})) walk(child, `${path}.${name}`, visit);
  if (schema.items) walk(schema.items, `${path}[]`, visit);
  if (typeof schema.additionalProperties === "object") walk(schema.additionalProperties, `${path}{}`, visit);
}

test("the schemas are structural and use only what kube-apiserver v1.20 accepts", async () => {
  for (const api of APIS) {
    const schema = (await readCrd(api)).spec.versions[0]!.schema.openAPIV3Schema;
    walk(schema, api.kind, (s, path) => {
      assert.ok(typeof s.type === "string", `${path} has a type`);
      for (const keyword of Object.keys(s)) assert.ok(ALLOWED.has(keyword), `${path}: ${keyword}`);
      assert.ok(!(s.properties && s.additionalProperties), `${path}: properties and additionalProperties together`);
      for (const r of s.required ?? []) assert.ok(s.properties?.[r], `${path}: required ${r} is a property`);
    });
    // The published enums and the timestamp shape.
    const result = schema.properties!.results!.items!;
    assert.deepEqual(result.properties!.result!.enum, ["pass", "fail", "warn", "error", "skip"]);
    assert.deepEqual([...result.properties!.severity!.enum!].sort(), ["critical", "high", "info", "low", "medium"]);
    assert.deepEqual(result.required, ["policy"]);
    assert.deepEqual(result.properties!.timestamp!.required, ["seconds", "nanos"]);
    assert.equal(result.properties!.timestamp!.properties!.seconds!.format, "int64");
    assert.equal(result.properties!.timestamp!.properties!.nanos!.format, "int32");
    assert.deepEqual(Object.keys(schema.properties!.summary!.properties!).sort(), ["error", "fail", "pass", "skip", "warn"]);
    assert.equal(schema.properties!.scope!.properties!.uid!.type, "string");
    assert.equal("source" in schema.properties!, api.group === "openreports.io", `${api.kind}: a report-level source only in openreports`);
  }
});

test("the printer columns name fields of the schema", async () => {
  for (const api of APIS) {
    const version = (await readCrd(api)).spec.versions[0]!;
    const columns = version.additionalPrinterColumns ?? [];
    assert.deepEqual(
      columns.map((c) => c.jsonPath),
      [".scope.kind", ".scope.name", ".summary.pass", ".summary.fail", ".summary.warn", ".summary.error", ".summary.skip", ".metadata.creationTimestamp"],
    );
    for (const { jsonPath } of columns) {
      let node: Schema | undefined = version.schema.openAPIV3Schema;
      for (const part of jsonPath.split(".").slice(1)) node = part === "creationTimestamp" ? { type: "string" } : node?.properties?.[part];
      assert.ok(node, `${api.kind}: ${jsonPath}`);
    }
  }
});

/** The schema as JSON Schema, with every object closed: a field the CRD does not declare would be pruned. */
function closed(schema: Schema, path = ""): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [keyword, value] of Object.entries(schema)) {
    if (keyword.startsWith("x-kubernetes-") || keyword === "description") continue;
    if (keyword === "properties")
      out.properties = Object.fromEntries(Object.entries(value as Record<string, Schema>).map(([k, v]) => [k, closed(v, `${path}.${k}`)]));
    else if (keyword === "items" || keyword === "additionalProperties") out[keyword] = typeof value === "object" ? closed(value as Schema, path) : value;
    else out[keyword] = value;
  }
  // metadata is the apiserver's (ObjectMeta): left open here, as the CRD leaves it.
  if (schema.type === "object" && schema.properties && schema.additionalProperties === undefined && path !== ".metadata") out.additionalProperties = false;
  return out;
}

const ajv = new Ajv({ allErrors: true, strict: false });
ajv.addFormat("int64", { type: "number", validate: (n: number) => Number.isSafeInteger(n) });
ajv.addFormat("int32", { type: "number", validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });

const SCANS: ResourceScan[] = [
  {
    resource: { apiVersion: "v1", kind: "Pod", name: "web-0", namespace: "shop", uid: "4f1c2a8e-1d2b-4c3d-9e8f-0a1b2c3d4e5f" },
    results: [
      {
        policy: "signed-images",
        rule: "prod",
        result: "fail",
        severity: "critical",
        category: "Supply chain",
        message: "no valid signature",
        timestamp: { seconds: 1_790_000_000, nanos: 999_999_999 },
        properties: { image: "registry.example/web:1", digest: "sha256:" + "b".repeat(64) },
      },
      { policy: "restricted", result: "warn", severity: "info", message: "runs as root", timestamp: { seconds: 0, nanos: 0 } },
      { policy: "restricted", rule: "seccomp", result: "skip", message: "", timestamp: { seconds: 1, nanos: 1 } },
    ],
  },
  {
    resource: { apiVersion: "v1", kind: "Node", name: "node-a", uid: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d" },
    results: [{ policy: "p", result: "error", message: "backend down", timestamp: { seconds: 5, nanos: 0 } }],
  },
];

test("every report the builders make validates against its CRD, with no field the apiserver would prune", async () => {
  for (const format of REPORT_FORMATS) {
    for (const scan of SCANS) {
      const report = buildPolicyReport(format, scan);
      const api = scan.resource.namespace ? REPORT_APIS[format].namespaced : REPORT_APIS[format].cluster;
      assert.equal(report.kind, api.kind);
      const validate = ajv.compile(closed((await readCrd(api)).spec.versions[0]!.schema.openAPIV3Schema));
      assert.ok(validate(report), `${format} ${report.kind}: ${ajv.errorsText(validate.errors)}`);
      // And the schema does judge: a result outside the enum, a timestamp without nanos.
      const broken = JSON.parse(JSON.stringify(report)) as { results: Array<Record<string, unknown>> };
      broken.results[0]!.result = "denied";
      broken.results[0]!.timestamp = { seconds: 1 };
      assert.equal(validate(broken), false);
      assert.match(ajv.errorsText(validate.errors), /must be equal to one of the allowed values/);
      assert.match(ajv.errorsText(validate.errors), /must have required property 'nanos'/);
    }
  }
});

test("both formats describe results, scope and summary alike", async () => {
  const strip = (s: Schema): unknown => JSON.parse(JSON.stringify(s, (k, v: unknown) => (k === "description" ? undefined : v)));
  for (const scope of ["namespaced", "cluster"] as const) {
    const wg = (await readCrd(REPORT_APIS.wgpolicyk8s[scope])).spec.versions[0]!.schema.openAPIV3Schema.properties!;
    const open = (await readCrd(REPORT_APIS.openreports[scope])).spec.versions[0]!.schema.openAPIV3Schema.properties!;
    for (const field of ["results", "scope", "scopeSelector", "summary"]) assert.deepEqual(strip(open[field]!), strip(wg[field]!), `${scope} ${field}`);
  }
});
