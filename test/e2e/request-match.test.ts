// Which requests a policy is for (spec.matchConstraints, spec.matchConditions), end to end: a real etcd +
// kube-apiserver v1.20 calls `imprimatur serve` through the ValidatingWebhookConfiguration serve itself wrote, and
// objects are created with `kubectl create`, as the admin or as impersonated users (--as, --as-group).
//
// Two servers, one cluster: "scoped" serves a policy for each way of saying which requests it is for (a kind,
// users and groups, an object's labels, a namespace's labels, CEL conditions); "kind-bound" serves only policies
// bound to kinds, so its generated configuration leaves pods out and the apiserver never calls it for one. Both
// write a configuration named "imprimatur": the kind-bound one replaces the scoped one for the last tests.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse as parseYaml, stringify } from "yaml";
import { startKubeCluster, untilWebhookActive, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { getText } from "../support/https-client.ts";
import { teardown } from "../support/teardown.ts";

const DENIED_IMAGE = "docker.io/library/nginx:1.25";
const ALLOWED_IMAGE = "registry.example.com/team/app:1.0";
const INTERNAL_ONLY = `
  rules:
    - action: allow
      images: ["registry.example.com/*"]
  default: deny`;

// Each policy is for its own requests: a kind, subjects, object labels, namespace labels, CEL. A request meant
// for one of them is out of every other's scope (the admin is no contractor, other namespaces fail the condition).
const SCOPED_POLICIES = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: deployments-from-internal}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE, UPDATE]}
${INTERNAL_ONLY}
  defaultMessage: Deployments run images from registry.example.com
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: contractors-from-internal}
spec:
  matchConstraints:
    subjects:
      - {kind: Group, name: contractors}
      - {kind: User, name: mallory}
      - {kind: ServiceAccount, namespace: by-subject, name: builder}
    excludeSubjects:
      - {kind: User, name: carol}
${INTERNAL_ONLY}
  defaultMessage: contractors run images from registry.example.com
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: unprivileged-when-labelled}
spec:
  matchConstraints:
    objectSelector: {matchLabels: {imprimatur-e2e/restricted: "true"}}
  spec:
    containers: [{securityContext: {privileged: {allowNil: true, require: false}}}]
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: prod-from-internal}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {env: prod}}
${INTERNAL_ONLY}
  defaultMessage: production runs images from registry.example.com
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: gold-tier-from-internal}
spec:
  matchConditions:
    - name: tiered-namespace
      expression: "request.namespace == 'by-condition'"
    # An error for a pod without labels, or without the tier label: no such key.
    - name: gold-tier
      expression: "object.metadata.labels.tier == 'gold'"
${INTERNAL_ONLY}
  defaultMessage: gold-tier pods run images from registry.example.com
`;

const KIND_BOUND_POLICIES = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: only-deployments}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [apps], apiVersions: ["*"], resources: [deployments], operations: ["*"]}
${INTERNAL_ONLY}
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: unprivileged-jobs}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [batch], apiVersions: [v1], resources: [jobs], operations: [CREATE]}
  spec:
    containers: [{securityContext: {privileged: {allowNil: true, require: false}}}]
`;

let dir: string;
let cluster: KubeCluster;
let scoped: ImprimaturProcess;
let kindBound: ImprimaturProcess;

interface PodOptions {
  image?: string;
  labels?: Record<string, string>;
  privileged?: boolean;
}

function podSpec({ image = DENIED_IMAGE, privileged = false }: PodOptions) {
  return { containers: [{ name: "app", image, ...(privileged ? { securityContext: { privileged: true } } : {}) }] };
}

function pod(name: string, namespace: string, opts: PodOptions = {}): string {
  return JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace, ...(opts.labels ? { labels: opts.labels } : {}) }, spec: podSpec(opts) });
}

function deployment(name: string, namespace: string, opts: PodOptions = {}): string {
  return JSON.stringify({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace },
    spec: { selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: podSpec(opts) } },
  });
}

