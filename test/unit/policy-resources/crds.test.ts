// The policy CRDs: deploy/crds/ is what `npm run crds` generates (so the API and the loader never drift), the
// schemas are structural, and the JSON Schemas written for PodRestriction and TrustRoot say what their
// compilers accept (the compilers are hand-written, not schema-driven).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv } from "ajv";
import { parse, parseAllDocuments } from "yaml";
import { CrdSchemaError, toStructuralSchema } from "../../../src/policy-resources/crd-schema.ts";
import { namespacedEditorSchemas, policyCrd, POLICY_RESOURCE_KINDS, renderCrdFiles } from "../../../src/policy-resources/policy-crds.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import podRestrictionSchema from "../../../src/core/pod-restriction/pod-restriction.schema.json" with { type: "json" };
import trustRootSchema from "../../../src/core/trust-root/trust-root.schema.json" with { type: "json" };
import { embeddedTrustedRootJson } from "../../../src/verification/trust-roots.ts";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const CRDS = join(ROOT, "deploy/crds");

test("deploy/crds/ holds exactly what npm run crds generates", async () => {
  const generated = renderCrdFiles();
  const committed = (await readdir(CRDS)).filter((f) => f.endsWith(".yaml")).sort();
  assert.deepEqual(committed, [...generated.keys()].sort(), "the same files");
  for (const [name, text] of generated) assert.equal(await readFile(join(CRDS, name), "utf8"), text, `deploy/crds/${name} is stale: run npm run crds`);
  const kustomization = parse(generated.get("kustomization.yaml")!) as { resources: string[] };
  assert.deepEqual(
    kustomization.resources.sort(),
    committed.filter((f) => f !== "kustomization.yaml"),
  );
});

test("the namespaced kinds' editor schemas are what npm run crds generates: the CRD's shape, with metadata.namespace required", async () => {
  const generated = namespacedEditorSchemas();
  assert.deepEqual([...generated.keys()].sort(), [
    "src/core/image-policy/namespaced-image-policy.schema.json",
    "src/core/pod-restriction/namespaced-pod-restriction.schema.json",
  ]);
  for (const [file, schema] of generated) assert.deepEqual(JSON.parse(await readFile(join(ROOT, file), "utf8")), schema, `${file} is stale: run npm run crds`);
  const validate = new Ajv({ allErrors: true, strict: true }).compile(generated.get("src/core/image-policy/namespaced-image-policy.schema.json")!);
  const policy = (metadata: Record<string, unknown>, spec: Record<string, unknown> = {}) => ({
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "NamespacedImagePolicy",
    metadata,
    spec: { rules: [{ action: "allow", images: ["registry.example.com/*"] }], ...spec },
  });
  assert.equal(validate(policy({ name: "corp-only", namespace: "shop" })), true, JSON.stringify(validate.errors));
  assert.equal(validate(policy({ name: "corp-only" })), false, "without a namespace");
  assert.equal(validate(policy({ name: "corp-only", namespace: "Shop" })), false, "a namespace that is not a DNS label");
  assert.equal(validate(policy({ name: "corp-only", namespace: "shop" }, { namespaces: ["web"] })), false, "a field only the cluster kind has");
});

test("every CRD is imprimatur.dev/v1alpha1 (cluster-scoped, the namespaced kinds namespaced) with status, printer columns, short names and the imprimatur category", () => {
  // Short names taken by built-in resources or common add-ons (Tekton's pr, tr) must not be reused.
  const taken = [
    "po",
    "ns",
    "no",
    "svc",
    "ep",
    "cm",
    "sa",
    "pv",
    "pvc",
    "rs",
    "rc",
    "ds",
    "sts",
    "deploy",
    "ing",
    "pc",
    "pdb",
    "psp",
    "sc",
    "csr",
    "ev",
    "hpa",
    "netpol",
    "cs",
    "crd",
    "crds",
    "limits",
    "quota",
    "pr",
    "tr",
    "ip",
  ];
  for (const k of POLICY_RESOURCE_KINDS) {
    const crd = policyCrd(k) as { spec: Record<string, any> };
    assert.equal(crd.spec.group, "imprimatur.dev");
    assert.equal(crd.spec.scope, k.kind.startsWith("Namespaced") || k.kind === "PolicyException" ? "Namespaced" : "Cluster", k.kind);
    assert.deepEqual(crd.spec.names.categories, ["imprimatur"]);
    for (const s of crd.spec.names.shortNames ?? []) assert.ok(!taken.includes(s), `${k.kind} short name ${s} clashes`);
    const [version] = crd.spec.versions;
    assert.equal(version.name, "v1alpha1");
    assert.deepEqual(version.subresources, { status: {} });
    // status.inForce (what a new replica enforces while the object is broken) must survive the apiserver's pruning.
    const inForce = version.schema.openAPIV3Schema.properties.status.properties.inForce;
    assert.deepEqual([inForce.type, inForce.properties.generation.type, inForce.properties.document.type], ["object", "integer", "string"]);
    assert.deepEqual(
      version.additionalPrinterColumns.map((c: { name: string }) => c.name),
      ["Ready", "Reason", "Age"],
    );
  }
});

