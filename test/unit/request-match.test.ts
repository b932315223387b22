// Which requests a policy is for (src/core/request-match/): ValidatingAdmissionPolicy's matchConstraints and
// matchConditions with VAP's meanings, Kyverno's subjects, load-time errors, and the scope step of the one
// pipeline (policies out of scope neither deny nor pin; undecidable scopes deny, saying why).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Ajv } from "ajv";
import imagePolicySchema from "../../src/core/image-policy/image-policy.schema.json" with { type: "json" };
import podRestrictionSchema from "../../src/core/pod-restriction/pod-restriction.schema.json" with { type: "json" };
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import type { AdmissionRequest } from "../../src/core/admission-review.ts";
import { subjectOfImageReview, subjectOfObject, subjectOfRequest, type AdmissionSubject } from "../../src/core/admission-subject.ts";
import { guessResource } from "../../src/core/kind-resource.ts";
import { compileRequestMatch } from "../../src/core/request-match/compile-request-match.ts";
import { matchRequest, type MatchedRequest, type RequestMatch } from "../../src/core/request-match/request-match.ts";
import { mayMatchResource } from "../../src/core/policy-set/request-scope.ts";
import { renderValidatingWebhookConfiguration } from "../../src/server/webhook-manifests.ts";
import { parse as parseYaml } from "yaml";
import type { AdmissionCall } from "../../src/engine/admission-call.ts";
import { Engine } from "../../src/engine/engine.ts";
import { buildEngine } from "../../src/engine/engine-builder.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { compiledMatch, podCreate } from "../support/request-match.ts";
import { validateSubject } from "../support/engine-review.ts";

function issuesOf(spec: Record<string, unknown>): string[] {
  return compileRequestMatch(spec).issues.map((i) => `${i.path.join(".")}: ${i.message}`);
}

const asked = (request: AdmissionRequest, extra: Partial<MatchedRequest> = {}): MatchedRequest => ({ request, ...extra });

function inScope(match: RequestMatch, req: MatchedRequest): boolean | string {
  const outcome = matchRequest(match, req);
  if ("inScope" in outcome) return outcome.inScope;
  return "undecided" in outcome ? `undecided: ${outcome.undecided}` : `error: ${outcome.conditionError}`;
}

test("resource rules: groups, versions, resources and operations as VAP matches them, subresources apart", () => {
  const deployments = compiledMatch({
    matchConstraints: { resourceRules: [{ apiGroups: ["apps"], apiVersions: ["v1"], resources: ["deployments"], operations: ["CREATE"] }] },
  });
  const deploymentCreate = podCreate({ resource: { group: "apps", version: "v1", resource: "deployments" } });
  assert.equal(inScope(deployments, asked(deploymentCreate)), true);
  assert.equal(inScope(deployments, asked({ ...deploymentCreate, operation: "UPDATE" })), false);
  assert.equal(inScope(deployments, asked(podCreate())), false);
  assert.equal(inScope(deployments, asked(podCreate({ resource: { group: "apps", version: "v1beta1", resource: "deployments" } }))), false);

  const every = compiledMatch({ matchConstraints: { resourceRules: [{ apiGroups: ["*"], apiVersions: ["*"], resources: ["*"], operations: ["*"] }] } });
  const ephemeral = podCreate({ operation: "UPDATE", subResource: "ephemeralcontainers" });
  assert.equal(inScope(every, asked(podCreate())), true);
  assert.equal(inScope(every, asked(ephemeral)), false, '"*" is every resource but no subresource');
  const subresources = (resources: string[]) =>
    inScope(
      compiledMatch({ matchConstraints: { resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], resources, operations: ["UPDATE"] }] } }),
      asked(ephemeral),
    );
  assert.equal(subresources(["pods/ephemeralcontainers"]), true);
  assert.equal(subresources(["pods/*"]), true);
  assert.equal(subresources(["*/ephemeralcontainers"]), true);
  assert.equal(subresources(["*/*"]), true);
  assert.equal(subresources(["pods"]), false);
  assert.equal(subresources(["pods/status"]), false);
});

