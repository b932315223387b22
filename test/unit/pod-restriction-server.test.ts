// PodRestrictions through the HTTPS server (POST /validate): a profile bound with the serve option, policies
// from the folder with selector bindings, reload, and policy load errors with file and line.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { App } from "../../src/server/app.ts";
import { loadPolicies } from "../../src/policy/load-policies.ts";
import { PolicyLoadError } from "../../src/policy/policy-error.ts";
import { postJson } from "../support/https-client.ts";
import { startTestApp } from "../support/in-process-app.ts";

let app: App;
let dir: string;
let policies: string;
let base: string;
let ca: string;

const SELECTOR_POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: team-labels}
binding:
  namespaceSelector: {matchLabels: {tier: tenant}}
spec:
  metadata:
    labels: {requiredKeys: [team]}
`;

function review(
  object: Record<string, unknown>,
  opts: { operation?: string; oldObject?: Record<string, unknown>; namespace?: string; resource?: [string, string]; kind?: string } = {},
) {
  const [group, resource] = opts.resource ?? ["", "pods"];
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: randomUUID(),
      kind: { group, version: "v1", kind: opts.kind ?? "Pod" },
      resource: { group, version: "v1", resource },
      namespace: opts.namespace ?? "default",
      operation: opts.operation ?? "CREATE",
      userInfo: { username: "alice" },
      object,
      ...(opts.oldObject ? { oldObject: opts.oldObject } : {}),
    },
  };
}

function pod(spec: Record<string, unknown>, labels: Record<string, string> = {}, namespace = "default") {
  return { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace, labels }, spec };
}
const privileged = { containers: [{ name: "app", image: "registry.example.com/app:1.0", securityContext: { privileged: true } }] };
const plain = { containers: [{ name: "app", image: "registry.example.com/app:1.0" }] };

async function validate(body: unknown) {
  const r = await postJson(`${base}/validate`, ca, body);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return (r.body as { response: { allowed: boolean; status?: { message: string }; warnings?: string[] } }).response;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-restrictions-"));
  policies = join(dir, "policies");
  await mkdir(policies);
  await writeFile(join(policies, "team.yaml"), SELECTOR_POLICY);
  const labels: Record<string, Record<string, string>> = { tenants: { tier: "tenant" }, default: {} };
  const started = await startTestApp({ policies, stateDir: join(dir, "state"), namespaces: { labels: (ns) => labels[ns] }, profiles: ["baseline"] });
  ({ app, base, ca } = started);
});

after(async () => {
  await app?.close();
  await rm(dir, { recursive: true, force: true });
});

test("a profile bound by the serve option denies a privileged pod in any namespace, naming field and check", async () => {
  const r = await validate(review(pod(privileged)));
  assert.equal(r.allowed, false);
  assert.equal(
    r.status?.message,
    "spec.containers[0].securityContext.privileged denied by PodRestriction profile-baseline baseline/privileged: is true; must be false",
  );
  assert.equal((await validate(review(pod(plain)))).allowed, true);
});

test("workload templates are judged at the controller object", async () => {
  const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d", namespace: "default" }, spec: { template: { spec: privileged } } };
  const r = await validate(review(deployment, { resource: ["apps", "deployments"], kind: "Deployment" }));
  assert.equal(r.allowed, false);
  assert.match(r.status!.message, /^spec\.template\.spec\.containers\[0\]\.securityContext\.privileged denied by/);
  // An update that leaves the template alone (e.g. scaling) is not re-judged.
  const scaled = { ...deployment, spec: { ...deployment.spec, replicas: 3 } };
  const u = await validate(review(scaled, { resource: ["apps", "deployments"], kind: "Deployment", operation: "UPDATE", oldObject: deployment }));
  assert.equal(u.allowed, true);
});

test("selector bindings use the namespace's labels", async () => {
  const r = await validate(review(pod(plain, {}, "tenants"), { namespace: "tenants" }));
  assert.equal(r.allowed, false);
  assert.match(r.status!.message, /metadata\.labels denied by PodRestriction team-labels spec\.metadata\.labels: must have the key "team"/);
  assert.equal((await validate(review(pod(plain, { team: "a" }, "tenants"), { namespace: "tenants" }))).allowed, true);
  assert.equal((await validate(review(pod(plain)))).allowed, true);
});

test("unknown namespace labels under a selector binding deny, saying why", async () => {
  const r = await validate(review(pod(plain, {}, "nowhere"), { namespace: "nowhere" }));
  assert.equal(r.allowed, false);
  assert.match(r.status!.message, /the labels of namespace "nowhere" are unknown/);
});

test("a reload picks up a new PodRestriction; a broken one is refused with file and line, keeping the last good set", async () => {
  await writeFile(
    join(policies, "no-latest.yaml"),
    `apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: no-latest}
spec:
  spec:
    containers:
    - image: [{tag: {forbidden: [latest]}}]
`,
  );
  assert.equal(await app.reload(), undefined);
  const r = await validate(review(pod({ containers: [{ name: "a", image: "nginx" }] })));
  assert.equal(r.allowed, false);
  assert.match(r.status!.message, /spec\.containers\[0\]\.image \(tag\) denied by PodRestriction no-latest .*: is "latest", which is forbidden/);

  await writeFile(
    join(policies, "broken.yaml"),
    "apiVersion: imprimatur.dev/v1alpha1\nkind: PodRestriction\nmetadata: {name: broken}\nspec:\n  spec:\n    containers:\n    - securityContext:\n        privileged: {requir: true}\n",
  );
  const err = await app.reload();
  assert.ok(err instanceof PolicyLoadError);
  assert.match(
    err.message,
    /broken\.yaml:8 \(document 1, spec\.spec\.containers\[0\]\.securityContext\.privileged\.requir\): unknown field "requir"; known fields: allowNil, forbidNil, requireNil, require/,
  );
  assert.deepEqual(
    app.podRestrictions().map((p) => p.name),
    ["profile-baseline", "no-latest", "team-labels"],
  );
});

test("load errors for PodRestrictions give file, line, path and reason", async () => {
  const bad = join(dir, "bad");
  await mkdir(bad);
  await writeFile(
    join(bad, "p.yaml"),
    `apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: p}
binding: {mode: Maybe, namespaces: []}
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: q}
spec:
  profile: strict
  spec:
    hostNetwork: {require: false}
    securityContext:
      hostNetwork: {allowNil: true}
      runAsUser: {ranges: [{min: 10, max: 1}]}
`,
  );
  await assert.rejects(loadPolicies(bad), (e: unknown) => {
    assert.ok(e instanceof PolicyLoadError);
    const text = e.errors.map((x) => `${x.line}:${x.path}: ${x.message}`).join("\n");
    // The JSON Schema's (the first document), and the compiler's for a document the schema admits (the second).
    assert.match(text, /4:binding\.mode: must be one of "Accept", "Allow", "Drop", got "Maybe"/);
    assert.match(text, /4:binding\.namespaces: must not be empty; leave it out for every namespace/);
    assert.match(text, /10:spec\.profile: unknown profile "strict"; shipped profiles: baseline, restricted/);
    assert.match(text, /12:spec\.spec\.hostNetwork: unknown field "hostNetwork"/);
    assert.match(text, /14:spec\.spec\.securityContext\.hostNetwork\.allowNil: this field is not a pointer/);
    assert.match(text, /15:spec\.spec\.securityContext\.runAsUser\.ranges\[0\]: min 10 is greater than max 1/);
    return true;
  });
});
