// Deciding which policies a request is judged by (src/core/request-match/request-match.ts and request-scope.ts):
// the edges of VAP's matching (several rules, absent request fields, odd usernames), what conditions see, and
// the step that picks the policies of one request: kept, left out or denied, each subset prepared once.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { AdmissionRequest } from "../../src/core/admission-review.ts";
import { preparePolicies, type PolicySet, type PreparedPolicies } from "../../src/core/policy-set/policy-kinds.ts";
import {
  conditionBindings,
  matchRequest,
  matchUsesNamespaceLabels,
  type MatchedRequest,
  type RequestMatch,
} from "../../src/core/request-match/request-match.ts";
import { isRequestScoped, mayMatchResource, scopeRequest } from "../../src/core/policy-set/request-scope.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { compiledMatch, podCreate } from "../support/request-match.ts";

function inScope(match: RequestMatch, request: AdmissionRequest, namespaceLabels?: Record<string, string>): boolean | string {
  const outcome = matchRequest(match, { request, ...(namespaceLabels ? { namespaceLabels } : {}) });
  if ("inScope" in outcome) return outcome.inScope;
  return "undecided" in outcome ? `undecided: ${outcome.undecided}` : `error: ${outcome.conditionError}`;
}

const rule = (apiGroups: string[], resources: string[], operations = ["*"]) => ({ apiGroups, apiVersions: ["*"], resources, operations });

test("the namespace's labels are fetched only for policies with a namespace selector or conditions", () => {
  assert.equal(matchUsesNamespaceLabels(undefined), false);
  assert.equal(matchUsesNamespaceLabels(compiledMatch({ matchConstraints: { objectSelector: { matchLabels: { a: "b" } } } })), false);
  assert.equal(matchUsesNamespaceLabels(compiledMatch({ matchConstraints: { namespaceSelector: { matchLabels: { env: "prod" } } } })), true);
  assert.equal(matchUsesNamespaceLabels(compiledMatch({ matchConditions: [{ name: "c", expression: "true" }] })), true);
  assert.equal(matchUsesNamespaceLabels({ matchConditions: [] }), false);
});

test("resource rules: any one of several rules brings a request in, any one exclusion takes it out", () => {
  const workloads = compiledMatch({ matchConstraints: { resourceRules: [rule(["apps"], ["deployments"]), rule([""], ["pods"])] } });
  assert.equal(inScope(workloads, podCreate()), true);
  assert.equal(inScope(workloads, podCreate({ resource: { group: "apps", version: "v1", resource: "deployments" } })), true);
  assert.equal(inScope(workloads, podCreate({ resource: { group: "batch", version: "v1", resource: "jobs" } })), false);

  const notBatch = compiledMatch({ matchConstraints: { excludeResourceRules: [rule(["batch"], ["jobs"]), rule(["batch"], ["cronjobs"])] } });
  assert.equal(inScope(notBatch, podCreate({ resource: { group: "batch", version: "v1", resource: "cronjobs" } })), false);
  assert.equal(inScope(notBatch, podCreate()), true);

  // A resource without a group is of the core group, as the apiserver's JSON leaves it out; any absent part reads as "".
  assert.equal(
    inScope(compiledMatch({ matchConstraints: { resourceRules: [rule([""], ["pods"])] } }), podCreate({ resource: { version: "v1", resource: "pods" } })),
    true,
  );
  const v1 = compiledMatch({ matchConstraints: { resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["*"] }] } });
  assert.equal(inScope(v1, podCreate({ resource: { resource: "pods" } })), false, "a request without a version is of no version a rule names");
  assert.equal(inScope(v1, podCreate()), true);

  // "deployments/scale" names one resource's subresource, not every resource's.
  const scale = compiledMatch({ matchConstraints: { resourceRules: [rule(["apps"], ["deployments/scale"], ["UPDATE"])] } });
  const scaled = (resource: string) => podCreate({ operation: "UPDATE", resource: { group: "apps", version: "v1", resource }, subResource: "scale" });
  assert.equal(inScope(scale, scaled("deployments")), true);
  assert.equal(inScope(scale, scaled("replicasets")), false);
});