test("excludeResourceRules take matching requests out; namespace and object selectors as VAP reads them", () => {
  const notJobs = compiledMatch({
    matchConstraints: { excludeResourceRules: [{ apiGroups: ["batch"], apiVersions: ["*"], resources: ["jobs", "cronjobs"], operations: ["*"] }] },
  });
  assert.equal(inScope(notJobs, asked(podCreate())), true);
  assert.equal(inScope(notJobs, asked(podCreate({ resource: { group: "batch", version: "v1", resource: "cronjobs" } }))), false);

  const prod = compiledMatch({ matchConstraints: { namespaceSelector: { matchLabels: { env: "prod" } } } });
  assert.equal(inScope(prod, asked(podCreate(), { namespaceLabels: { env: "prod" } })), true);
  assert.equal(inScope(prod, asked(podCreate(), { namespaceLabels: { env: "dev" } })), false);
  assert.match(String(inScope(prod, asked(podCreate()))), /^undecided: the labels of namespace "team-a" are unknown/);
  assert.equal(inScope(prod, asked(podCreate({ namespace: "" }))), true, "not applied to cluster-scoped objects");

  const web = compiledMatch({ matchConstraints: { objectSelector: { matchExpressions: [{ key: "app", operator: "In", values: ["web"] }] } } });
  assert.equal(inScope(web, asked(podCreate())), true);
  const relabelled = podCreate({ operation: "UPDATE", object: { metadata: { labels: { app: "api" } } } });
  assert.equal(inScope(web, asked(relabelled)), false);
  assert.equal(inScope(web, asked({ ...relabelled, oldObject: { metadata: { labels: { app: "web" } } } })), true, "the labels before an update select too");
});

test("subjects: users, groups and service accounts, with * in names; excludeSubjects", () => {
  const builders = compiledMatch({
    matchConstraints: {
      subjects: [
        { kind: "ServiceAccount", namespace: "tekton-pipelines", name: "*" },
        { kind: "Group", name: "ci-*" },
      ],
      excludeSubjects: [{ kind: "User", name: "system:serviceaccount:tekton-pipelines:trusted" }],
    },
  });
  const by = (username: string, groups: string[] = []) => asked(podCreate({ userInfo: { username, groups } }));
  assert.equal(inScope(builders, by("system:serviceaccount:tekton-pipelines:builder")), true);
  assert.equal(inScope(builders, by("system:serviceaccount:default:builder")), false);
  assert.equal(inScope(builders, by("system:serviceaccount:tekton-pipelines:trusted")), false);
  assert.equal(inScope(builders, by("bob", ["ci-runners"])), true);
  assert.equal(inScope(builders, by("bob", ["developers"])), false);
  assert.equal(inScope(builders, by("system:serviceaccount:tekton-pipelines:a:b")), false, "not a service account name");
  assert.equal(inScope(compiledMatch({ matchConstraints: { subjects: [{ kind: "User", name: "alice" }] } }), asked(podCreate())), true);
});

test("matchConditions: all true applies, one false leaves, an error without a false reports the error", () => {
  const conditions = (...expressions: string[]) => compiledMatch({ matchConditions: expressions.map((expression, i) => ({ name: `c${i}`, expression })) });
  const req = asked(podCreate(), { namespaceLabels: { env: "prod" } });
  assert.equal(inScope(conditions("object.metadata.labels.app == 'web'", "request.userInfo.username == 'alice'"), req), true);
  assert.equal(inScope(conditions("namespaceObject.metadata.labels.env == 'prod'", "oldObject == null"), req), true);
  assert.equal(inScope(conditions("object.metadata.labels.app == 'api'"), req), false);
  assert.match(String(inScope(conditions("object.metadata.labels.missing == 'x'"), req)), /^error: matchCondition "c0" failed: /);
  assert.equal(inScope(conditions("object.metadata.labels.missing == 'x'", "false"), req), false, "a false condition wins over an error");
  assert.match(String(inScope(conditions("'text'"), req)), /not a boolean/);
  const anonymous = asked(podCreate({ userInfo: undefined }));
  assert.equal(
    inScope(conditions("'developers' in request.userInfo.groups", "request.userInfo.username == ''"), anonymous),
    false,
    "absent groups read as empty",
  );
  assert.equal(inScope(conditions("size(request.userInfo.groups) == 0 && request.userInfo.username == ''"), anonymous), true);
});

