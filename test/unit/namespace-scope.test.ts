// Which namespaced policies a request sees (src/core/policy-set/namespace-scope.ts): its own namespace's only, none for a
// cluster-scoped request; each namespace's set prepared once per loaded set. The paths users take are in
// namespaced-policy-reach.test.ts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { namespaceOfRequest, policiesForNamespace, preparedForNamespace } from "../../src/core/policy-set/namespace-scope.ts";
import { preparePolicies } from "../../src/core/policy-set/policy-kinds.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { podCreate } from "../support/request-match.ts";

const policy = (kind: string, name: string, namespace?: string) =>
  kind.endsWith("ImagePolicy")
    ? `apiVersion: imprimatur.dev/v1alpha1\nkind: ${kind}\nmetadata: {name: ${name}${namespace ? `, namespace: ${namespace}` : ""}}\nspec: {rules: [{action: allow, images: ["*"]}]}\n`
    : `apiVersion: imprimatur.dev/v1alpha1\nkind: ${kind}\nmetadata: {name: ${name}${namespace ? `, namespace: ${namespace}` : ""}}\nspec: {metadata: {labels: {requiredKeys: [team]}}}\n`;

function loaded(...docs: string[]) {
  const parsed = parsePolicyText(docs.join("---\n"), "p.yaml");
  assert.deepEqual(parsed.errors, []);
  return parsed.policies;
}

const names = (set: ReturnType<typeof loaded>) => [...set.ImagePolicy, ...set.PodRestriction].map((p) => p.name);

test("a request's namespace is its own; a cluster-scoped request, a Namespace included, has none", () => {
  assert.equal(namespaceOfRequest(podCreate()), "team-a");
  assert.equal(namespaceOfRequest(podCreate({ namespace: undefined })), "", "no request namespace: cluster-scoped, whatever the object says");
  const object = { apiVersion: "v1", kind: "Namespace", metadata: { name: "team-a" } };
  const namespaceUpdate = podCreate({ operation: "UPDATE", resource: { group: "", version: "v1", resource: "namespaces" }, object });
  assert.equal(namespaceOfRequest(namespaceUpdate), "", "the apiserver names a Namespace in request.namespace on updates");
  assert.equal(namespaceOfRequest(podCreate({ resource: { group: "example.com", version: "v1", resource: "namespaces" } })), "team-a");
});

test("a namespace sees the cluster's policies and its own, never another namespace's", () => {
  const set = loaded(
    policy("ImagePolicy", "cluster"),
    policy("PodRestriction", "cluster"),
    policy("NamespacedImagePolicy", "mine", "team-a"),
    policy("NamespacedPodRestriction", "mine", "team-a"),
    policy("NamespacedImagePolicy", "theirs", "team-b"),
  );
  assert.deepEqual(names(policiesForNamespace(set, "team-a")), ["cluster", "team-a/mine", "cluster", "team-a/mine"]);
  assert.deepEqual(names(policiesForNamespace(set, "team-b")), ["cluster", "team-b/theirs", "cluster"]);
  assert.deepEqual(names(policiesForNamespace(set, "prod")), ["cluster", "cluster"]);
  assert.deepEqual(names(policiesForNamespace(set, "")), ["cluster", "cluster"], "a cluster-scoped request");
  assert.equal(policiesForNamespace(set, "prod").TrustRoot, set.TrustRoot);
});

test("each namespace's set is prepared once; namespaces without policies share one; nothing left out is the set itself", () => {
  const clusterOnly = preparePolicies(loaded(policy("ImagePolicy", "cluster")));
  assert.equal(preparedForNamespace(clusterOnly, "prod"), clusterOnly);

  const oneNamespace = preparePolicies(loaded(policy("ImagePolicy", "cluster"), policy("NamespacedImagePolicy", "mine", "team-a")));
  assert.equal(preparedForNamespace(oneNamespace, "team-a"), oneNamespace, "team-a's view leaves nothing out");
  const prod = preparedForNamespace(oneNamespace, "prod");
  assert.deepEqual(names(prod.set), ["cluster"]);
  assert.equal(preparedForNamespace(oneNamespace, "kube-system"), prod, "namespaces without policies share one set");
  assert.equal(preparedForNamespace(oneNamespace, ""), prod);

  const two = preparePolicies(loaded(policy("NamespacedImagePolicy", "mine", "team-a"), policy("NamespacedImagePolicy", "theirs", "team-b")));
  const teamA = preparedForNamespace(two, "team-a");
  assert.deepEqual(names(teamA.set), ["team-a/mine"]);
  assert.equal(preparedForNamespace(two, "team-a"), teamA, "prepared once");
  assert.deepEqual(names(preparedForNamespace(two, "team-b").set), ["team-b/theirs"]);
  assert.deepEqual(names(preparedForNamespace(two, "prod").set), []);
});

test("a narrowed set asks for namespace labels only when its own policies need them", () => {
  const selector = `apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: {name: tier, namespace: team-a}
spec:
  matchConstraints: {namespaceSelector: {matchLabels: {tier: tenant}}}
  rules: [{action: allow, images: ["*"]}]
`;
  const prepared = preparePolicies(loaded(policy("ImagePolicy", "cluster"), selector));
  assert.equal(prepared.usesNamespaceLabels, true);
  assert.equal(preparedForNamespace(prepared, "team-a").usesNamespaceLabels, true);
  assert.equal(preparedForNamespace(prepared, "prod").usesNamespaceLabels, false);
});

test("a request that names no resource, or a Namespace without a group, is read as it is (a caller's review may lack fields)", () => {
  assert.equal(namespaceOfRequest({ uid: "u", operation: "CREATE", namespace: "team-a" } as Parameters<typeof namespaceOfRequest>[0]), "team-a");
  assert.equal(
    namespaceOfRequest({ uid: "u", operation: "UPDATE", namespace: "team-a", resource: { version: "v1", resource: "namespaces" } } as Parameters<
      typeof namespaceOfRequest
    >[0]),
    "",
    "a Namespace is cluster-scoped, its group absent or empty",
  );
});
