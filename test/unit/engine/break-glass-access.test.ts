// What the edge asks before a subject that requests break-glass is judged (src/engine/break-glass-access.ts), and
// the SubjectAccessReview it sends (src/kube/break-glass-reviews.ts). The authorizer here records the questions
// and answers from a table (a stand-in: which answers the real apiserver gives, for which RBAC, is
// test/e2e/validating-webhook.test.ts › "break-glass is honoured only for a user RBAC lets use …").
import assert from "node:assert/strict";
import { test } from "node:test";
import { subjectOfImageReview, subjectOfObject, type AdmissionSubject, type RequestUser } from "../../../src/core/admission-subject.ts";
import { BREAK_GLASS_REASON, BREAK_GLASS_TICKET, type BreakGlassGrant } from "../../../src/core/break-glass.ts";
import type { ClusterTools } from "../../../src/engine/cluster-tools.ts";
import { breakGlassAccessFor, UNCHECKED_BY_CONFIGURATION, UNCHECKED_OFFLINE } from "../../../src/engine/break-glass-access.ts";
import { accessReview, type OverriddenPolicy } from "../../../src/kube/break-glass-reviews.ts";
import { imagePolicies } from "../../support/image-policies.ts";

const policies = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: trusted}
spec: {rules: [{action: allow, images: ["registry.example.com/*"]}], default: deny, breakGlass: {allowed: true}}
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: locked}
spec: {rules: [{action: deny, images: ["*:latest"]}], default: allow}
---
apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: {name: team-rules, namespace: shop}
spec: {rules: [{action: deny, images: ["docker.io/*"]}], default: allow, breakGlass: {allowed: true}}
`);

const ALICE: RequestUser = { username: "alice", uid: "u-1", groups: ["oncall", "system:authenticated"], extra: { "scopes.example.com": ["a", "b"] } };
const ANNOTATIONS = { [BREAK_GLASS_REASON]: "outage", [BREAK_GLASS_TICKET]: "INC-1" };

function pod(annotations: Record<string, string>, user?: RequestUser): AdmissionSubject {
  const plan = subjectOfObject(
    { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "shop", annotations }, spec: { containers: [{ name: "a", image: "docker.io/app:1" }] } },
    {},
    "default",
    user,
  );
  assert.ok(plan.review);
  return plan.subject;
}

/** Online tools whose authorizer answers from `answers` by "namespace/name" (or "name") and records the questions. */
function toolsAnswering(answers: Record<string, BreakGlassGrant>, extra: Partial<ClusterTools> = {}) {
  const asked: Array<{ user: RequestUser; policy: OverriddenPolicy; deadline: number }> = [];
  const breakGlass = {
    may: async (user: RequestUser, policy: OverriddenPolicy, deadline: number): Promise<BreakGlassGrant> => {
      asked.push({ user, policy, deadline });
      return answers[policy.namespace === undefined ? policy.name : `${policy.namespace}/${policy.name}`] ?? { allowed: false, reason: "not in the table" };
    },
  };
  return { tools: { online: true, breakGlass, ...extra } as unknown as ClusterTools, asked };
}

test("no break-glass annotation: nothing is asked, at once (not even a promise)", () => {
  const { tools, asked } = toolsAnswering({});
  assert.equal(breakGlassAccessFor(pod({ "other.example.com/x": "y" }, ALICE), policies, tools, "SubjectAccessReview", Date.now() + 1000), undefined);
  assert.equal(asked.length, 0);
});

test("every overridable policy in scope is asked about, for the user as the apiserver saw them, by the object's own name", async () => {
  const { tools, asked } = toolsAnswering({ trusted: { allowed: true }, "shop/team-rules": { allowed: false, reason: "no" } });
  const deadline = Date.now() + 1000;
  const access = await breakGlassAccessFor(pod(ANNOTATIONS, ALICE), policies, tools, "SubjectAccessReview", deadline);
  assert.deepEqual(access, {
    checked: true,
    user: "alice",
    byPolicy: new Map<string, BreakGlassGrant>([
      ["trusted", { allowed: true }],
      ["shop/team-rules", { allowed: false, reason: "no" }],
    ]),
  });
  // The policy that allows no override is not asked about; the namespaced one by metadata.name in its namespace.
  assert.deepEqual(
    asked.map((a) => a.policy).sort((a, b) => a.name.localeCompare(b.name)),
    [
      { name: "team-rules", namespace: "shop" },
      { name: "trusted", namespace: undefined },
    ],
  );
  assert.ok(asked.every((a) => a.user === ALICE && a.deadline === deadline));
});

test("the SubjectAccessReview: verb break-glass on the policy's resource by name, for the user's name, uid, groups and extra", () => {
  assert.deepEqual(accessReview(ALICE, { name: "team-rules", namespace: "shop" }), {
    apiVersion: "authorization.k8s.io/v1",
    kind: "SubjectAccessReview",
    spec: {
      user: "alice",
      uid: "u-1",
      groups: ["oncall", "system:authenticated"],
      extra: { "scopes.example.com": ["a", "b"] },
      resourceAttributes: { group: "imprimatur.dev", resource: "namespacedimagepolicies", verb: "break-glass", name: "team-rules", namespace: "shop" },
    },
  });
  assert.deepEqual(accessReview({ username: "bob" }, { name: "trusted" }).spec, {
    user: "bob",
    resourceAttributes: { group: "imprimatur.dev", resource: "imagepolicies", verb: "break-glass", name: "trusted" },
  });
});

test("without an answer to be had, every overridable policy is refused with the reason; nothing is asked", async () => {
  const cases: Array<[string, AdmissionSubject, ClusterTools, RegExp]> = [
    ["no user", pod(ANNOTATIONS), toolsAnswering({ trusted: { allowed: true } }).tools, /^the request names no user to ask about$/],
    [
      "an ImageReview",
      subjectOfImageReview({ containers: [{ image: "docker.io/app:1" }], annotations: ANNOTATIONS, namespace: "shop" }),
      toolsAnswering({ trusted: { allowed: true } }).tools,
      /^an ImageReview names no user to ask about \(set breakGlass.authorization: None/,
    ],
    ["no API", pod(ANNOTATIONS, ALICE), { online: true, breakGlass: undefined } as unknown as ClusterTools, /^the server has no Kubernetes API to ask/],
    [
      "a cluster the server cannot read",
      pod(ANNOTATIONS, ALICE),
      toolsAnswering({ trusted: { allowed: true } }, { unreadable: "cluster-b has no kubeconfig" }).tools,
      /^cluster-b has no kubeconfig$/,
    ],
  ];
  for (const [what, subject, tools, reason] of cases) {
    const access = await breakGlassAccessFor(subject, policies, tools, "SubjectAccessReview", Date.now() + 1000);
    assert.ok(access?.checked, what);
    assert.deepEqual([...access.byPolicy.keys()].sort(), ["shop/team-rules", "trusted"], what);
    for (const grant of access.byPolicy.values()) {
      assert.equal(grant.allowed, false, what);
      assert.match((grant as { reason: string }).reason, reason, what);
    }
  }
});

test("not checked: breakGlass.authorization None, or offline (check), says why and asks no one", async () => {
  const { tools, asked } = toolsAnswering({});
  assert.deepEqual(await breakGlassAccessFor(pod(ANNOTATIONS, ALICE), policies, tools, "None", Date.now() + 1000), {
    checked: false,
    why: UNCHECKED_BY_CONFIGURATION,
  });
  const offline = { online: false } as unknown as ClusterTools;
  assert.deepEqual(await breakGlassAccessFor(pod(ANNOTATIONS, ALICE), policies, offline, "SubjectAccessReview", Date.now() + 1000), {
    checked: false,
    why: UNCHECKED_OFFLINE,
  });
  assert.equal(asked.length, 0);
});
