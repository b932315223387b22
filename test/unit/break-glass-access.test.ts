// Who may use break-glass, as the core applies it (src/core/break-glass.ts): the edge asks the cluster per policy
// (src/engine/break-glass-access.ts, a SubjectAccessReview) and the core honours an override only where every
// denying policy's answer allows it. The answers here are given, as the edge would give them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { BREAK_GLASS_REASON, BREAK_GLASS_TICKET, type BreakGlassAccess, type BreakGlassGrant } from "../../src/core/break-glass.ts";
import { evaluateImagePolicies } from "../../src/core/image-policy/image-policy.ts";
import { imagePolicies } from "../support/image-policies.ts";

const policies = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: trusted}
spec:
  rules: [{action: allow, images: ["registry.example.com/*"]}]
  default: deny
  breakGlass: {allowed: true}
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: no-latest}
spec:
  rules: [{action: deny, images: ["*:latest"]}]
  default: allow
  breakGlass: {allowed: true}
---
apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: {name: trusted, namespace: team-a}
spec:
  rules: [{action: deny, images: ["docker.io/*"]}]
  default: allow
  breakGlass: {allowed: true}
`);
const [trusted, noLatest, teamTrusted] = policies as [(typeof policies)[number], (typeof policies)[number], (typeof policies)[number]];

const GIVEN = { [BREAK_GLASS_REASON]: "CVE hotfix", [BREAK_GLASS_TICKET]: "INC-42" };
const request = (images: string[]) => ({ namespace: "team-a", annotations: GIVEN, images: images.map((image) => ({ image })) });
const ALLOWED: BreakGlassGrant = { allowed: true };
const refused = (reason: string): BreakGlassGrant => ({ allowed: false, reason });
const checked = (user: string, grants: Array<[{ name: string }, BreakGlassGrant]>): BreakGlassAccess => ({
  checked: true,
  user,
  byPolicy: new Map(grants.map(([p, g]) => [p.name, g])),
});
const breakGlassMessages = (d: { violations: Array<{ rule: string; policy: string; kind?: string; message: string }> }) =>
  d.violations.filter((v) => v.rule === "breakGlass").map((v) => `${v.kind ?? "ImagePolicy"} ${v.policy}: ${v.message}`);

test("the override is honoured when the user may use it on every denying policy, and then says nothing of who was asked", () => {
  const access = checked("alice", [
    [trusted, ALLOWED],
    [noLatest, ALLOWED],
    [teamTrusted, ALLOWED],
  ]);
  const d = evaluateImagePolicies(policies, request(["docker.io/app:latest"]), { breakGlassAccess: access });
  assert.equal(d.allowed, true);
  assert.equal(d.auditAnnotations["break-glass"], "used");
  assert.equal(d.breakGlass?.overridden.length, 3);
  assert.equal(d.warnings.length, 1);
  assert.match(d.warnings[0]!, /^break-glass override \(ticket INC-42\)/);
});

test("one denying policy the user may not override refuses the whole override, naming the user, the policy and the reason", () => {
  const access = checked("alice", [
    [trusted, ALLOWED],
    [noLatest, refused("no RBAC rule grants it")],
    [teamTrusted, ALLOWED],
  ]);
  const d = evaluateImagePolicies(policies, request(["docker.io/app:latest"]), { breakGlassAccess: access });
  assert.equal(d.allowed, false);
  assert.equal(d.breakGlass, undefined);
  assert.equal(d.auditAnnotations["break-glass"], "refused");
  assert.deepEqual(breakGlassMessages(d), [
    `ImagePolicy no-latest: break-glass was requested by "alice", who may not use it on this policy: no RBAC rule grants it`,
  ]);
  // The denials themselves are still there, with the refusal.
  assert.equal(d.violations.filter((v) => v.rule !== "breakGlass").length, 3);
});

test("a namespaced policy is asked about as itself (namespace/name): the cluster policy of the same name does not stand in for it", () => {
  const access = checked("alice", [
    [trusted, ALLOWED],
    [teamTrusted, refused("not in team-a")],
  ]);
  const d = evaluateImagePolicies([trusted, teamTrusted], request(["docker.io/app:1"]), { breakGlassAccess: access });
  assert.equal(d.allowed, false);
  assert.deepEqual(breakGlassMessages(d), [
    `NamespacedImagePolicy team-a/trusted: break-glass was requested by "alice", who may not use it on this policy: not in team-a`,
  ]);
});

test("only the policies that deny are asked about: a refusal on one that admits the image does not matter", () => {
  const access = checked("alice", [
    [trusted, refused("never asked")],
    [noLatest, ALLOWED],
  ]);
  const d = evaluateImagePolicies([trusted, noLatest], request(["registry.example.com/app:latest"]), { breakGlassAccess: access });
  assert.equal(d.allowed, true, JSON.stringify(d.violations));
});

test("a denying policy with no answer is refused: nothing asked is nothing granted", () => {
  const d = evaluateImagePolicies([trusted], request(["docker.io/app:1"]), { breakGlassAccess: checked("alice", []) });
  assert.equal(d.allowed, false);
  assert.deepEqual(breakGlassMessages(d), [
    `ImagePolicy trusted: break-glass was requested by "alice", who may not use it on this policy: no one was asked whether the user may`,
  ]);
});

test("a request that names no user is refused in words that do not invent one", () => {
  const d = evaluateImagePolicies([trusted], request(["docker.io/app:1"]), {
    breakGlassAccess: checked("", [[trusted, refused("an ImageReview names no user")]]),
  });
  assert.equal(d.allowed, false);
  assert.deepEqual(breakGlassMessages(d), [
    "ImagePolicy trusted: break-glass was requested, but no one can be asked whether the requester may use it on this policy: an ImageReview names no user",
  ]);
});

test("a policy that allows no override refuses once, for that reason; the user's answer is not added to it", () => {
  const locked = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: locked}
spec:
  rules: [{action: allow, images: ["registry.example.com/*"]}]
  default: deny
`);
  const d = evaluateImagePolicies(locked, request(["docker.io/app:1"]), { breakGlassAccess: checked("alice", [[locked[0]!, refused("irrelevant")]]) });
  assert.deepEqual(breakGlassMessages(d), [`ImagePolicy locked: break-glass was requested but this policy does not allow overrides in namespace "team-a"`]);
});

