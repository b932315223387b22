// The JSON Schemas of the kinds users write besides policies (PolicyTest, ServerConfig, RegistryConfig,
// CallerTokens) say
// what their loaders accept. The loaders are hand-written, so this walks them:
// - every mapping a loader checks, with the fields it knows there, is recorded while it reads a document that
//   sets every field (ConfigChecks.mapping is observed, not replaced: the real loader runs), and must be an
//   object of the schema with exactly those properties;
// - every field of the schema gets a table of values, each given to the real loader and to the schema, which
//   must agree. Only what a schema cannot say (a file exists, a key belongs to its certificate, names are
//   unique once normalized, tokens are not shared) is listed apart as refused by the loader alone.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ajv, type ValidateFunction } from "ajv";
import { ConfigChecks } from "../../src/config/config-checks.ts";
import { ConfigError } from "../../src/config/config-error.ts";
import { loadRegistriesFile } from "../../src/config/registries-file.ts";
import { loadServerConfig } from "../../src/config/server-config.ts";
import { readPolicyTests } from "../../src/cli/policy-test.ts";
import { loadCallerTokens, tokenDigest } from "../../src/caller-auth/caller-tokens.ts";
import { shippedProfiles } from "../../src/policy/profiles.ts";
import { createCertificateAuthority, issueCertificate } from "../../src/tls/tls-bootstrap.ts";
import policyTestSchema from "../../src/config/policy-test.schema.json" with { type: "json" };
import serverConfigSchema from "../../src/config/server-config.schema.json" with { type: "json" };
import registryConfigSchema from "../../src/config/registry-config.schema.json" with { type: "json" };
import callerTokensSchema from "../../src/config/caller-tokens.schema.json" with { type: "json" };

type Path = Array<string | number>;
type Json = Record<string, any>;

interface KindUnderTest {
  kind: string;
  schema: Json;
  /** A document that sets every field the schema knows, at least once, and that the loader accepts. */
  full: () => Json;
  load: (file: string) => Promise<unknown>;
  /** Values per field: the loader and the schema must both accept or both refuse each. `undefined` removes the field. */
  cases: Array<{ at: Path; values: unknown[]; loaderOnly?: unknown[] }>;
}

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-schemas-"));
  const ca = await createCertificateAuthority("schemas test CA");
  const client = await issueCertificate(ca, { commonName: "puller", client: true });
  const other = await issueCertificate(ca, { commonName: "other", client: true });
  await mkdir(join(dir, "policies"));
  const files: Record<string, string> = {
    "ca.pem": ca.certPem,
    "client.pem": client.certPem,
    "client-key.pem": client.keyPem,
    "other-key.pem": other.keyPem,
    "not-pem.txt": "hello\n",
    "config.yaml": "",
    "namespaces.yaml": "",
    "pod-security.yaml": "",
    "pods.yaml": "",
  };
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
});
after(() => rm(dir, { recursive: true, force: true }));

// strictRequired off: a oneOf branch requires a property defined beside it (CallerTokens: token or tokenSha256).
const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false, allowUnionTypes: true });

let counter = 0;
/** Writes the document as JSON (which is YAML) in the fixture folder and gives it to the loader. */
async function loaderAccepts(k: KindUnderTest, doc: unknown): Promise<{ ok: boolean; why: string }> {
  const file = join(dir, `${k.kind}-${++counter}.yaml`);
  await writeFile(file, JSON.stringify(doc));
  try {
    await k.load(file);
    return { ok: true, why: "" };
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    return { ok: false, why: e.message };
  }
}

function withValue(doc: Json, at: Path, value: unknown): Json {
  const copy = structuredClone(doc);
  let node: any = copy;
  for (const step of at.slice(0, -1)) node = node[step];
  const last = at[at.length - 1]!;
  if (value === undefined) delete node[last];
  else node[last] = value;
  return copy;
}

/** "results[].rule": a place in a document, list indices as []. */
function placeOf(path: readonly (string | number)[]): string {
  return path
    .map((s) => (typeof s === "number" ? "[]" : s))
    .join(".")
    .replaceAll(".[]", "[]");
}