test("an ImageReview is matched as a pod's creation with its namespace and annotations, no labels and no author", () => {
  const review = subjectOfImageReview({ containers: [{ image: "nginx" }], namespace: "team-a", annotations: { "ci.image-policy.k8s.io/build": "yes" } });
  const req = asked(review.request, { namespaceLabels: { env: "prod" } });
  assert.equal(inScope(compiledMatch({ matchConstraints: { namespaceSelector: { matchLabels: { env: "prod" } } } }), req), true);
  assert.equal(inScope(compiledMatch({ matchConstraints: { objectSelector: { matchLabels: { app: "build" } } } }), req), false);
  assert.equal(inScope(compiledMatch({ matchConstraints: { objectSelector: { matchExpressions: [{ key: "app", operator: "DoesNotExist" }] } } }), req), true);
  assert.equal(inScope(compiledMatch({ matchConstraints: { subjects: [{ kind: "Group", name: "ci" }] } }), req), false);
  assert.equal(inScope(compiledMatch({ matchConstraints: { excludeSubjects: [{ kind: "Group", name: "ci" }] } }), req), true);
  const annotated = "has(object.metadata.annotations) && 'ci.image-policy.k8s.io/build' in object.metadata.annotations";
  assert.equal(inScope(compiledMatch({ matchConditions: [{ name: "ci", expression: annotated }] }), req), true);
  assert.equal(inScope(compiledMatch({ matchConditions: [{ name: "labelled", expression: "has(object.metadata.labels)" }] }), req), false);
  const deploymentsOnly = compiledMatch({
    matchConstraints: { resourceRules: [{ apiGroups: ["apps"], apiVersions: ["v1"], resources: ["deployments"], operations: ["CREATE"] }] },
  });
  assert.equal(inScope(deploymentsOnly, req), false, "an ImageReview stands for a pod's creation");
});

test("offline subjects carry the resource a kind is served as (guessed from the kind), the namespace and the user", () => {
  assert.deepEqual(
    [
      "Pod",
      "Deployment",
      "ReplicaSet",
      "CronJob",
      "ReplicationController",
      "PodTemplate",
      "Endpoints",
      "NetworkPolicy",
      "Ingress",
      "PipelineRun",
      "EndpointSlice",
      "PolicyBinding",
      "Gateway",
      "",
    ].map(guessResource),
    [
      "pods",
      "deployments",
      "replicasets",
      "cronjobs",
      "replicationcontrollers",
      "podtemplates",
      "endpoints",
      "networkpolicies",
      "ingresses",
      "pipelineruns",
      "endpointslices",
      "policybindings",
      "gateways",
      "",
    ],
  );
  const plan = subjectOfObject(
    { apiVersion: "batch/v1", kind: "Job", metadata: { name: "j" }, spec: { template: { spec: { containers: [{ image: "a" }] } } } },
    {},
    "ci",
    {
      username: "bob",
      groups: ["ci"],
    },
  );
  assert.ok(plan.review);
  assert.deepEqual(plan.subject.request.resource, { group: "batch", version: "v1", resource: "jobs" });
  assert.deepEqual(plan.subject.request.kind, { group: "batch", version: "v1", kind: "Job" });
  assert.equal(plan.subject.request.namespace, "ci");
  assert.deepEqual(plan.subject.request.userInfo, { username: "bob", groups: ["ci"] });
});