/** Every structural-schema rule the apiserver checks that a conversion could break. */
function structuralProblems(node: Record<string, unknown>, path: string, root = true): string[] {
  const problems: string[] = [];
  for (const k of ["$ref", "const", "oneOf", "anyOf", "allOf", "not", "$defs", "definitions"]) if (k in node) problems.push(`${path}: ${k}`);
  if (node.type === undefined && node["x-kubernetes-preserve-unknown-fields"] !== true) problems.push(`${path}: no type`);
  if (node.properties !== undefined && node.additionalProperties !== undefined) problems.push(`${path}: properties with additionalProperties`);
  if (node.enum !== undefined && node.type === undefined) problems.push(`${path}: enum without type`);
  const properties = (node.properties ?? {}) as Record<string, Record<string, unknown>>;
  if (root && properties.metadata) {
    const { type, ...rest } = properties.metadata;
    if (type !== "object" || Object.keys(rest).length > 0) problems.push(`${path}.metadata: only its type may be given here`);
  }
  for (const [k, v] of Object.entries(properties)) problems.push(...structuralProblems(v, `${path}.${k}`, false));
  if (typeof node.additionalProperties === "object")
    problems.push(...structuralProblems(node.additionalProperties as Record<string, unknown>, `${path}.*`, false));
  if (node.items) problems.push(...structuralProblems(node.items as Record<string, unknown>, `${path}[]`, false));
  return problems;
}

test("the namespaced kinds' CRDs leave out the fields that reach beyond their namespace, and keep the rest of their cluster kind's", () => {
  const specFields = (kind: string, at: string[]) => {
    const crd = policyCrd(POLICY_RESOURCE_KINDS.find((k) => k.kind === kind)!) as { spec: { versions: Array<{ schema: { openAPIV3Schema: any } }> } };
    let node = crd.spec.versions[0]!.schema.openAPIV3Schema;
    for (const step of at) node = node.properties[step];
    return Object.keys(node.properties).sort();
  };
  const imagePolicy = specFields("ImagePolicy", ["spec"]);
  assert.deepEqual(
    specFields("NamespacedImagePolicy", ["spec"]),
    imagePolicy.filter((f) => !["namespaces", "namespaceSelector", "imagePaths"].includes(f)),
  );
  assert.deepEqual(
    specFields("NamespacedPodRestriction", []),
    specFields("PodRestriction", []).filter((f) => f !== "binding"),
  );
  assert.deepEqual(specFields("NamespacedPodRestriction", ["spec"]), specFields("PodRestriction", ["spec"]));
});

test("the CRD schemas are structural", () => {
  for (const k of POLICY_RESOURCE_KINDS) {
    const crd = policyCrd(k) as { spec: { versions: Array<{ schema: { openAPIV3Schema: Record<string, unknown> } }> } };
    assert.deepEqual(structuralProblems(crd.spec.versions[0]!.schema.openAPIV3Schema, k.kind), []);
  }
});

test("conversion: references inlined and a recursion cut, const and enum typed, closed objects keep unknown fields for the loader", () => {
  const converted = toStructuralSchema({
    type: "object",
    additionalProperties: false,
    properties: {
      kind: { const: "X" },
      mode: { enum: ["a", "b"], default: "a" },
      count: { enum: [1, 2] },
      tree: { $ref: "#/$defs/tree" },
      anything: {},
      labels: { type: "object", additionalProperties: { type: "string" } },
    },
    $defs: { tree: { type: "object", description: "a node", properties: { children: { type: "array", items: { $ref: "#/$defs/tree" } } } } },
  });
  const p = converted.properties as Record<string, any>;
  assert.deepEqual(p.kind, { type: "string", enum: ["X"] });
  assert.deepEqual(p.mode, { type: "string", default: "a", enum: ["a", "b"] });
  assert.deepEqual(p.count, { type: "integer", enum: [1, 2] });
  assert.deepEqual(p.anything, { "x-kubernetes-preserve-unknown-fields": true });
  assert.deepEqual(p.labels, { type: "object", additionalProperties: { type: "string" } });
  assert.equal(converted["x-kubernetes-preserve-unknown-fields"], true);
  assert.deepEqual(p.tree.properties.children.items, { type: "object", description: "a node", "x-kubernetes-preserve-unknown-fields": true });
});

test("conversion refuses what has no structural form", () => {
  assert.throws(() => toStructuralSchema({ type: "object", properties: { a: { oneOf: [{ type: "string" }, { type: "integer" }] } } }), CrdSchemaError);
  assert.throws(() => toStructuralSchema({ type: "object", properties: { a: { enum: ["x", 1] } } }), /several types/);
  assert.throws(() => toStructuralSchema({ type: "object", properties: { a: { $ref: "#/$defs/missing" } } }), /not defined/);
  assert.throws(
    () => toStructuralSchema({ type: "object", properties: { a: { type: "object" } }, additionalProperties: { type: "string" } }),
    /not structural/,
  );
});