test("many denials by one policy ask about it once", () => {
  const d = evaluateImagePolicies([trusted], request(["docker.io/a:1", "docker.io/b:1", "quay.io/c:1"]), {
    breakGlassAccess: checked("alice", [[trusted, refused("no")]]),
  });
  assert.equal(breakGlassMessages(d).length, 1);
});

test("not checked (authorization None, or check offline): honoured on the annotations, with a warning that says why no one was asked", () => {
  const d = evaluateImagePolicies([trusted], request(["docker.io/app:1"]), {
    breakGlassAccess: { checked: false, why: "the server's breakGlass.authorization is None" },
  });
  assert.equal(d.allowed, true);
  assert.deepEqual(d.warnings.slice(1), ["break-glass: who may use it was not checked (the server's breakGlass.authorization is None)"]);
});

test("a refusal for who may use it is refused however complete the annotations are, and an incomplete one lists both problems", () => {
  const d = evaluateImagePolicies(
    [trusted],
    { ...request(["docker.io/app:1"]), annotations: { [BREAK_GLASS_REASON]: "x" } },
    {
      breakGlassAccess: checked("bob", [[trusted, refused("no")]]),
    },
  );
  const messages = breakGlassMessages(d);
  assert.equal(messages.length, 2);
  assert.match(messages[0]!, /"bob", who may not use it/);
  assert.match(messages[1]!, /missing: break-glass\.image-policy\.k8s\.io\/ticket/);
});