test("load-time errors: shapes, unknown fields, operations, names, CEL, and exclusions that leave nothing", () => {
  const rule = { apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"] };
  assert.deepEqual(issuesOf({ matchConstraints: { resourceRule: [] } }), [
    'spec.matchConstraints.resourceRule: unknown field "resourceRule"; did you mean "resourceRules"?',
  ]);
  assert.deepEqual(issuesOf({ matchConstraints: { resourceRules: [{ ...rule, apiGroups: [] }] } }), [
    'spec.matchConstraints.resourceRules.0.apiGroups: is empty, so the rule would match nothing; use ["*"] for any',
  ]);
  assert.deepEqual(issuesOf({ matchConstraints: { resourceRules: [{ ...rule, operations: ["DELETE"] }] } }), [
    'spec.matchConstraints.resourceRules.0.operations.0: must be one of CREATE, UPDATE, * (Imprimatur reviews only creations and updates), got "DELETE"',
  ]);
  assert.deepEqual(issuesOf({ matchConstraints: { resourceRules: [{ ...rule, resources: ["pods/a/b"] }] } }).length, 1);
  assert.deepEqual(issuesOf({ matchConstraints: { subjects: [{ kind: "ServiceAccount", name: "x" }] } }), [
    'spec.matchConstraints.subjects.0.namespace: is required for a ServiceAccount ("*" for any)',
  ]);
  assert.deepEqual(issuesOf({ matchConstraints: { subjects: [{ kind: "Robot", name: "x" }] } }), [
    'spec.matchConstraints.subjects.0.kind: must be one of User, Group, ServiceAccount, got "Robot"',
  ]);
  assert.deepEqual(
    issuesOf({
      matchConditions: [
        { name: "a", expression: "true" },
        { name: "a", expression: "true" },
      ],
    }),
    ['spec.matchConditions.1.name: duplicate condition name "a"'],
  );
  assert.match(issuesOf({ matchConditions: [{ name: "a", expression: "object.(" }] })[0]!, /^spec\.matchConditions\.0\.expression: invalid CEL/);
  assert.deepEqual(issuesOf({ matchConditions: [{ name: "a", expression: "unknownVariable" }] }).length, 0, "CEL resolves variables at run time");
  assert.deepEqual(issuesOf({ matchConstraints: { namespaceSelector: { matchExpressions: [{ key: "a", operator: "In" }] } } }), [
    "spec.matchConstraints.namespaceSelector.matchExpressions.0.values: operator In needs at least one value",
  ]);
  assert.deepEqual(issuesOf({ matchConstraints: { objectSelector: { matchExpressions: [{ key: "a", operator: "Equals", values: ["x"] }] } } }), [
    'spec.matchConstraints.objectSelector.matchExpressions.0.operator: must be one of In, NotIn, Exists, DoesNotExist, got "Equals"',
  ]);
  assert.deepEqual(issuesOf({ matchConstraints: { objectSelector: "app=web" } }), [
    'spec.matchConstraints.objectSelector: must be a label selector (matchLabels, matchExpressions), got "app=web"',
  ]);
  // Contradictions: the exclusion covers the whole match.
  assert.deepEqual(issuesOf({ matchConstraints: { resourceRules: [rule], excludeResourceRules: [{ ...rule, operations: ["*"] }] } }), [
    "spec.matchConstraints.excludeResourceRules: excludes every resource that resourceRules match, so the policy would apply to nothing",
  ]);
  assert.deepEqual(
    issuesOf({ matchConstraints: { excludeResourceRules: [{ apiGroups: ["*"], apiVersions: ["*"], resources: ["*", "*/*"], operations: ["*"] }] } }),
    ["spec.matchConstraints.excludeResourceRules: excludes every request, so the policy would apply to nothing"],
  );
  assert.deepEqual(issuesOf({ matchConstraints: { resourceRules: [rule], excludeResourceRules: [{ ...rule, operations: ["UPDATE"] }] } }), []);
  assert.deepEqual(issuesOf({ matchConstraints: { excludeSubjects: [{ kind: "User", name: "*" }] } }), [
    "spec.matchConstraints.excludeSubjects: excludes every subject the policy matches, so the policy would apply to nothing",
  ]);
  assert.deepEqual(issuesOf({ matchConstraints: { subjects: [{ kind: "Group", name: "ci" }], excludeSubjects: [{ kind: "Group", name: "*" }] } }), [
    "spec.matchConstraints.excludeSubjects: excludes every subject the policy matches, so the policy would apply to nothing",
  ]);
  assert.deepEqual(compileRequestMatch({}), { issues: [] }, "no match fields: every request");
});

// The pipeline: the scope step before every kind, pinning and verification.
const SCOPED = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: builds-from-internal}
spec:
  matchConstraints:
    objectSelector: {matchLabels: {tekton.dev/task: build}}
  rules: [{action: allow, images: ["registry.internal/*"]}]
  default: deny
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: no-privileged-for-developers}
spec:
  matchConstraints:
    subjects: [{kind: Group, name: developers}]
  matchConditions:
    - name: not-kube-system
      expression: "request.namespace != 'kube-system'"
  spec:
    containers: [{securityContext: {privileged: {allowNil: true, require: false}}}]