// ---------------------------------------------------------------------------------------------------------
// The written JSON Schemas against the compilers

const ajv = new Ajv({ allErrors: true, strict: true });
const validPodRestriction = ajv.compile(podRestrictionSchema);
const validTrustRoot = ajv.compile(trustRootSchema);

async function shippedPodRestrictions(): Promise<Array<{ file: string; doc: Record<string, unknown> }>> {
  const out: Array<{ file: string; doc: Record<string, unknown> }> = [];
  for (const folder of ["policies/profiles", "policies/examples", "examples", "test/fixtures/e2e-pod-restrictions"]) {
    for (const f of await readdir(join(ROOT, folder), { recursive: true })) {
      if (!/\.ya?ml$/.test(f)) continue;
      for (const d of parseAllDocuments(await readFile(join(ROOT, folder, f), "utf8"))) {
        const doc = d.toJS() as Record<string, unknown> | null;
        if (doc?.kind === "PodRestriction") out.push({ file: `${folder}/${f}`, doc });
      }
    }
  }
  return out;
}

test("every shipped PodRestriction satisfies the PodRestriction JSON Schema", async () => {
  const docs = await shippedPodRestrictions();
  assert.ok(docs.length >= 4);
  for (const { file, doc } of docs) assert.ok(validPodRestriction(doc), `${file}: ${JSON.stringify(validPodRestriction.errors)}`);
});

/** The property names of the schema object at `path` (following $refs). */
function schemaFields(schema: Record<string, any>, path: string[]): string[] {
  let node = schema;
  for (const step of path) {
    node = step === "[]" ? node.items : node.properties[step];
    if (node.$ref) node = schema.$defs[node.$ref.split("/").pop()];
  }
  if (node.$ref) node = schema.$defs[node.$ref.split("/").pop()];
  return Object.keys(node.properties).sort();
}

test("where the PodRestriction JSON Schema is closed, the loader refuses an unknown field, listing the schema's fields there", () => {
  const base = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "PodRestriction",
    metadata: { name: "p" },
    binding: { namespaceSelector: { matchExpressions: [{ key: "a", operator: "Exists" }] } },
    spec: { checks: [{ name: "c", when: { spec: {} } }] },
  };
  const places: Array<{ at: string[]; set: (doc: any) => Record<string, unknown> }> = [
    { at: [], set: (d) => d },
    { at: ["metadata"], set: (d) => d.metadata },
    { at: ["binding"], set: (d) => d.binding },
    { at: ["binding", "namespaceSelector"], set: (d) => d.binding.namespaceSelector },
    { at: ["binding", "namespaceSelector", "matchExpressions", "[]"], set: (d) => d.binding.namespaceSelector.matchExpressions[0] },
    { at: ["spec"], set: (d) => d.spec },
    { at: ["spec", "checks", "[]"], set: (d) => d.spec.checks[0] },
    { at: ["spec", "checks", "[]", "when"], set: (d) => d.spec.checks[0].when },
  ];
  assert.equal(parsePolicyText(JSON.stringify(base), "p").errors.length, 0);
  for (const { at, set } of places) {
    const doc = structuredClone(base);
    set(doc).zzUnknown = 1;
    assert.equal(validPodRestriction(doc), false, `the schema refuses an unknown field at ${at.join(".")}`);
    const errors = parsePolicyText(JSON.stringify(doc), "p").errors;
    const known = /unknown field "zzUnknown"; known fields: (.*)$/.exec(errors[0]?.message ?? "")?.[1];
    assert.ok(known, `the loader refuses an unknown field at ${at.join(".")}: ${JSON.stringify(errors)}`);
    assert.deepEqual(known.split(", ").sort(), schemaFields(podRestrictionSchema, at), `the fields at ${at.join(".") || "the top"}`);
  }
});

test("the TrustRoot JSON Schema takes what the TrustRoot kind takes, and refuses unknown fields where it does", () => {
  const root = embeddedTrustedRootJson();
  const doc = (spec: unknown, extra: Record<string, unknown> = {}) => ({
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "TrustRoot",
    metadata: { name: "corp" },
    spec,
    ...extra,
  });
  for (const ok of [doc({ trustedRoot: root }), doc({ trustedRoot: JSON.stringify(root) })]) {
    assert.ok(validTrustRoot(ok), JSON.stringify(validTrustRoot.errors));
    assert.deepEqual(parsePolicyText(JSON.stringify(ok), "r").errors, []);
  }
  for (const bad of [doc({ trustedRoot: root, extra: 1 }), doc({ trustedRoot: root }, { extra: 1 })]) {
    assert.equal(validTrustRoot(bad), false);
    assert.match(parsePolicyText(JSON.stringify(bad), "r").errors[0]?.message ?? "", /unknown field "extra"/);
  }
});