function resolveRef(schema: Json, node: Json): Json {
  return node.$ref ? schema.$defs[(node.$ref as string).split("/").pop()!] : node;
}

/** Every object of the schema with properties: place → property names; and every property's place. */
function schemaPlaces(schema: Json): { objects: Map<string, string[]>; fields: Set<string> } {
  const objects = new Map<string, string[]>();
  const fields = new Set<string>();
  const walk = (raw: Json, path: string[]) => {
    const node = resolveRef(schema, raw);
    if (node.properties) {
      objects.set(placeOf(path), Object.keys(node.properties).sort());
      for (const [name, sub] of Object.entries(node.properties as Json)) {
        fields.add(placeOf([...path, name]));
        walk(sub, [...path, name]);
      }
    }
    if (node.items) walk(node.items, [...path, "[]"]);
  };
  walk(schema, []);
  return { objects, fields };
}

/** The mappings the loader checks while reading `doc`, each with the fields it knows there. */
async function loaderMappings(k: KindUnderTest, doc: unknown): Promise<Map<string, string[]>> {
  const seen = new Map<string, string[]>();
  const original = ConfigChecks.prototype.mapping;
  ConfigChecks.prototype.mapping = function (this: ConfigChecks, value, path, known) {
    seen.set(placeOf(path), [...known].sort());
    return original.call(this, value, path, known);
  };
  try {
    const { ok, why } = await loaderAccepts(k, doc);
    assert.ok(ok, `the full ${k.kind} document loads: ${why}`);
  } finally {
    ConfigChecks.prototype.mapping = original;
  }
  return seen;
}

const HEAD = { apiVersion: "imprimatur.dev/v1alpha1" };
const DURATIONS = [
  "30s",
  "0",
  "0s",
  "1h30m",
  "1.5h",
  ".5s",
  "5.s",
  "500ms",
  "2µs",
  "3us",
  "10ns",
  "+5s",
  "-0s",
  "-5s",
  "-0",
  "5",
  5,
  "",
  "1d",
  " 5s",
  "5 s",
  "s",
];

