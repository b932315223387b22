// Policies from custom resources, the pure parts: the document the loader sees, the Ready condition and its
// patch, and how ResourcePolicySource judges each object alone (an invalid one keeps its last good version,
// a conflict leaves the object out, folder errors fail the load). The objects come from an in-memory store
// standing in for the API watch, which test/e2e/policy-crds.test.ts runs against a real kube-apiserver.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadPolicies } from "../../src/policy/load-policies.ts";
import { PolicyLoadError } from "../../src/policy/policy-error.ts";
import { contentKey, policyDocumentOf, type PolicyResourceObject } from "../../src/policy/policy-resource-documents.ts";
import { readyCondition, statusPatch, type ResourceOutcome } from "../../src/policy/policy-resource-status.ts";
import { PolicyFolder } from "../../src/policy/policy-source.ts";
import { ResourcePolicySource, type PolicyResourceStore } from "../../src/policy/resource-policy-source.ts";
import { embeddedTrustedRootJson } from "../../src/verification/trust-roots.ts";

const NOW = new Date("2026-11-25T21:00:00.123Z");

function resource(kind: string, name: string, spec: unknown, opts: { generation?: number; uid?: string; status?: unknown } = {}): PolicyResourceObject {
  const generation = opts.generation ?? 1;
  const uid = opts.uid ?? `uid-${name}`;
  return {
    kind,
    name,
    uid,
    generation,
    object: {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind,
      metadata: { name, uid, generation, resourceVersion: "7", managedFields: [{ manager: "kubectl" }] },
      spec,
      ...(opts.status ? { status: opts.status } : {}),
    },
  };
}

const denyRule = (image: string) => ({ rules: [{ action: "deny", images: [image] }], default: "allow" });

class MemoryStore implements PolicyResourceStore {
  objects: PolicyResourceObject[] = [];
  synced = async () => {};
  snapshot = () => [...this.objects];
  subscribe = () => ({ close: () => {} });
}

class Reports {
  seen: Array<{ name: string; outcome: ResourceOutcome }> = [];
  report = (r: PolicyResourceObject, outcome: ResourceOutcome) => void this.seen.push({ name: r.name, outcome });
  of(name: string) {
    return this.seen.filter((s) => s.name === name).at(-1)?.outcome;
  }
}

/** One load as the app does it: read through the source, then tell it the outcome. */
async function load(source: ResourcePolicySource) {
  try {
    const loaded = await loadPolicies(source);
    source.loaded({ errors: [] });
    return loaded.policies;
  } catch (e) {
    if (e instanceof PolicyLoadError) source.loaded({ errors: e.errors });
    throw e;
  }
}

test("the loader sees the document a file would hold: no status, bookkeeping or last-applied annotation", () => {
  const r = resource("ImagePolicy", "p", denyRule("nginx"), { status: { conditions: [] } });
  (r.object.metadata as Record<string, unknown>).annotations = { "kubectl.kubernetes.io/last-applied-configuration": "{}", team: "a" };
  (r.object as Record<string, unknown>).extra = 1;
  assert.deepEqual(policyDocumentOf(r.object), {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "p", annotations: { team: "a" } },
    spec: denyRule("nginx"),
    extra: 1,
  });
  const withStatus = resource("ImagePolicy", "p", denyRule("nginx"), { status: { observedGeneration: 1 } });
  assert.equal(contentKey(withStatus), contentKey(resource("ImagePolicy", "p", denyRule("nginx"))), "a status write is no change");
  assert.notEqual(contentKey(resource("ImagePolicy", "p", denyRule("nginx"), { generation: 2 })), contentKey(withStatus));
});

test("Ready conditions: in force, or rejected with the fields and what stays in force", () => {
  assert.deepEqual(readyCondition({ state: "in-force", generation: 3 }, NOW), {
    type: "Ready",
    status: "True",
    observedGeneration: 3,
    lastTransitionTime: "2026-11-25T21:00:00Z",
    reason: "Loaded",
    message: "compiled and in force",
  });
  const rejected = readyCondition(
    {
      state: "rejected",
      reason: "InvalidPolicy",
      generation: 4,
      inForceGeneration: 3,
      errors: [
        { origin: "ImagePolicy/p", path: "spec.rules[0].action", message: 'must be one of "allow", "deny"' },
        { origin: "ImagePolicy/p", message: "another" },
      ],
    },
    NOW,
  );
  assert.equal(rejected.status, "False");
  assert.equal(rejected.message, 'spec.rules[0].action: must be one of "allow", "deny"; another (generation 3 stays in force)');
  const alone = readyCondition({ state: "rejected", reason: "PolicyConflict", generation: 1, errors: [{ origin: "x", message: "m" }] }, NOW);
  assert.equal(alone.message, "m (this policy is not in force)");
  const long = readyCondition({ state: "rejected", reason: "InvalidPolicy", generation: 1, errors: [{ origin: "x", message: "y".repeat(10_000) }] }, NOW);
  assert.ok(long.message.length < 4200);
});