test("namespace selector: a request without a namespace is cluster-scoped; the undecided message says what and how", () => {
  const prod = compiledMatch({ matchConstraints: { namespaceSelector: { matchLabels: { env: "prod" } } } });
  const { namespace: _, ...clusterScoped } = podCreate({ resource: { group: "", version: "v1", resource: "namespaces" } });
  assert.equal(inScope(prod, clusterScoped), true);
  assert.equal(
    inScope(prod, podCreate()),
    'undecided: the labels of namespace "team-a" are unknown, so whether this policy applies (selector env=prod) cannot be decided; ' +
      "give the labels: serve reads them through the Kubernetes API (--kubeconfig, or in a pod) or --namespaces FILE; check and test take --namespaces FILE or --namespace-labels NAMESPACE:KEY=VALUE, verify --namespace-labels",
  );
});

test("object selector: an object without metadata has no labels", () => {
  const unlabelled = compiledMatch({ matchConstraints: { objectSelector: { matchExpressions: [{ key: "app", operator: "DoesNotExist" }] } } });
  assert.equal(inScope(unlabelled, podCreate({ object: { kind: "Pod" } })), true);
  const web = compiledMatch({ matchConstraints: { objectSelector: { matchLabels: { app: "web" } } } });
  assert.equal(inScope(web, podCreate({ object: { kind: "Pod" } })), false);
});

test("subjects: several exclusions, requests without groups or author, usernames that only look like service accounts", () => {
  const notOps = compiledMatch({
    matchConstraints: {
      excludeSubjects: [
        { kind: "User", name: "root" },
        { kind: "Group", name: "ops" },
      ],
    },
  });
  assert.equal(inScope(notOps, podCreate({ userInfo: { username: "bob", groups: ["ops"] } })), false);
  assert.equal(inScope(notOps, podCreate({ userInfo: { username: "root", groups: [] } })), false);
  assert.equal(inScope(notOps, podCreate()), true);

  const anyGroup = compiledMatch({ matchConstraints: { subjects: [{ kind: "Group", name: "*" }] } });
  assert.equal(inScope(anyGroup, podCreate({ userInfo: { username: "alice" } })), false, "no groups: in no group, not even *");

  // An ImageReview has no author: it is no user but for "*", whatever letters a pattern asks for.
  const authorless = podCreate({ userInfo: undefined });
  for (const name of ["*a*", "*e*", "*s*", "* *"])
    assert.equal(inScope(compiledMatch({ matchConstraints: { subjects: [{ kind: "User", name }] } }), authorless), false, name);
  assert.equal(inScope(compiledMatch({ matchConstraints: { subjects: [{ kind: "User", name: "*" }] } }), authorless), true);

  const anyServiceAccount = compiledMatch({ matchConstraints: { subjects: [{ kind: "ServiceAccount", namespace: "*", name: "*" }] } });
  const by = (username: string) => podCreate({ userInfo: { username, groups: [] } });
  assert.equal(inScope(anyServiceAccount, by("system:serviceaccount:ci:builder")), true);
  assert.equal(inScope(anyServiceAccount, by("oidc:platform-engineers:alice")), false, "not the service account prefix");
  assert.equal(inScope(anyServiceAccount, by("system:serviceaccount:ci")), false, "a namespace without a name");
});

test("conditions see VAP's request: the apiserver's fields as sent, and absent ones as empty", () => {
  const full = podCreate({ subResource: "ephemeralcontainers", name: "p", dryRun: true, userInfo: { username: "alice", uid: "42", groups: ["developers"] } });
  assert.deepEqual(conditionBindings({ request: full, namespaceLabels: { env: "prod" } }), {
    object: full.object,
    oldObject: null,
    request: {
      uid: "u",
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
      subResource: "ephemeralcontainers",
      name: "p",
      namespace: "team-a",
      operation: "CREATE",
      userInfo: { username: "alice", uid: "42", groups: ["developers"] },
      dryRun: true,
    },
    namespaceObject: { metadata: { name: "team-a", labels: { env: "prod" } } },
  });
  const bare: AdmissionRequest = { uid: "u", userInfo: { username: "alice" } };
  assert.deepEqual(conditionBindings({ request: bare }), {
    object: null,
    oldObject: null,
    request: {
      uid: "u",
      kind: {},
      resource: {},
      subResource: "",
      name: "",
      namespace: "",
      operation: "",
      userInfo: { username: "alice", uid: "", groups: [] },
      dryRun: false,
    },
    namespaceObject: null,
  });
  // The Namespace is known only with its labels, and a cluster-scoped request has none.
  assert.equal(conditionBindings({ request: podCreate() }).namespaceObject, null);
  assert.equal(conditionBindings({ request: bare, namespaceLabels: { env: "prod" } }).namespaceObject, null);
});

// ---- the scope step ----

const POD_SPEC = "spec: {containers: [{securityContext: {privileged: {allowNil: true, require: false}}}]}";

