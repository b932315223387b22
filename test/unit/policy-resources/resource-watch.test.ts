// Policies from custom resources, the pure parts: the document the loader sees, the Ready condition and its
// patch, and how ResourcePolicySource judges each object alone (an invalid one keeps its last good version,
// a conflict leaves the object out, folder errors fail the load). The objects come from an in-memory store
// standing in for the API watch, which test/e2e/policy-crds.test.ts runs against a real kube-apiserver.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadPolicies } from "../../../src/policy/load-policies.ts";
import { PolicyLoadError } from "../../../src/policy/policy-error.ts";
import { contentKey, policyDocumentOf, type PolicyResourceObject } from "../../../src/policy-resources/resource-documents.ts";
import {
  documentTooLarge,
  inForceRecord,
  MAX_RECORDED_DOCUMENT_BYTES,
  readyCondition,
  statusPatch,
  type ResourceOutcome,
} from "../../../src/policy-resources/status-conditions.ts";
import { isObject } from "../../../src/core/primitives/json-shapes.ts";
import { PolicyFolder } from "../../../src/policy/policy-source.ts";
import { ResourcePolicySource, type PolicyResourceStore } from "../../../src/policy-resources/resource-policy-source.ts";
import { embeddedTrustedRootJson } from "../../../src/verification/trust-roots.ts";

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