const KINDS: KindUnderTest[] = [
  {
    kind: "PolicyTest",
    schema: policyTestSchema,
    full: () => ({
      ...HEAD,
      kind: "PolicyTest",
      metadata: { name: "t" },
      description: "what it tests",
      policies: ["policies", "pods.yaml"],
      profiles: ["baseline", "restricted"],
      config: "config.yaml",
      namespace: "shop",
      namespaces: "namespaces.yaml",
      namespaceLabels: { shop: { team: "a" }, kube: null },
      userInfo: { username: "alice", groups: ["developers"] },
      podSecurity: true,
      podSecurityConfig: "pod-security.yaml",
      exceptionNamespaces: ["exceptions"],
      resources: ["pods.yaml"],
      results: [{ resource: "Pod/web", namespace: "default", result: "denied", policy: "p", rule: "rules[0]" }],
    }),
    load: (file) => readPolicyTests(file),
    cases: [
      { at: ["apiVersion"], values: ["imprimatur.dev/v1alpha1", "v1", "imprimatur.dev/v1", undefined] },
      { at: ["kind"], values: ["PolicyTest", "Policytest", undefined] },
      { at: ["metadata"], values: [{ name: "x" }, "x", {}, undefined] },
      { at: ["metadata", "name"], values: ["x", "a test with spaces", "", 1, undefined] },
      { at: ["description"], values: ["", "text", 1, ["a"], undefined] },
      { at: ["policies"], values: [[], ["policies"], "policies", [""], [1], null, undefined], loaderOnly: [["missing"]] },
      { at: ["profiles"], values: [[], ["restricted"], ["privileged"], "baseline", [1], undefined] },
      { at: ["config"], values: ["config.yaml", "", 1, [], undefined], loaderOnly: ["missing.yaml", "policies"] },
      { at: ["namespace"], values: ["shop", "a", "a".repeat(63), "a".repeat(64), "Shop", "-a", "a.b", "", 1, undefined] },
      { at: ["namespaces"], values: ["namespaces.yaml", "", 1, undefined], loaderOnly: ["missing.yaml", "policies"] },
      {
        at: ["namespaceLabels"],
        values: [
          {},
          { shop: null },
          { shop: { env: "prod", "example.com/tier": "" } },
          { Shop: {} },
          { shop: { n: 1 } },
          { shop: "x" },
          { shop: [] },
          "x",
          [],
          null,
          undefined,
        ],
      },
      {
        at: ["userInfo"],
        values: [
          { username: "alice" },
          { username: "system:serviceaccount:ci:builder", groups: [] },
          {},
          { groups: ["a"] },
          { username: "a", uid: "1" },
          "alice",
          null,
          undefined,
        ],
      },
      { at: ["userInfo", "username"], values: ["bob", "", 1, undefined] },
      { at: ["userInfo", "groups"], values: [["a", "b"], [], [""], [1], "a", undefined] },
      { at: ["podSecurity"], values: [true, false, "true", 1, null, undefined] },
      { at: ["podSecurityConfig"], values: ["pod-security.yaml", "", 1, undefined], loaderOnly: ["missing.yaml", "policies"] },
      { at: ["exceptionNamespaces"], values: [["exceptions"], [], ["Not A Namespace"], [1], "exceptions", undefined] },
      { at: ["resources"], values: [["pods.yaml"], ["policies", "pods.yaml"], [], "pods.yaml", [""], [2], undefined], loaderOnly: [["missing.yaml"]] },
      { at: ["results"], values: [[{ resource: "Pod/a", result: "allowed" }], [], "x", undefined] },
      { at: ["results", 0], values: [{ resource: "Pod/a", result: "skipped" }, "Pod/a", {}] },
      { at: ["results", 0, "resource"], values: ["Pod/web", "Deployment.apps/api", "Pod", "Pod/web/x", "Pod /web", "/web", "Pod/", 1, undefined] },
      { at: ["results", 0, "namespace"], values: ["shop", "", 1, undefined] },
      // With policy and rule set: skipped is refused (a skipped resource is judged by no policy).
      { at: ["results", 0, "result"], values: ["allowed", "denied", "unverified", "skipped", "rejected", "Denied", undefined] },
      // With rule set: a rule needs its policy.
      { at: ["results", 0, "policy"], values: ["profile-restricted", "", 1, undefined] },
      { at: ["results", 0, "rule"], values: ["restricted/runAsUser", "", 1, undefined] },
    ],
  },
  {
    kind: "ServerConfig",
    schema: serverConfigSchema,
    full: () => ({
      ...HEAD,
      kind: "ServerConfig",
      failurePolicy: "Fail",
      cache: { allowTTL: "1h", denyTTL: "30s", maxEntries: 10000 },
      backends: [{ name: "scanner", kubeconfig: "scanner.kubeconfig", timeout: "5s" }],
      auditLog: "audit.jsonl",
      maxRequestBytes: 8388608,
      maxReviewsInFlight: 1000,
      namespacesFile: "namespaces.yaml",
      kubeconfig: "cluster.kubeconfig",
      podTemplates: [
        { apiVersion: "ci.example.com/v1", kind: "BuildRun", resource: "buildruns", templates: ["spec.template"], podSpecs: ["spec.steps[*].pod"] },
      ],
      registries: "registries.yaml",
      authFile: "auth.json",
      digests: { mode: "Mutate", cacheTTL: "30s", maxEntries: 10000 },
      verification: { maxBytesPerImage: 16777216, maxArtifactsPerImage: 32 },
      breakGlass: { authorization: "SubjectAccessReview", cacheTTL: "10s" },
    }),
    load: (file) => loadServerConfig(file),
    cases: [
      { at: ["apiVersion"], values: ["imprimatur.dev/v1alpha1", "v1", undefined] },
      { at: ["kind"], values: ["ServerConfig", "Config", undefined] },
      { at: ["failurePolicy"], values: ["Fail", "Ignore", "fail", "Deny", true, undefined] },
      { at: ["cache"], values: [{}, "1h", [], undefined] },
      { at: ["cache", "allowTTL"], values: [...DURATIONS, undefined] },
      { at: ["cache", "denyTTL"], values: ["30s", "-1s", 30, undefined] },
      { at: ["cache", "maxEntries"], values: [1, 0, -1, 1.5, "10", undefined] },
      { at: ["backends"], values: [[], "scanner", {}, null, undefined] },
      { at: ["backends", 0], values: [{ name: "b", kubeconfig: "k" }, { name: "b" }, { kubeconfig: "k" }, "b"] },
      { at: ["backends", 0, "name"], values: ["scanner", "a1", "1a", "a-b", "-a", "a-", "Scanner", "a.b", "", 1, undefined] },
      { at: ["backends", 0, "kubeconfig"], values: ["k.yaml", "/etc/k", "", 1, undefined] },
      { at: ["backends", 0, "timeout"], values: [...DURATIONS, undefined] },
      { at: ["auditLog"], values: ["a.jsonl", "", 1, null, undefined] },
      { at: ["maxRequestBytes"], values: [1024, 1023, 8388608, 1024.5, "8388608", undefined] },
      { at: ["maxReviewsInFlight"], values: [1, 0, -1, 1000, 1.5, "1000", undefined] },
      { at: ["namespacesFile"], values: ["n.yaml", "", false, undefined] },
      { at: ["kubeconfig"], values: ["k", "", 1, undefined] },
      { at: ["podTemplates"], values: [[], "x", {}, undefined] },
      {
        at: ["podTemplates", 0],
        values: ["x", { apiVersion: "a.b/v1", kind: "K", resource: "ks" }, { apiVersion: "a.b/v1", kind: "K", resource: "ks", podSpecs: ["spec"] }],
      },
      {
        at: ["podTemplates", 0, "apiVersion"],
        values: ["ci.example.com/v1", "v1", "ci.example.com/V1", "ci.example.com/v1/x", "Ci.example.com/v1", "", 1, undefined],
      },
      { at: ["podTemplates", 0, "kind"], values: ["BuildRun", "B", "buildRun", "Build-Run", "", 1, undefined] },
      { at: ["podTemplates", 0, "resource"], values: ["buildruns", "build-runs.v2", "BuildRuns", "build runs", "", undefined] },
      {
        at: ["podTemplates", 0, "templates"],
        values: [
          [],
          ["spec.template"],
          ["spec.tasks[*].template", "a_b.C1"],
          "spec.template",
          ["spec..template"],
          ["spec.template[0]"],
          ["spec[*]"],
          ["[*]"],
          [""],
          [1],
          undefined,
        ],
      },
      { at: ["podTemplates", 0, "podSpecs"], values: [[], ["spec"], ["spec.x-y"], "spec", [null], undefined] },
      { at: ["registries"], values: ["r.yaml", "", 1, undefined] },
      { at: ["authFile"], values: ["auth.json", "", [], undefined] },
      { at: ["digests"], values: [{}, "Mutate", undefined] },
      { at: ["digests", "mode"], values: ["Mutate", "Record", "mutate", "Pin", undefined] },
      { at: ["digests", "cacheTTL"], values: ["2m", "0", "2", "-1m", undefined] },
      { at: ["digests", "maxEntries"], values: [1, 0, 2.5, "1", undefined] },
      { at: ["verification"], values: [{}, 1, undefined] },
      { at: ["verification", "maxBytesPerImage"], values: [65536, 65535, 1073741824, 1073741825, 100000.5, "65536", undefined] },
      { at: ["verification", "maxArtifactsPerImage"], values: [1, 0, 1000, 1001, 1.5, "32", undefined] },
      { at: ["breakGlass"], values: [{}, "None", [], undefined] },
      { at: ["breakGlass", "authorization"], values: ["SubjectAccessReview", "None", "none", "RBAC", true, undefined] },
      { at: ["breakGlass", "cacheTTL"], values: ["10s", "0", "1m", "-1s", 10, undefined] },
    ],
  },
  {
    kind: "RegistryConfig",
    schema: registryConfigSchema,
    full: () => ({
      ...HEAD,
      kind: "RegistryConfig",
      registries: [
        {
          host: "registry.example.com:5000",
          ca: "ca.pem",
          clientCertificate: "client.pem",
          clientKey: "client-key.pem",
          insecure: false,
          mirrors: ["mirror.example.com"],
        },
        { host: "127.0.0.1:5001", insecure: true, allowLocalAddresses: true, serverCredentialsForNamespacedPolicies: true },
      ],
    }),
    load: (file) => loadRegistriesFile(file),
    cases: [
      { at: ["apiVersion"], values: ["imprimatur.dev/v1alpha1", "imprimatur.dev/v1beta1", undefined] },
      { at: ["kind"], values: ["RegistryConfig", "RegistriesConfig", undefined] },
      { at: ["registries"], values: [[], null, "x", {}, undefined] },
      { at: ["registries", 0], values: [{ host: "a.example" }, {}, "a.example"] },
      {
        at: ["registries", 0, "host"],
        values: [
          "registry.example.com",
          "Registry.Example.COM:5000",
          "localhost",
          "LocalHost:5000",
          "127.0.0.1:5002",
          "[::1]:5000",
          "[::1]",
          "[fe80::1%eth0]",
          "registry:5000",
          "docker.io",
          "index.docker.io",
          " docker.io ",
          "registry",
          "localhost.localdomain",
          "example.com:0",
          "example.com:1",
          "example.com:65535",
          "example.com:65536",
          "example.com:00080",
          "example.com:123456",
          "example.com:",
          "-bad.example",
          "bad-.example",
          "a_b.example",
          "example.com/path",
          "example..com",
          "[::1",
          "[::1]x",
          "",
          1,
          undefined,
        ],
        loaderOnly: ["127.0.0.1:5001", "mirror.example.com"],
      },
      { at: ["registries", 0, "ca"], values: ["ca.pem", "", 1, undefined], loaderOnly: ["missing.pem", "not-pem.txt"] },
      { at: ["registries", 0, "clientCertificate"], values: ["client.pem", "", undefined], loaderOnly: ["ca.pem", "not-pem.txt"] },
      { at: ["registries", 0, "clientKey"], values: ["client-key.pem", "", 2, undefined], loaderOnly: ["other-key.pem", "missing.pem"] },
      // Entry 0 has a CA and a client certificate: insecure: true is refused beside them.
      { at: ["registries", 0, "insecure"], values: [false, true, "true", "yes", 1, null, undefined] },
      { at: ["registries", 1, "insecure"], values: [true, false, "false", undefined] },
      { at: ["registries", 1, "ca"], values: ["ca.pem", undefined] },
      { at: ["registries", 1, "clientKey"], values: ["client-key.pem", undefined] },
      { at: ["registries", 1, "allowLocalAddresses"], values: [true, false, "true", 1, null, undefined] },
      { at: ["registries", 1, "serverCredentialsForNamespacedPolicies"], values: [true, false, "yes", 0, undefined] },
      {
        at: ["registries", 0, "mirrors"],
        values: [
          [],
          ["m.example.com", "n.example.com:5000", "localhost:5000"],
          "m.example.com",
          ["m.example.com", "m.example.com"],
          ["registry"],
          [1],
          undefined,
        ],
        loaderOnly: [["M.example.com", "m.example.com"], ["registry.example.com:5000"], ["Registry.example.com:5000"]],
      },
    ],
  },
  {
    kind: "CallerTokens",
    schema: callerTokensSchema,
    full: () => ({
      ...HEAD,
      kind: "CallerTokens",
      callers: [
        { name: "apiserver-prod", cluster: "prod", tokenSha256: "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8" },
        { name: "apiserver-staging", cluster: "staging", token: "s3cret-token-0123456789" },
      ],
    }),
    load: (file) => loadCallerTokens(file),
    cases: [
      { at: ["apiVersion"], values: ["imprimatur.dev/v1alpha1", "v1", undefined] },
      { at: ["kind"], values: ["CallerTokens", "CallerToken", undefined] },
      { at: ["callers"], values: [[{ name: "a", cluster: "b", token: "0123456789abcdef" }], [], null, "x", undefined] },
      {
        at: ["callers", 0],
        values: [
          { name: "a", cluster: "b", tokenSha256: "f".repeat(64) },
          { name: "a", cluster: "b" },
          { name: "a", cluster: "b", token: "0123456789abcdef", tokenSha256: "0".repeat(64) },
          "a",
        ],
      },
      { at: ["callers", 0, "name"], values: ["a", "A_b.c-D", "a".repeat(63), "a".repeat(64), "-a", "a_", "a b", "", 1, undefined] },
      { at: ["callers", 0, "cluster"], values: ["prod", "Prod.EU_1", ".prod", "prod/eu", "", undefined] },
      {
        at: ["callers", 0, "tokenSha256"],
        values: ["0".repeat(64), "ABCDEF".padEnd(64, "0"), "0".repeat(63), "0".repeat(65), "g".repeat(64), 1, undefined],
        // The token of the other caller.
        loaderOnly: [tokenDigest("s3cret-token-0123456789")],
      },
      {
        at: ["callers", 1, "token"],
        values: ["0123456789abcdef", "0123456789abcde", "0123456789 abcdef", "0123456789abcdef\t", 1234567890123456, undefined],
      },
    ],
  },
];