test("the status patch: written when the verdict changes, not when the status already says it; the transition time moves with the status only", () => {
  const fresh = resource("ImagePolicy", "p", {});
  const first = statusPatch(fresh.object, { state: "in-force", generation: 1 }, NOW);
  assert.deepEqual(first, { status: { observedGeneration: 1, conditions: [readyCondition({ state: "in-force", generation: 1 }, NOW)] } });
  const written = resource("ImagePolicy", "p", {}, { status: first!.status });
  assert.equal(statusPatch(written.object, { state: "in-force", generation: 1 }, new Date("2026-11-26T00:00:00Z")), undefined, "no flapping");
  const next = statusPatch(written.object, { state: "in-force", generation: 2 }, new Date("2026-11-26T00:00:00Z"));
  const condition = (next!.status.conditions as Array<Record<string, unknown>>)[0]!;
  assert.equal(condition.observedGeneration, 2);
  assert.equal(condition.lastTransitionTime, "2026-11-25T21:00:00Z", "still True: the transition time stays");
  const broken = statusPatch(
    written.object,
    { state: "rejected", reason: "InvalidPolicy", generation: 2, errors: [{ origin: "x", message: "m" }] },
    new Date("2026-11-26T00:00:00Z"),
  );
  assert.equal((broken!.status.conditions as Array<Record<string, unknown>>)[0]!.lastTransitionTime, "2026-11-26T00:00:00Z");
  // Conditions of other types survive the merge patch, which replaces the list whole.
  const other = { type: "Audited", status: "True" };
  const mixed = resource("ImagePolicy", "p", {}, { status: { conditions: [other] } });
  assert.deepEqual((statusPatch(mixed.object, { state: "in-force", generation: 1 }, NOW)!.status.conditions as unknown[])[0], other);
});

test("valid objects load and are reported in force with their generation", async () => {
  const store = new MemoryStore();
  const reports = new Reports();
  store.objects = [resource("ImagePolicy", "a", denyRule("nginx"), { generation: 2 }), resource("ImagePolicy", "b", denyRule("redis"))];
  const source = new ResourcePolicySource({ store, status: reports });
  const set = await load(source);
  assert.deepEqual(
    set.ImagePolicy.map((p) => [p.name, p.source?.origin]),
    [
      ["a", "ImagePolicy/a"],
      ["b", "ImagePolicy/b"],
    ],
  );
  assert.deepEqual(reports.of("a"), { state: "in-force", generation: 2 });
  assert.deepEqual(reports.of("b"), { state: "in-force", generation: 1 });

  // Each object is compiled once per content: an unchanged one is reused as it is, a changed one compiled anew.
  store.objects[1] = resource("ImagePolicy", "b", denyRule("valkey"), { generation: 2 });
  const again = await load(source);
  assert.equal(again.ImagePolicy[0], set.ImagePolicy[0]);
  assert.notEqual(again.ImagePolicy[1], set.ImagePolicy[1]);
  assert.match(JSON.stringify(again.ImagePolicy[1]!.rules[0]!.images), /valkey/);
});

test("an invalid generation keeps the last good one in force; an invalid new object is left out; the others load", async () => {
  const store = new MemoryStore();
  const reports = new Reports();
  const source = new ResourcePolicySource({ store, status: reports });
  store.objects = [resource("ImagePolicy", "a", denyRule("nginx"))];
  await load(source);

  store.objects = [
    resource("ImagePolicy", "a", { rules: [{ action: "deny", images: ["[nginx"] }] }, { generation: 2 }),
    resource("ImagePolicy", "new-bad", { rules: [{ action: "perhaps" }] }),
    resource("ImagePolicy", "c", denyRule("redis")),
  ];
  const set = await load(source);
  assert.deepEqual(
    set.ImagePolicy.map((p) => p.name),
    ["a", "c"],
  );
  assert.match(JSON.stringify(set.ImagePolicy[0]!.rules[0]!.images), /nginx/, "generation 1 of a, as it was");
  const a = reports.of("a");
  assert.equal(a?.state, "rejected");
  assert.equal(a?.state === "rejected" && a.reason, "InvalidPolicy");
  assert.equal(a?.state === "rejected" && a.inForceGeneration, 1);
  assert.equal(a?.state === "rejected" && a.generation, 2);
  assert.deepEqual(a?.state === "rejected" && a.errors.map((e) => [e.origin, e.path, e.line, e.document]), [
    ["ImagePolicy/a", "spec.rules[0].images[0]", undefined, undefined],
  ]);
  const bad = reports.of("new-bad");
  assert.equal(bad?.state === "rejected" && bad.inForceGeneration, undefined);
  assert.match(
    bad?.state === "rejected" ? bad.errors.map((e) => `${e.path}: ${e.message}`).join("; ") : "",
    /spec\.rules\[0\]: must be one of "allow", "deny"|spec\.rules\[0\]\.action/,
  );
  assert.deepEqual(reports.of("c"), { state: "in-force", generation: 1 });

  // Deleted and recreated under the same name: a new object, with no last good version of its own.
  store.objects = [resource("ImagePolicy", "a", { rules: [{ action: "deny", images: ["[nginx"] }] }, { uid: "uid-a-2" })];
  const after = await load(source);
  assert.deepEqual(after.ImagePolicy, []);
});