function imagePolicy(name: string, spec = "", kind = "ImagePolicy", namespace?: string): string {
  const meta = namespace ? `{name: ${name}, namespace: ${namespace}}` : `{name: ${JSON.stringify(name)}}`;
  return `apiVersion: imprimatur.dev/v1alpha1\nkind: ${kind}\nmetadata: ${meta}\nspec:\n${spec}  rules: [{action: allow, images: ["*"]}]\n`;
}

function podRestriction(name: string, spec = "", kind = "PodRestriction", namespace?: string): string {
  const meta = namespace ? `{name: ${name}, namespace: ${namespace}}` : `{name: ${name}}`;
  return `apiVersion: imprimatur.dev/v1alpha1\nkind: ${kind}\nmetadata: ${meta}\nspec:\n${spec}  ${POD_SPEC}\n`;
}

function load(...documents: string[]): PolicySet {
  const parsed = parsePolicyText(documents.join("---\n"), "p.yaml");
  assert.deepEqual(parsed.errors, []);
  return parsed.policies;
}

const selectedBy = (label: string) => `  matchConstraints: {objectSelector: {matchLabels: {${label}: "yes"}}}\n`;
const labelled = (...labels: string[]): MatchedRequest => ({
  request: podCreate({ object: { kind: "Pod", metadata: { labels: Object.fromEntries(labels.map((l) => [l, "yes"])) } } }),
});
const namesOf = (prepared: PreparedPolicies) => [...prepared.set.ImagePolicy, ...prepared.set.PodRestriction].map((p) => p.name);

test("a set is request-scoped as soon as one policy of either kind has a match", () => {
  assert.equal(isRequestScoped(load(imagePolicy("a"), podRestriction("b"))), false);
  assert.equal(isRequestScoped(load(imagePolicy("a"), imagePolicy("b", selectedBy("x")))), true);
  assert.equal(isRequestScoped(load(imagePolicy("a"), podRestriction("b"), podRestriction("c", selectedBy("x")))), true);
});

test("scope: a set without matches, or a request every policy is for, keeps the prepared set as it is", () => {
  const unscoped = preparePolicies(load(imagePolicy("a"), podRestriction("b")));
  assert.deepEqual(scopeRequest(unscoped, labelled(), false), { prepared: unscoped, violations: [] });

  // Policies without a match are for every request, beside those with one.
  const mixed = preparePolicies(load(imagePolicy("any"), imagePolicy("builds", selectedBy("build")), podRestriction("pods")));
  const build = scopeRequest(mixed, labelled("build"), false);
  assert.equal(build.prepared, mixed);
  assert.deepEqual(build.violations, []);
  assert.deepEqual(namesOf(scopeRequest(mixed, labelled(), false).prepared), ["any", "pods"]);
});

test("scope: each subset of policies is its own, and prepared once", () => {
  const prepared = preparePolicies(load(imagePolicy("a", selectedBy("a")), imagePolicy("b", selectedBy("b")), podRestriction("c", selectedBy("c"))));
  const onlyA = scopeRequest(prepared, labelled("a"), false).prepared;
  const onlyB = scopeRequest(prepared, labelled("b"), false).prepared;
  assert.deepEqual(namesOf(onlyA), ["a"]);
  assert.deepEqual(namesOf(onlyB), ["b"]);
  assert.equal(scopeRequest(prepared, labelled("a"), false).prepared, onlyA, "the same subset again is not prepared again");
  assert.deepEqual(namesOf(scopeRequest(prepared, labelled("c"), false).prepared), ["c"]);
});

test("scope: at most 256 subsets are kept per set; the next one starts over", () => {
  // Nine policies, each for the pods with its own label: 2^9 subsets, more than are kept.
  const policies = Array.from({ length: 9 }, (_, i) => imagePolicy(`p${i}`, selectedBy(`l${i}`)));
  const prepared = preparePolicies(load(...policies));
  const subsetOf = (mask: number) =>
    scopeRequest(prepared, labelled(...Array.from({ length: 9 }, (_, i) => (mask & (1 << i) ? `l${i}` : "")).filter((l) => l !== "")), false).prepared;
  const first = subsetOf(0);
  for (let mask = 1; mask < 256; mask++) subsetOf(mask);
  assert.equal(subsetOf(0), first, "256 subsets are all kept");
  subsetOf(256);
  assert.notEqual(subsetOf(0), first, "the 257th subset clears the others");
});