`;

async function scopedEngine(failOpen = false, text = SCOPED): Promise<Engine> {
  const parsed = parsePolicyText(text, "scoped.yaml");
  assert.deepEqual(parsed.errors, []);
  return buildEngine({ config: { ...structuredClone(DEFAULT_SERVER_CONFIG), failOpen }, policies: parsed.policies, offline: true });
}

const call: AdmissionCall = { endpoint: "validate", deadline: Date.now() + 60_000, dryRun: true };

function podSubject(labels: Record<string, string>, user: { username: string; groups: string[] }, privileged = false, namespace = "team-a"): AdmissionSubject {
  const plan = subjectOfRequest(
    podCreate({
      namespace,
      userInfo: user,
      object: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "p", labels },
        spec: { containers: [{ name: "c", image: "docker.io/library/nginx:1.27", securityContext: { privileged } }] },
      },
    }),
  );
  assert.ok(plan.review);
  return plan.subject;
}

test("pipeline: a policy applies only to the requests it matches, for image policies and PodRestrictions alike", async () => {
  const e = await scopedEngine();
  const alice = { username: "alice", groups: ["developers"] };
  const build = await validateSubject(e, podSubject({ "tekton.dev/task": "build" }, alice), call);
  assert.deepEqual(
    build.violations.map((v) => [v.policy, v.rule]),
    [["builds-from-internal", "default"]],
  );
  assert.equal((await validateSubject(e, podSubject({ app: "web" }, alice), call)).allowed, true, "an ordinary pod is not the build policy's");
  const privileged = await validateSubject(e, podSubject({}, alice, true), call);
  assert.deepEqual(
    privileged.violations.map((v) => v.policy),
    ["no-privileged-for-developers"],
  );
  assert.equal((await validateSubject(e, podSubject({}, { username: "ops", groups: ["admins"] }, true), call)).allowed, true);
  assert.equal((await validateSubject(e, podSubject({}, alice, true, "kube-system"), call)).allowed, true, "the condition leaves kube-system out");
});

test("pipeline: a failing condition denies with its reason when failing closed, and leaves the policy out when failing open", async () => {
  const text = SCOPED.replace(`"request.namespace != 'kube-system'"`, `"object.metadata.labels.team == 'a'"`);
  const alice = { username: "alice", groups: ["developers"] };
  const closed = await validateSubject(await scopedEngine(false, text), podSubject({}, alice), call);
  assert.equal(closed.allowed, false);
  assert.deepEqual(
    closed.violations.map((v) => [v.policy, v.rule]),
    [["no-privileged-for-developers", "matchConditions[not-kube-system]"]],
  );
  assert.match(closed.violations[0]!.message, /^matchCondition "not-kube-system" failed: /);
  const open = await validateSubject(await scopedEngine(true, text), podSubject({}, alice, true), call);
  assert.equal(open.allowed, true);
  // Admitted by failing open, so traced as every fail-open admission is: a warning, the audit annotation, and the
  // entry the audit log and the fail-open metric are written from.
  assert.match(
    open.warnings.join("\n"),
    /PodRestriction no-privileged-for-developers was left out: matchCondition "not-kube-system" failed: .*; the server fails open/,
  );
  assert.equal(open.auditAnnotations["fail-open"], "true");
  assert.deepEqual(
    open.failOpen?.map((f) => f.backend),
    ["matchConditions/PodRestriction/no-privileged-for-developers"],
  );
  // A fail-open admission that cannot be recorded is not made: this engine has no audit log.
  const unrecorded = await validateSubject(await scopedEngine(true, text), podSubject({}, alice, true), { ...call, dryRun: false });
  assert.equal(unrecorded.allowed, false);
  assert.match(unrecorded.violations[0]?.message ?? "", /could not be recorded in the audit log \(no audit log is configured\), so it is denied/);
});

test("pipeline: a condition cut at the review's deadline denies with the reason failing closed, and is a traced fail-open failing open", async () => {
  const alice = { username: "alice", groups: ["developers"] };
  const past: AdmissionCall = { ...call, deadline: Date.now() - 1 };
  const closed = await validateSubject(await scopedEngine(false), podSubject({}, alice, true), past);
  assert.equal(closed.allowed, false);
  assert.match(closed.violations.map((v) => v.message).join("\n"), /matchCondition "not-kube-system" failed: .*past its deadline/);
  const open = await validateSubject(await scopedEngine(true), podSubject({}, alice, true), past);
  assert.equal(open.allowed, true);
  assert.match(
    open.warnings.join("\n"),
    /PodRestriction no-privileged-for-developers was left out: matchCondition "not-kube-system" failed: .*past its deadline.*; the server fails open/,
  );
  assert.equal(open.auditAnnotations["fail-open"], "true");
});

test("pipeline: a namespace selector in matchConstraints without the namespace's labels denies, saying why", async () => {
  const text = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: prod-only}
spec:
  matchConstraints: {namespaceSelector: {matchLabels: {env: prod}}}
  rules: [{action: allow, images: ["*"]}]
`;
  const d = await validateSubject(await scopedEngine(false, text), podSubject({}, { username: "a", groups: [] }), call);
  assert.equal(d.allowed, false);
  assert.deepEqual(
    d.violations.map((v) => v.rule),
    ["matchConstraints.namespaceSelector"],
  );
});