test("a name the folder defines is a conflict: the object is left out and the folder's policy stays", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-crd-folder-"));
  try {
    await writeFile(
      join(dir, "shared.yaml"),
      `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: shared}\nspec:\n  rules: [{action: deny, images: [nginx]}]\n  default: allow\n`,
    );
    const store = new MemoryStore();
    const reports = new Reports();
    store.objects = [resource("ImagePolicy", "shared", denyRule("redis")), resource("ImagePolicy", "mine", denyRule("redis"))];
    const source = new ResourcePolicySource({ store, status: reports, folder: new PolicyFolder(dir) });
    const set = await load(source);
    assert.deepEqual(set.ImagePolicy.map((p) => [p.name, p.source?.origin.endsWith("shared.yaml") || p.source?.origin]).sort(), [
      ["mine", "ImagePolicy/mine"],
      ["shared", true],
    ]);
    const shared = reports.of("shared");
    assert.equal(shared?.state === "rejected" && shared.reason, "PolicyConflict");
    assert.match(shared?.state === "rejected" ? shared.errors[0]!.message : "", /^ImagePolicy "shared" is already defined in .*shared\.yaml$/);
    assert.deepEqual(reports.of("mine"), { state: "in-force", generation: 1 });

    // A broken folder fails the load as without custom resources; valid objects' status is left alone.
    await writeFile(
      join(dir, "broken.yaml"),
      "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: broken}\nspec: {rules: [{action: maybe}]}\n",
    );
    reports.seen = [];
    await assert.rejects(load(source), (e: unknown) => e instanceof PolicyLoadError && e.errors.every((x) => x.origin.endsWith("broken.yaml")));
    assert.equal(reports.of("mine"), undefined);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("TrustRoots from custom resources answer attestors' trustRoot; a missing one is a conflict of the ImagePolicy", async () => {
  const store = new MemoryStore();
  const reports = new Reports();
  const keyless = {
    rules: [{ action: "allow", images: ["registry.example.com/*"], attestors: [{ entries: [{ keyless: { subject: "*", issuer: "*", trustRoot: "corp" } }] }] }],
  };
  store.objects = [resource("ImagePolicy", "signed", keyless)];
  const source = new ResourcePolicySource({ store, status: reports });
  const without = await load(source);
  assert.deepEqual(without.ImagePolicy, []);
  const signed = reports.of("signed");
  assert.equal(signed?.state === "rejected" && signed.reason, "PolicyConflict");
  assert.match(signed?.state === "rejected" ? `${signed.errors[0]!.path}: ${signed.errors[0]!.message}` : "", /keyless\.trustRoot: .*corp/);

  store.objects.push(resource("TrustRoot", "corp", { trustedRoot: embeddedTrustedRootJson() }));
  const withRoot = await load(source);
  assert.deepEqual(
    withRoot.ImagePolicy.map((p) => p.name),
    ["signed"],
  );
  assert.deepEqual(
    withRoot.TrustRoot.map((r) => r.source?.origin),
    ["TrustRoot/corp"],
  );
  assert.deepEqual(reports.of("signed"), { state: "in-force", generation: 1 });
  assert.deepEqual(reports.of("corp"), { state: "in-force", generation: 1 });
});

test("when the folder fails the load, a rejected object's status names the generation the kept set holds", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-crd-folder-"));
  try {
    const store = new MemoryStore();
    const reports = new Reports();
    const source = new ResourcePolicySource({ store, status: reports, folder: new PolicyFolder(dir) });
    store.objects = [resource("ImagePolicy", "a", denyRule("nginx"))];
    await load(source);
    await writeFile(
      join(dir, "broken.yaml"),
      "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: broken}\nspec: {rules: [{action: maybe}]}\n",
    );
    store.objects = [resource("ImagePolicy", "a", { rules: [{ action: "deny", images: ["[nginx"] }] }, { generation: 2 })];
    await assert.rejects(load(source), PolicyLoadError);
    const a = reports.of("a");
    assert.equal(a?.state === "rejected" && a.inForceGeneration, 1, "the kept set holds generation 1");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