test("scope: an undecidable scope denies, naming the policy by its kind as its other denials do", () => {
  const prodOnly = "  matchConstraints: {namespaceSelector: {matchLabels: {env: prod}}}\n";
  const prepared = preparePolicies(
    load(
      imagePolicy("images", prodOnly),
      podRestriction("pods", prodOnly),
      imagePolicy("images", prodOnly, "NamespacedImagePolicy", "team-a"),
      podRestriction("pods", prodOnly, "NamespacedPodRestriction", "team-a"),
    ),
  );
  const { prepared: scoped, violations } = scopeRequest(prepared, { request: podCreate() }, false);
  assert.deepEqual(namesOf(scoped), []);
  assert.deepEqual(
    violations.map((v) => [v.policy, v.kind, v.rule]),
    [
      ["images", undefined, "matchConstraints.namespaceSelector"],
      ["team-a/images", "NamespacedImagePolicy", "matchConstraints.namespaceSelector"],
      ["pods", "PodRestriction", "matchConstraints.namespaceSelector"],
      ["team-a/pods", "NamespacedPodRestriction", "matchConstraints.namespaceSelector"],
    ],
  );
  assert.equal("kind" in violations[0]!, false, "a cluster ImagePolicy's denial carries no kind");
});

test("scope: failing open, each policy a failed condition left out is traced by its kind; a policy merely out of scope is not", () => {
  const failing = "  matchConditions: [{name: team, expression: \"object.metadata.labels.team == 'a'\"}]\n";
  const prepared = preparePolicies(
    load(
      imagePolicy("images", failing),
      podRestriction("pods", failing),
      imagePolicy("images", failing, "NamespacedImagePolicy", "team-a"),
      podRestriction("pods", failing, "NamespacedPodRestriction", "team-a"),
    ),
  );
  const open = scopeRequest(prepared, { request: podCreate() }, true);
  assert.deepEqual(namesOf(open.prepared), []);
  assert.deepEqual(open.violations, []);
  assert.equal(open.failedOpen?.allowed, true);
  assert.deepEqual(
    open.failedOpen.failOpen?.map((f) => f.backend),
    [
      "matchConditions/ImagePolicy/images",
      "matchConditions/NamespacedImagePolicy/team-a/images",
      "matchConditions/PodRestriction/pods",
      "matchConditions/NamespacedPodRestriction/team-a/pods",
    ],
  );
  assert.deepEqual(
    open.failedOpen.warnings.map((w) => w.slice(0, w.indexOf(" was left out: "))),
    ["ImagePolicy images", "NamespacedImagePolicy team-a/images", "PodRestriction pods", "NamespacedPodRestriction team-a/pods"],
  );
  assert.equal(open.failedOpen.auditAnnotations["fail-open"], "true");

  // Failing closed, the same failures are denials, and nothing was admitted by failing open.
  const closed = scopeRequest(prepared, { request: podCreate() }, false);
  assert.equal(closed.violations.length, 4);
  assert.equal("failedOpen" in closed, false);
  // A policy out of scope (its selector, a condition that is false) is left out without a trace, failing open too.
  const outOfScope = preparePolicies(
    load(imagePolicy("builds", selectedBy("build")), podRestriction("pods", "  matchConditions: [{name: never, expression: 'false'}]\n")),
  );
  const left = scopeRequest(outOfScope, labelled(), true);
  assert.deepEqual(namesOf(left.prepared), []);
  assert.deepEqual(left, { prepared: left.prepared, violations: [] });
});

test("webhook rules: a resource is kept when any rule of any policy of either kind may match it", () => {
  const set = load(
    imagePolicy(
      "batch",
      "  matchConstraints:\n    resourceRules: [{apiGroups: [batch], apiVersions: ['*'], resources: [jobs], operations: ['*']}, {apiGroups: [batch], apiVersions: ['*'], resources: [cronjobs], operations: ['*']}]\n",
    ),
    podRestriction(
      "deployments",
      "  matchConstraints:\n    resourceRules: [{apiGroups: [apps], apiVersions: ['*'], resources: [deployments], operations: ['*']}]\n",
    ),
    podRestriction("pods", "  matchConstraints:\n    resourceRules: [{apiGroups: [''], apiVersions: ['*'], resources: [pods], operations: ['*']}]\n"),
  );
  const resource = (group: string, res: string) => ({ group, version: "*", resource: res, subResource: "" });
  assert.equal(mayMatchResource(set, resource("batch", "cronjobs")), true);
  assert.equal(mayMatchResource(set, resource("", "pods")), true);
  assert.equal(mayMatchResource(set, resource("apps", "deployments")), true);
  assert.equal(mayMatchResource(set, resource("apps", "replicasets")), false);
});