test("webhook configurations leave out the resources no policy is for, and keep all of them while one policy is for any", () => {
  const policies = (text: string) => {
    const parsed = parsePolicyText(text, "p.yaml");
    assert.deepEqual(parsed.errors, []);
    return parsed.policies;
  };
  const onlyDeployments = policies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: deployments}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE]}]
  rules: [{action: allow, images: ["*"]}]
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: ephemeral}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: ["*"], resources: ["pods/*"], operations: [UPDATE]}]
  spec: {containers: [{securityContext: {privileged: {allowNil: true, require: false}}}]}
`);
  const rulesOf = (set: ReturnType<typeof policies>) => {
    const yaml = renderValidatingWebhookConfiguration({ baseUrl: "https://x", caPem: "pem" }, { mayMatch: (r) => mayMatchResource(set, r) });
    const config = parseYaml(yaml) as { webhooks: Array<{ rules: Array<{ apiGroups: string[]; resources: string[] }> }> };
    return config.webhooks[0]!.rules.map((r) => [r.apiGroups[0], r.resources]);
  };
  assert.deepEqual(rulesOf(onlyDeployments), [
    ["", ["pods/ephemeralcontainers"]],
    ["apps", ["deployments"]],
  ]);
  const anyRequest = policies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: all}
spec:
  rules: [{action: allow, images: ["*"]}]
`);
  assert.deepEqual(rulesOf({ ...onlyDeployments, ImagePolicy: [...onlyDeployments.ImagePolicy, ...anyRequest.ImagePolicy] }), [
    ["", ["pods", "pods/ephemeralcontainers", "replicationcontrollers", "podtemplates"]],
    ["apps", ["deployments", "replicasets", "statefulsets", "daemonsets"]],
    ["batch", ["jobs", "cronjobs"]],
  ]);
});

test("both kinds' JSON Schemas carry the same match fields, and they accept and refuse what the compiler does", () => {
  const schemas = [imagePolicySchema, podRestrictionSchema] as unknown as Array<{
    $defs: Record<string, unknown>;
    properties: { spec: { properties: Record<string, unknown> } };
  }>;
  const fragment = (s: (typeof schemas)[number]) => ({
    matchConstraints: s.properties.spec.properties.matchConstraints,
    matchConditions: s.properties.spec.properties.matchConditions,
    defs: [s.$defs.matchConstraints, s.$defs.resourceRule, s.$defs.requestSubject, s.$defs.labelSelector],
  });
  assert.deepEqual(fragment(schemas[0]!), fragment(schemas[1]!));

  const ajv = new Ajv({ allErrors: true, strict: false });
  const s = schemas[0]!;
  const validate = ajv.compile({
    $defs: s.$defs,
    type: "object",
    properties: { matchConstraints: s.properties.spec.properties.matchConstraints, matchConditions: s.properties.spec.properties.matchConditions },
  });
  const rule = { apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"] };
  const cases: Array<Record<string, unknown>> = [
    { matchConstraints: { resourceRules: [rule] } },
    { matchConstraints: { resourceRules: [{ ...rule, apiGroups: [] }] } },
    { matchConstraints: { resourceRules: [{ ...rule, operations: ["DELETE"] }] } },
    { matchConstraints: { resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], resources: ["pods"] }] } },
    { matchConstraints: { resourceRules: [{ ...rule, verbs: ["get"] }] } },
    { matchConstraints: { objectSelector: { matchLabels: { a: "b" } } } },
    { matchConstraints: { objectSelector: { matchLabels: { a: 1 } } } },
    { matchConstraints: { subjects: [{ kind: "User", name: "alice" }] } },
    { matchConstraints: { subjects: [{ kind: "Robot", name: "r" }] } },
    { matchConstraints: { subjects: [{ kind: "User" }] } },
    { matchConstraints: { unknown: true } },
    { matchConditions: [{ name: "a", expression: "true" }] },
    { matchConditions: [{ name: "a" }] },
    { matchConditions: [{ name: "a", expression: "true", extra: 1 }] },
    { matchConditions: "true" },
  ];
  for (const spec of cases) {
    assert.equal(compileRequestMatch(spec).issues.length === 0, validate(spec), `schema and compiler disagree on ${JSON.stringify(spec)}`);
  }
});