function job(name: string, namespace: string, opts: PodOptions = {}): string {
  return JSON.stringify({
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name, namespace },
    spec: { template: { spec: { ...podSpec(opts), restartPolicy: "Never" } } },
  });
}

/** `kubectl create`, as the admin or as an impersonated user with groups. */
async function create(manifest: string, as?: { user: string; groups?: string[] }) {
  const impersonation = as ? [`--as=${as.user}`, ...(as.groups ?? []).map((g) => `--as-group=${g}`)] : [];
  return cluster.kubectl([...impersonation, "create", "-f", "-"], { input: manifest });
}

async function createOk(manifest: string, as?: { user: string; groups?: string[] }) {
  const r = await create(manifest, as);
  assert.equal(r.code, 0, `expected admission: ${r.stderr}`);
}

async function createDenied(manifest: string, message: RegExp, as?: { user: string; groups?: string[] }) {
  const r = await create(manifest, as);
  assert.notEqual(r.code, 0, "expected a denial");
  assert.match(r.stderr, /admission webhook "images\.imprimatur\.dev" denied the request: /);
  assert.match(r.stderr, message);
}

async function writePolicies(name: string, text: string): Promise<string> {
  const folder = join(dir, name);
  await mkdir(folder);
  await writeFile(join(folder, "policies.yaml"), text);
  return folder;
}

/** The admission reviews a server has answered on /validate, from its metrics. */
async function validateCalls(server: ImprimaturProcess): Promise<number> {
  const metrics = (await getText(`${server.baseUrl}/metrics`, server.ca)).text;
  const count = /^imprimatur_request_duration_seconds_count\{endpoint="validate"\} (\d+)$/m.exec(metrics);
  return Number(count?.[1] ?? 0);
}

type WebhookRule = { apiGroups: string[]; apiVersions: string[]; operations: string[]; resources: string[] };

async function generatedRules(server: ImprimaturProcess, file: "validating-webhook.yaml" | "mutating-webhook.yaml"): Promise<WebhookRule[]> {
  const config = parseYaml(await readFile(join(server.stateDir, file), "utf8")) as { webhooks: Array<{ rules: WebhookRule[] }> };
  assert.equal(config.webhooks.length, 1);
  return config.webhooks[0]!.rules;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-request-match-"));
  cluster = await startKubeCluster({ enableAdmissionPlugins: ["ValidatingAdmissionWebhook"] });
  for (const ns of ["by-kind", "by-subject", "by-label", "by-condition", "unmatched"]) {
    const r = await cluster.kubectl(["create", "namespace", ns]);
    assert.equal(r.code, 0, r.stderr);
  }
  const prod = await cluster.kubectl(["create", "-f", "-"], {
    input: JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: "by-namespace", labels: { env: "prod" } } }),
  });
  assert.equal(prod.code, 0, prod.stderr);
  // The scoped server reads namespace labels from the API (namespaceSelector, namespaceObject).
  await writeFile(join(dir, "config.yaml"), stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ServerConfig", kubeconfig: cluster.kubeconfig }));
  scoped = await startImprimatur(["--policies", await writePolicies("scoped", SCOPED_POLICIES), "--config", join(dir, "config.yaml")]);
  kindBound = await startImprimatur(["--policies", await writePolicies("kind-bound", KIND_BOUND_POLICIES)]);

  // Impersonated users may create pods in by-subject through a group bound to a role; the admin may impersonate.
  const rbac = await cluster.kubectl(["create", "-f", "-"], {
    input: JSON.stringify({
      apiVersion: "v1",
      kind: "List",
      items: [
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "Role",
          metadata: { name: "pod-creator", namespace: "by-subject" },
          rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["create", "get"] }],
        },
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "RoleBinding",
          metadata: { name: "pod-creators", namespace: "by-subject" },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "pod-creator" },
          subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: "pod-creators" }],
        },
      ],
    }),
  });
  assert.equal(rbac.code, 0, rbac.stderr);

  // The configuration serve wrote for the scoped policies: some are for any resource, so every rule stays.
  const applied = await cluster.kubectl(["create", "-f", join(scoped.stateDir, "validating-webhook.yaml")]);
  assert.equal(applied.code, 0, applied.stderr);
  await untilWebhookActive(cluster, deployment("probe", "by-kind"), (probe) => /deployments-from-internal/.test(probe.stderr), {
    context: () => scoped.log(),
  });
});

