// check --pod-security (and a PolicyTest's podSecurity): the offline check judges by the namespaces' pod-security.kubernetes.io labels as
// `serve --pod-security` does (the one engine, the same PodSecurity context), so that a check that passes means
// the cluster's Pod Security Admission admits too: Pods are enforced, templates warned, a namespace whose labels
// are not given refuses a Pod (saying how to give them), and a PodSecurityConfiguration's defaults apply.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { imprimatur } from "../../support/cli-process.ts";

let dir: string;
let policies: string;
let manifests: string;

const PRIVILEGED = { name: "app", image: "registry.example.com/app:1.0", securityContext: { privileged: true } };
const PLAIN = { name: "app", image: "registry.example.com/app:1.0" };

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-check-psa-"));
  policies = join(dir, "allow.yaml");
  await writeFile(
    policies,
    JSON.stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "any" },
      spec: { rules: [{ action: "allow", images: ["*"] }] },
    }),
  );
  manifests = join(dir, "objects.yaml");
  const objects = [
    { apiVersion: "v1", kind: "Pod", metadata: { name: "priv", namespace: "locked" }, spec: { containers: [PRIVILEGED] } },
    { apiVersion: "v1", kind: "Pod", metadata: { name: "plain", namespace: "locked" }, spec: { containers: [PLAIN] } },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: "locked" },
      spec: { selector: { matchLabels: { app: "web" } }, template: { metadata: { labels: { app: "web" } }, spec: { containers: [PRIVILEGED] } } },
    },
    { apiVersion: "v1", kind: "Pod", metadata: { name: "open", namespace: "lab" }, spec: { containers: [PRIVILEGED] } },
  ];
  await writeFile(manifests, objects.map((o) => JSON.stringify(o)).join("\n---\n"));
});
after(() => rm(dir, { recursive: true, force: true }));

const LABELS = [
  "--namespace-labels",
  "locked:pod-security.kubernetes.io/enforce=baseline,pod-security.kubernetes.io/warn=restricted",
  "--namespace-labels",
  "lab:",
];

test("without --pod-security the labels change nothing", async () => {
  const r = await imprimatur(["check", "--policies", policies, "-f", manifests, ...LABELS]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /4 objects: 4 allowed, 0 denied/);
});

test("--pod-security: a Pod is enforced in PSA's words, a template only warned, an unlabelled namespace is privileged", async () => {
  const r = await imprimatur(["check", "--policies", policies, "-f", manifests, "--pod-security", ...LABELS, "-o", "json"]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  const results = JSON.parse(r.stdout) as { results: Array<{ name: string; result: string; violations?: Array<{ message: string }>; warnings?: string[] }> };
  const byName = new Map(results.results.map((o) => [o.name, o]));
  assert.equal(byName.get("priv")?.result, "denied");
  assert.deepEqual(
    byName.get("priv")?.violations?.map((v) => v.message),
    ['violates PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)'],
  );
  assert.equal(byName.get("plain")?.result, "allowed");
  assert.match((byName.get("plain")?.warnings ?? []).join("\n"), /would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false/);
  assert.equal(byName.get("web")?.result, "allowed", "a Deployment's template is warned, not refused");
  assert.match((byName.get("web")?.warnings ?? []).join("\n"), /would violate PodSecurity "restricted:latest": privileged/);
  assert.equal(byName.get("open")?.result, "allowed", "a namespace without pod-security labels is privileged");
});

test("a Pod in a namespace whose labels are not given is refused, saying how to give them", async () => {
  const r = await imprimatur(["check", "--policies", policies, "-f", manifests, "--pod-security"]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(
    r.stdout,
    /Pod\/open: denied: failed to lookup namespace lab \(its labels are not known here: give them with --namespace-labels NAMESPACE:LABELS or --namespaces FILE\)/,
  );
  assert.match(r.stdout, /Deployment\/web: allowed/, "a template is admitted, as PSA admits one whose namespace it cannot read");
});

test("--pod-security-config: its defaults apply to unlabelled namespaces and its exemptions hold; a broken file is exit 2", async () => {
  const config = join(dir, "psa.yaml");
  await writeFile(
    config,
    JSON.stringify({
      apiVersion: "pod-security.admission.config.k8s.io/v1",
      kind: "PodSecurityConfiguration",
      defaults: { enforce: "baseline", "enforce-version": "latest" },
      exemptions: { namespaces: ["locked"] },
    }),
  );
  const r = await imprimatur(["check", "--policies", policies, "-f", manifests, "--pod-security-config", config, ...LABELS]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /Pod\/open: denied: violates PodSecurity "baseline:latest": privileged/);
  assert.match(r.stdout, /Pod\/priv: allowed/, "the locked namespace is exempt");

  await writeFile(config, "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults: {enforce: strict}\n");
  const broken = await imprimatur(["check", "--policies", policies, "-f", manifests, "--pod-security-config", config]);
  assert.equal(broken.code, 2, broken.stdout + broken.stderr);
  assert.match(broken.stderr, /^imprimatur check: .*psa\.yaml.*strict/m);
});

test("a PolicyTest with podSecurity (or podSecurityConfig) is judged with the labels as check --pod-security judges it", async () => {
  const folder = join(dir, "suite");
  await mkdir(folder, { recursive: true });
  await writeFile(
    join(folder, "psa.yaml"),
    "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults: {enforce: baseline}\n",
  );
  const test = (name: string, extra: string, results: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: PolicyTest
metadata: {name: ${name}}
policies: [../allow.yaml]
resources: [../objects.yaml]
namespaceLabels:
  locked: {pod-security.kubernetes.io/enforce: baseline}
  lab: {}
${extra}
results:
${results}
`;
  await writeFile(
    join(folder, "imprimatur-test.yaml"),
    [
      test(
        "labels",
        "podSecurity: true",
        "  - {resource: Pod/priv, result: denied, policy: PodSecurity, rule: enforce}\n  - {resource: Pod/open, result: allowed}",
      ),
      test("config-defaults", "podSecurityConfig: psa.yaml", "  - {resource: Pod/open, result: denied, policy: PodSecurity}"),
      test("disabled", "podSecurity: false", "  - {resource: Pod/priv, result: allowed}"),
    ].join("---\n"),
  );
  const r = await imprimatur(["test", folder]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^4 tests: 4 passed, 0 failed/m);

  await writeFile(join(folder, "imprimatur-test.yaml"), test("bad", "podSecurity: yes-please", "  - {resource: Pod/priv, result: denied}"));
  const bad = await imprimatur(["test", folder]);
  assert.equal(bad.code, 2, bad.stdout + bad.stderr);
  assert.match(bad.stderr, /imprimatur-test\.yaml:9 \(podSecurity\): must be true or false/);
});