/** Reported in force at `generation`, with status.inForce recording that generation and its document. */
function assertInForce(outcome: ResourceOutcome | undefined, generation: number) {
  assert.equal(outcome?.state, "in-force");
  assert.equal(outcome.generation, generation);
  assert.equal(outcome.record?.generation, generation);
  assert.equal(typeof outcome.record?.document, "string");
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
  assertInForce(reports.of("a"), 2);
  assertInForce(reports.of("b"), 1);

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
  assertInForce(reports.of("c"), 1);

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
    assertInForce(reports.of("mine"), 1);

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

test("TrustRoots from custom resources answer attestors' trustRoot; without one the ImagePolicy stays in force and its rule denies", async () => {
  const store = new MemoryStore();
  const reports = new Reports();
  const gate = {
    rules: [
      { action: "deny", images: ["evil.example/*"] },
      { action: "allow", images: ["registry.example.com/*"], attestors: [{ entries: [{ keyless: { subject: "*", issuer: "*", trustRoot: "corp" } }] }] },
    ],
    default: "deny",
  };
  const corp = resource("TrustRoot", "corp", { trustedRoot: embeddedTrustedRootJson() });
  const unverifiable = (set: Awaited<ReturnType<typeof load>>) => set.ImagePolicy.map((p) => p.rules.map((r) => r.unverifiable !== undefined));
  store.objects = [resource("ImagePolicy", "signed", gate)];
  const source = new ResourcePolicySource({ store, status: reports });
  const without = await load(source);
  assert.deepEqual(
    without.ImagePolicy.map((p) => p.name),
    ["signed"],
    "in force: its deny rule and default stay",
  );
  assert.deepEqual(unverifiable(without), [[false, true]]);
  const signed = reports.of("signed");
  assert.ok(signed?.state === "in-force" && signed.unresolved, JSON.stringify(signed));
  assert.equal(signed.record?.generation, 1, "status.inForce records it: it is in force");
  assert.equal(signed.unresolved.reason, "TrustRootNotFound");
  assert.deepEqual(
    signed.unresolved.errors.map((e) => [e.origin, e.path, e.line, e.document]),
    [["ImagePolicy/signed", "spec.rules[1].attestors[0].entries[0].keyless.trustRoot", undefined, undefined]],
  );
  assert.match(signed.unresolved.errors[0]!.message, /trust root "corp" is not loaded .*rules\[1\] denies every image it matches until it is$/);

  store.objects.push(corp);
  const withRoot = await load(source);
  assert.deepEqual(unverifiable(withRoot), [[false, false]]);
  assert.deepEqual(
    withRoot.TrustRoot.map((r) => r.source?.origin),
    ["TrustRoot/corp"],
  );
  assertInForce(reports.of("signed"), 1);
  assert.equal((reports.of("signed") as { unresolved?: unknown }).unresolved, undefined);
  assertInForce(reports.of("corp"), 1);

  // Deleted: the policy stays in force (not a conflict, which would leave nothing of it), the rule denies again.
  store.objects = store.objects.filter((o) => o.kind !== "TrustRoot");
  const deleted = await load(source);
  assert.deepEqual(unverifiable(deleted), [[false, true]]);
  assert.equal(reports.of("signed")?.state, "in-force");
  // Broken with no good generation of its own: the same as missing.
  store.objects.push(resource("TrustRoot", "corp", { trustedRoot: { mediaType: "nope" } }, { uid: "uid-corp-2" }));
  const broken = await load(source);
  assert.deepEqual(unverifiable(broken), [[false, true]]);
  assert.equal(reports.of("corp")?.state, "rejected");
  // Fixed: verifies again, without a restart.
  store.objects = [store.objects[0]!, resource("TrustRoot", "corp", { trustedRoot: embeddedTrustedRootJson() }, { uid: "uid-corp-2", generation: 2 })];
  assert.deepEqual(unverifiable(await load(source)), [[false, false]]);
});

test("Ready=False TrustRootNotFound says the policy is in force and which rules deny", () => {
  const outcome: ResourceOutcome = {
    state: "in-force",
    generation: 2,
    record: inForceRecord(2, "{}"),
    unresolved: {
      reason: "TrustRootNotFound",
      errors: [{ origin: "ImagePolicy/p", path: "spec.rules[1].attestors[0].entries[0].keyless.trustRoot", message: 'trust root "corp" is not loaded' }],
    },
  };
  assert.deepEqual(readyCondition(outcome, NOW), {
    type: "Ready",
    status: "False",
    observedGeneration: 2,
    lastTransitionTime: "2026-11-25T21:00:00Z",
    reason: "TrustRootNotFound",
    message:
      'spec.rules[1].attestors[0].entries[0].keyless.trustRoot: trust root "corp" is not loaded (this policy is in force; the rules named deny every image they match)',
  });
  // The record is written as for any policy in force.
  assert.deepEqual(statusPatch({}, outcome, NOW)?.status.inForce, { generation: 2, document: "{}" });
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

/** The object as the API would hold it once `patch` (a merge patch of the status) is applied. */
function withStatus(r: PolicyResourceObject, patch: { status: Record<string, unknown> } | undefined): PolicyResourceObject {
  if (!patch) return r;
  const before = (r.object.status ?? {}) as Record<string, unknown>;
  const status: Record<string, unknown> = { ...before, ...patch.status };
  if (isObject(patch.status.inForce)) status.inForce = Object.fromEntries(Object.entries(patch.status.inForce).filter(([, v]) => v !== null));
  if (patch.status.inForce === null) delete status.inForce;
  return { ...r, object: { ...r.object, status } };
}

/** Replica A: generation 1 of `a` (denies nginx) loaded and its status written, then generation 2 broken. */
async function brokenAfterGoodGeneration() {
  const store = new MemoryStore();
  const reports = new Reports();
  const replicaA = new ResourcePolicySource({ store, status: reports });
  store.objects = [resource("ImagePolicy", "a", denyRule("nginx"))];
  await load(replicaA);
  const good = withStatus(store.objects[0]!, statusPatch(store.objects[0]!.object, reports.of("a")!, NOW));
  const broken = resource("ImagePolicy", "a", { rules: [{ action: "deny", images: ["[nginx"] }] }, { generation: 2, status: good.object.status });
  store.objects = [broken];
  await load(replicaA);
  return { good, broken: withStatus(broken, statusPatch(broken.object, reports.of("a")!, NOW)), replicaA, store, reports };
}

/** A replica started now: it knows only the objects as the API holds them. */
async function newReplica(objects: PolicyResourceObject[]) {
  const store = new MemoryStore();
  const reports = new Reports();
  store.objects = objects;
  const source = new ResourcePolicySource({ store, status: reports });
  return { source, store, reports, policies: await load(source) };
}

test("Ready=True records the generation in force and its document in status.inForce", async () => {
  const { good } = await brokenAfterGoodGeneration();
  assert.deepEqual((good.object.status as Record<string, unknown>).inForce, { generation: 1, document: JSON.stringify(policyDocumentOf(good.object)) });
});

test("a replica started while an object is broken enforces the generation its status records, and reports it as the others do", async () => {
  const { broken } = await brokenAfterGoodGeneration();
  const b = await newReplica([broken]);
  assert.deepEqual(
    b.policies.ImagePolicy.map((p) => p.name),
    ["a"],
    "generation 1 is in force on the new replica",
  );
  assert.match(JSON.stringify(b.policies.ImagePolicy[0]!.rules[0]!.images), /nginx/);
  const outcome = b.reports.of("a");
  assert.equal(outcome?.state === "rejected" && outcome.inForceGeneration, 1);
  assert.match(readyCondition(outcome!, NOW).message, /^spec\.rules\[0\]\.images\[0\]: .*\(generation 1 stays in force\)$/);
  // The status already says exactly that: the new replica writes nothing (no flapping between replicas).
  assert.equal(statusPatch(broken.object, outcome!, new Date("2026-11-26T00:00:00Z")), undefined);

  // Fixed: the new generation is in force and recorded; broken again: that one stays.
  const fixed = resource("ImagePolicy", "a", denyRule("redis"), { generation: 3, status: broken.object.status });
  b.store.objects = [fixed];
  await load(b.source);
  assertInForce(b.reports.of("a"), 3);
  const recorded = withStatus(fixed, statusPatch(fixed.object, b.reports.of("a")!, NOW));
  const c = await newReplica([
    resource("ImagePolicy", "a", { rules: [{ action: "deny", images: ["[x"] }] }, { generation: 4, status: recorded.object.status }),
  ]);
  assert.match(JSON.stringify(c.policies.ImagePolicy[0]!.rules[0]!.images), /redis/);
});

test("a recorded version is compiled as the object is: when it does not compile, nothing is in force and the status says why", async () => {
  const { broken } = await brokenAfterGoodGeneration();
  const status = broken.object.status as Record<string, unknown>;
  const tampered = (inForce: unknown) => resource("ImagePolicy", "a", broken.object.spec, { generation: 2, status: { ...status, inForce } });
  const cases: Array<[string, unknown, RegExp]> = [
    [
      "an invalid policy",
      { generation: 1, document: JSON.stringify({ ...policyDocumentOf(broken.object), spec: { rules: [{ action: "perhaps" }] } }) },
      /generation 1 recorded in status\.inForce does not compile either: spec\.rules\[0\].*; this policy is not in force\)$/,
    ],
    [
      "a later generation",
      { generation: 3, document: status.inForce && (status.inForce as { document: string }).document },
      /status\.inForce\.generation: 3 is not a generation of this object \(now 2\)/,
    ],
    [
      "another object's policy",
      { generation: 1, document: JSON.stringify({ ...policyDocumentOf(broken.object), metadata: { name: "other" } }) },
      /status\.inForce\.document: is not a policy document of ImagePolicy\/a/,
    ],
    ["not JSON", { generation: 1, document: "rules: [" }, /status\.inForce\.document: is not JSON/],
    ["a record without its document", { generation: 1 }, /status\.inForce\.document: generation 1 was not recorded/],
    ["not a record", "generation 1", /status\.inForce: is not a generation and the policy document it had/],
  ];
  for (const [what, inForce, message] of cases) {
    const r = await newReplica([tampered(inForce)]);
    assert.deepEqual(r.policies.ImagePolicy, [], `${what}: nothing in force`);
    const outcome = r.reports.of("a")!;
    assert.equal(outcome.state === "rejected" && outcome.inForceGeneration, undefined, what);
    assert.match(readyCondition(outcome, NOW).message, message, what);
    assert.match(readyCondition(outcome, NOW).message, /this policy is not in force\)$/, what);
    assert.equal(outcome.state === "rejected" && outcome.record, null, `${what}: the record is removed, as nothing is in force`);
  }
});

test("the version in memory wins over an older or tampered record, and the status is set back to it", async () => {
  const { broken, replicaA, store, reports } = await brokenAfterGoodGeneration();
  const status = broken.object.status as Record<string, unknown>;
  const weaker = JSON.stringify({ ...policyDocumentOf(broken.object), spec: denyRule("nothing-at-all") });
  store.objects = [resource("ImagePolicy", "a", broken.object.spec, { generation: 2, status: { ...status, inForce: { generation: 1, document: weaker } } })];
  const set = await load(replicaA);
  assert.match(JSON.stringify(set.ImagePolicy[0]!.rules[0]!.images), /nginx/, "the generation replica A compiled itself");
  const patch = statusPatch(store.objects[0]!.object, reports.of("a")!, NOW);
  assert.deepEqual(patch?.status.inForce, status.inForce);
});

test("a deleted and re-created object starts afresh: neither memory nor the old object's record carries over", async () => {
  const { replicaA, store, reports } = await brokenAfterGoodGeneration();
  // A new object has a new uid and an empty status (the API ignores a status given on create).
  store.objects = [resource("ImagePolicy", "a", { rules: [{ action: "deny", images: ["[nginx"] }] }, { uid: "uid-a-2" })];
  assert.deepEqual((await load(replicaA)).ImagePolicy, []);
  const outcome = reports.of("a")!;
  assert.match(readyCondition(outcome, NOW).message, /\(this policy is not in force\)$/);
});

test("status.inForce in the patch: written whole, removed when nothing is in force, and left alone after a failed load", () => {
  const fresh = resource("ImagePolicy", "p", {});
  const first = statusPatch(fresh.object, { state: "in-force", generation: 1, record: inForceRecord(1, "{}") }, NOW)!;
  assert.deepEqual(first.status.inForce, { generation: 1, document: "{}" });
  const written = withStatus(fresh, first);
  assert.equal(statusPatch(written.object, { state: "in-force", generation: 1, record: inForceRecord(1, "{}") }, NOW), undefined);
  // A record without its document (as earlier versions wrote above the cap): the one recorded is cleared, not merged into.
  const bare = statusPatch(written.object, { state: "in-force", generation: 1, record: { generation: 1 } }, NOW)!;
  assert.deepEqual(bare.status.inForce, { generation: 1, document: null });
  assert.equal(statusPatch(withStatus(written, bare).object, { state: "in-force", generation: 1, record: { generation: 1 } }, NOW), undefined);
  const rejected = { state: "rejected" as const, reason: "InvalidPolicy" as const, generation: 2, errors: [{ origin: "x", message: "m" }] };
  assert.equal(statusPatch(written.object, { ...rejected, record: null }, NOW)!.status.inForce, null);
  assert.equal("inForce" in statusPatch(written.object, rejected, NOW)!.status, false, "a failed load leaves the record alone");
});

test("a policy document is too large for status.inForce past the cap in bytes as JSON, not characters", () => {
  assert.equal(documentTooLarge("x".repeat(MAX_RECORDED_DOCUMENT_BYTES), "ImagePolicy/p"), undefined);
  const past = documentTooLarge("x".repeat(MAX_RECORDED_DOCUMENT_BYTES + 1), "ImagePolicy/p");
  assert.deepEqual(past, {
    origin: "ImagePolicy/p",
    message:
      "the policy document is 262145 bytes as JSON, more than the 262144 bytes status.inForce can hold, which every replica reads to enforce the same generation: split it into several policies",
  });
  assert.match(documentTooLarge("é".repeat(MAX_RECORDED_DOCUMENT_BYTES / 2 + 1), "ImagePolicy/p")?.message ?? "", /is 262146 bytes/);
});

/** Deny rules for images nobody runs, enough to take a policy document past the record's cap. */
const padding = Array.from({ length: 2400 }, (_, i) => ({ action: "deny", images: [`registry.example.com/padding/${i}-${"x".repeat(100)}`] }));
const largeSpec = (rules: unknown[]) => ({ rules: [...rules, ...padding], default: "allow" });

test("a policy larger than status.inForce holds never comes into force: its last generation that fits stays, on old and new replicas alike", async () => {
  const { replicaA, store, reports, broken: gen2 } = await brokenAfterGoodGeneration();
  // Generation 3 is valid and too large: generation 1 stays in force on replica A, and stays recorded.
  const large = resource("ImagePolicy", "a", largeSpec([{ action: "deny", images: ["redis"] }]), { generation: 3, status: gen2.object.status });
  store.objects = [large];
  const onA = await load(replicaA);
  assert.match(JSON.stringify(onA.ImagePolicy[0]!.rules[0]!.images), /nginx/, "generation 1 is in force");
  const outcome = reports.of("a")!;
  assert.equal(outcome.state === "rejected" && outcome.reason, "TooLarge");
  assert.match(
    readyCondition(outcome, NOW).message,
    /^the policy document is \d+ bytes as JSON, .*split it into several policies \(generation 1 stays in force\)$/,
  );
  const patch = statusPatch(large.object, outcome, NOW);
  assert.equal(patch?.status.inForce, undefined, "the record of generation 1 is left as it is");
  const judged = withStatus(large, patch);

  // Generation 4 is too large and does not compile: replica A keeps generation 1, and so does a replica started now.
  const broken = resource("ImagePolicy", "a", largeSpec([{ action: "deny", images: ["[redis"] }]), { generation: 4, status: judged.object.status });
  store.objects = [broken];
  const stillOnA = await load(replicaA);
  const b = await newReplica([broken]);
  const enforced = (set: typeof stillOnA) => JSON.stringify(set.ImagePolicy.map((p) => [p.name, p.rules.map((r) => r.images)]));
  assert.equal(enforced(b.policies), enforced(stillOnA), "both replicas enforce the same set");
  assert.match(JSON.stringify(b.policies.ImagePolicy[0]!.rules), /nginx/);
  assert.deepEqual(readyCondition(b.reports.of("a")!, NOW), readyCondition(reports.of("a")!, NOW), "and report the same verdict");
  assert.equal(readyCondition(b.reports.of("a")!, NOW).reason, "TooLarge");
});

test("a policy too large from its first generation is in force nowhere, and nothing is recorded", async () => {
  const huge = resource("ImagePolicy", "huge", largeSpec([{ action: "deny", images: ["nginx"] }]));
  const a = await newReplica([huge, resource("ImagePolicy", "small", denyRule("redis"))]);
  assert.deepEqual(
    a.policies.ImagePolicy.map((p) => p.name),
    ["small"],
    "the other policies load",
  );
  const outcome = a.reports.of("huge")!;
  assert.equal(outcome.state === "rejected" && outcome.record, null);
  assert.equal(readyCondition(outcome, NOW).reason, "TooLarge");
  assert.match(readyCondition(outcome, NOW).message, /\(this policy is not in force\)$/);
});