after(() => teardown([() => cluster?.stop(), () => scoped?.stop(), () => kindBound?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

test("a policy bound to a kind: a Deployment with a denied image is refused, a bare Pod with the same image is admitted", async () => {
  await createDenied(
    deployment("web", "by-kind"),
    /image "docker\.io\/library\/nginx:1\.25" \(spec\.template\.spec\.containers\[0\]\.image\) denied by policy deployments-from-internal default: Deployments run images from registry\.example\.com/,
  );
  await createOk(deployment("web", "by-kind", { image: ALLOWED_IMAGE }));
  const before = await validateCalls(scoped);
  await createOk(pod("web", "by-kind"));
  assert.equal(await validateCalls(scoped), before + 1, "the pod was reviewed, and no policy for it denied it");
});

test("a policy bound to users, groups and service accounts, with excludeSubjects", async () => {
  const contractorsDenial =
    /image "docker\.io\/library\/nginx:1\.25" \(spec\.containers\[0\]\.image\) denied by policy contractors-from-internal default: contractors run images/;
  // In group contractors: the policy is for alice.
  await createDenied(pod("by-alice", "by-subject"), contractorsDenial, { user: "alice", groups: ["contractors", "pod-creators"] });
  // Named as a user.
  await createDenied(pod("by-mallory", "by-subject"), contractorsDenial, { user: "mallory", groups: ["pod-creators"] });
  // A service account, by namespace and name.
  await createDenied(pod("by-builder", "by-subject"), contractorsDenial, { user: "system:serviceaccount:by-subject:builder", groups: ["pod-creators"] });
  // Neither contractor nor named: the policy is not for bob, nor for another service account.
  await createOk(pod("by-bob", "by-subject"), { user: "bob", groups: ["pod-creators"] });
  await createOk(pod("by-deployer", "by-subject"), { user: "system:serviceaccount:by-subject:deployer", groups: ["pod-creators"] });
  // carol is a contractor, but excluded by name.
  await createOk(pod("by-carol", "by-subject"), { user: "carol", groups: ["contractors", "pod-creators"] });
  // The policy still judges those it is for: an allowed image passes.
  await createOk(pod("by-alice-ok", "by-subject", { image: ALLOWED_IMAGE }), { user: "alice", groups: ["contractors", "pod-creators"] });
});

test("a policy bound to a label: a labelled privileged pod is denied, the same pod unlabelled is admitted", async () => {
  await createDenied(
    pod("labelled", "by-label", { image: ALLOWED_IMAGE, privileged: true, labels: { "imprimatur-e2e/restricted": "true" } }),
    /spec\.containers\[0\]\.securityContext\.privileged denied by PodRestriction unprivileged-when-labelled /,
  );
  await createOk(pod("unlabelled", "by-label", { image: ALLOWED_IMAGE, privileged: true }));
  await createOk(pod("other-value", "by-label", { image: ALLOWED_IMAGE, privileged: true, labels: { "imprimatur-e2e/restricted": "false" } }));
  await createOk(pod("labelled-ok", "by-label", { image: ALLOWED_IMAGE, labels: { "imprimatur-e2e/restricted": "true" } }));
});

test("a policy bound to namespaces by their labels, as the API has them", async () => {
  await createDenied(
    pod("web", "by-namespace"),
    /image "docker\.io\/library\/nginx:1\.25" \(spec\.containers\[0\]\.image\) denied by policy prod-from-internal default: production runs images/,
  );
  await createOk(pod("web", "by-namespace", { image: ALLOWED_IMAGE }));
  await createOk(pod("web", "unmatched"));
});

test("a policy bound to CEL conditions: true applies, false leaves it out, an error denies with the condition's message (fail closed)", async () => {
  await createDenied(
    pod("gold", "by-condition", { labels: { tier: "gold" } }),
    /image "docker\.io\/library\/nginx:1\.25" \(spec\.containers\[0\]\.image\) denied by policy gold-tier-from-internal default: gold-tier pods run images/,
  );
  await createOk(pod("silver", "by-condition", { labels: { tier: "silver" } }));
  // No tier label: the condition cannot be evaluated, and the server fails closed.
  const r = await create(pod("untiered", "by-condition", { labels: { app: "web" } }));
  assert.notEqual(r.code, 0, "a condition that errors must deny when the server fails closed");
  assert.match(r.stderr, /request denied by policy gold-tier-from-internal matchConditions\[gold-tier\]: matchCondition "gold-tier" failed: /);
  assert.doesNotMatch(r.stderr, /denied by policy gold-tier-from-internal default/, "the policy itself did not judge the pod");
  // The first condition is false outside by-condition: a false condition wins over the error, as in VAP.
  await createOk(pod("untiered", "unmatched", { labels: { app: "web" } }));
});

test("serve's webhook configurations leave out the resources no kind-bound policy is for", async () => {
  const expected = [
    { apiGroups: ["apps"], apiVersions: ["*"], operations: ["CREATE", "UPDATE"], resources: ["deployments"], scope: "Namespaced" },
    { apiGroups: ["batch"], apiVersions: ["*"], operations: ["CREATE", "UPDATE"], resources: ["jobs"], scope: "Namespaced" },
  ];
  assert.deepEqual(await generatedRules(kindBound, "validating-webhook.yaml"), expected);
  // No rule pins or verifies: no mutating webhook is written at all.
  await assert.rejects(generatedRules(kindBound, "mutating-webhook.yaml"), { code: "ENOENT" });
  // The scoped server's has pods: it serves policies that may be for any resource.
  assert.ok((await generatedRules(scoped, "validating-webhook.yaml")).some((r) => r.resources.includes("pods")));
});

test("with only kind-bound policies, the apiserver calls Imprimatur for the matched kinds and not for pods", async () => {
  // Replace the scoped server's configuration (same name) with the kind-bound server's, as generated.
  const replaced = await cluster.kubectl(["replace", "-f", join(kindBound.stateDir, "validating-webhook.yaml")]);
  assert.equal(replaced.code, 0, replaced.stderr);
  await untilWebhookActive(cluster, deployment("probe", "unmatched"), (probe) => /denied by policy only-deployments/.test(probe.stderr), {
    context: () => kindBound.log(),
  });

  const kindBoundBefore = await validateCalls(kindBound);
  const scopedBefore = await validateCalls(scoped);
  // A pod no policy is for: no webhook is called, even with an image every policy here would deny.
  await createOk(pod("not-reviewed", "unmatched", { privileged: true }));
  assert.equal(await validateCalls(kindBound), kindBoundBefore, "the apiserver must not call Imprimatur for a pod");
  assert.equal(await validateCalls(scoped), scopedBefore, "the scoped server's configuration is gone");

  // The matched kinds are reviewed, and judged.
  await createDenied(
    deployment("web", "unmatched"),
    /image "docker\.io\/library\/nginx:1\.25" \(spec\.template\.spec\.containers\[0\]\.image\) denied by policy only-deployments default/,
  );
  await createOk(deployment("web", "unmatched", { image: ALLOWED_IMAGE }));
  await createDenied(
    job("privileged", "unmatched", { image: ALLOWED_IMAGE, privileged: true }),
    /spec\.template\.spec\.containers\[0\]\.securityContext\.privileged denied by PodRestriction unprivileged-jobs /,
  );
  assert.equal(await validateCalls(kindBound), kindBoundBefore + 3, "one review for each Deployment and the Job");
  assert.equal(await validateCalls(scoped), scopedBefore);
});