for (const k of KINDS) {
  const validate: ValidateFunction = ajv.compile(k.schema);

  test(`${k.kind}: the schema's objects are the mappings the loader checks, with the same fields`, async () => {
    const doc = k.full();
    assert.ok(validate(doc), `the full document satisfies the schema: ${JSON.stringify(validate.errors)}`);
    const loader = await loaderMappings(k, doc);
    const { objects } = schemaPlaces(k.schema);
    assert.deepEqual([...loader.keys()].sort(), [...objects.keys()].sort(), "the same places");
    for (const [place, known] of loader) assert.deepEqual(objects.get(place), known, `the fields at ${place || "the top"}`);
  });

  test(`${k.kind}: the schema and the loader accept and refuse the same values, field by field`, async () => {
    const { fields } = schemaPlaces(k.schema);
    const covered = new Set(k.cases.map((c) => placeOf(c.at)));
    assert.deepEqual(
      [...fields].filter((f) => !covered.has(f)),
      [],
      "every field of the schema has values to try",
    );
    const base = k.full();
    for (const { at, values, loaderOnly = [] } of k.cases) {
      const outcomes = { accepted: 0, refused: 0 };
      for (const value of values) {
        const doc = withValue(base, at, value);
        const schemaOk = validate(doc) as boolean;
        const loader = await loaderAccepts(k, doc);
        const what = `${placeOf(at)} = ${JSON.stringify(value)}`;
        assert.equal(
          schemaOk,
          loader.ok,
          `${what}: the schema ${schemaOk ? "accepts" : "refuses"} it, the loader ${loader.ok ? "accepts" : `refuses it (${loader.why})`}`,
        );
        outcomes[schemaOk ? "accepted" : "refused"]++;
      }
      assert.ok(outcomes.refused > 0, `${placeOf(at)}: some value is refused`);
      assert.ok(outcomes.accepted > 0, `${placeOf(at)}: some value is accepted`);
      for (const value of loaderOnly) {
        const doc = withValue(base, at, value);
        const what = `${placeOf(at)} = ${JSON.stringify(value)}`;
        assert.ok(validate(doc), `${what}: beyond the schema, which accepts it`);
        assert.equal((await loaderAccepts(k, doc)).ok, false, `${what}: the loader refuses it`);
      }
    }
  });
}

test("PolicyTest: the profiles the schema names are the shipped ones", async () => {
  const named = (policyTestSchema.properties.profiles.items as { enum: string[] }).enum;
  assert.deepEqual([...named].sort(), [...(await shippedProfiles()).keys()].sort());
});
