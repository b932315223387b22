// `imprimatur check` as a CI pipeline runs it: a real child process, its output and exit code.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const BIN = fileURLToPath(new URL("../../bin/imprimatur.js", import.meta.url));
const POLICIES = fileURLToPath(new URL("../fixtures/e2e-policies/", import.meta.url));

function run(args: string[]) {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8" });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function manifests() {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-check-"));
  await writeFile(
    join(dir, "app.yaml"),
    `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers: [{name: web, image: registry.example.com/web:2.1}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          initContainers: [{name: init, image: busybox:1.36}]
          containers: [{name: job, image: registry.example.com/job:1}]
`,
  );
  await writeFile(
    join(dir, "pod.json"),
    JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name: "solo" }, spec: { containers: [{ name: "c", image: "registry.example.com/solo:1" }] } }),
  );
  return dir;
}

test("text output: one line per finding, skipped objects with the reason, a summary; exit 1 when any is denied", async () => {
  const dir = await manifests();
  const r = run(["check", "--policies", POLICIES, "-f", dir]);
  assert.equal(r.code, 1, r.stderr);
  const lines = r.stdout.trim().split("\n");
  assert.deepEqual(
    lines.map((l) => l.replace(dir, "DIR")),
    [
      "DIR/app.yaml Deployment/web: allowed",
      "DIR/app.yaml ConfigMap/settings: skipped: ConfigMap runs no pods (not a Pod, a built-in workload, a registered custom resource or a kind named in imagePaths)",
      'DIR/app.yaml CronJob/nightly: denied: image "busybox:1.36" (spec.jobTemplate.spec.template.spec.initContainers[0].image) denied by policy trusted-registries default: only images from registry.example.com may run',
      "DIR/pod.json Pod/solo: allowed",
      "4 objects: 2 allowed, 1 denied, 1 skipped",
    ],
  );
});

test("json output has structured violations and a summary; exit 0 when everything is allowed", async () => {
  const dir = await manifests();
  const r = run(["check", "--policies", POLICIES, "-f", join(dir, "pod.json"), "--output", "json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), {
    results: [
      { file: join(dir, "pod.json"), apiVersion: "v1", kind: "Pod", name: "solo", namespace: "default", result: "allowed", violations: [], warnings: [] },
    ],
    summary: { objects: 1, allowed: 1, denied: 0, skipped: 0, errors: 0 },
  });
  const denied = run(["check", "--policies", POLICIES, "-f", join(dir, "app.yaml"), "-o", "json"]);
  assert.equal(denied.code, 1, denied.stderr);
  const cron = JSON.parse(denied.stdout).results.find((x: { kind: string }) => x.kind === "CronJob");
  assert.deepEqual(cron.violations, [
    {
      policy: "trusted-registries",
      rule: "default",
      image: "busybox:1.36",
      field: "spec.jobTemplate.spec.template.spec.initContainers[0].image",
      message: "only images from registry.example.com may run",
    },
  ]);
});

test("exit 2 on usage errors, policy-load errors and unreadable manifests", async () => {
  assert.equal(run(["check"]).code, 2);
  assert.equal(run(["check", "-f", "x.yaml", "--output", "xml"]).code, 2);
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-badpolicy-"));
  await writeFile(
    join(dir, "p.yaml"),
    "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: x}\nspec: {rules: [{action: maybe, images: [a]}]}\n",
  );
  const bad = run(["check", "--policies", dir, "-f", dir]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /p\.yaml:4 \(document 1, spec\.rules\[0\]\.action\): must be one of "allow", "deny"/);
  const missing = run(["check", "-f", "/nonexistent/manifests"]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /no such file or directory/);
});

test("serve refuses to start on an invalid policy, naming file and line", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-badserve-"));
  await writeFile(join(dir, "p.yaml"), "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: x}\nspec:\n  rules: []\n  surprise: 1\n");
  const r = run(["serve", "--policies", dir, "--port", "0", "--state-dir", join(dir, "state")]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /refusing to start: .*\n.*p\.yaml:6 \(document 1, spec\.surprise\): unknown field "surprise"/);
});

test("help and unknown commands", () => {
  const help = run(["--help"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /imprimatur serve/);
  assert.equal(run(["frobnicate"]).code, 2);
});

test("check --profile binds a shipped Pod Security Standards profile without a policy", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-check-profile-"));
  await writeFile(
    join(dir, "pods.yaml"),
    `apiVersion: v1
kind: Pod
metadata: {name: root}
spec:
  containers: [{name: app, image: registry.example.com/app:1.0, securityContext: {runAsUser: 0}}]
---
apiVersion: v1
kind: Pod
metadata: {name: hardened}
spec:
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: registry.example.com/app:1.0
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`,
  );
  const baseline = run(["check", "--policies", POLICIES, "--profile", "baseline", "-f", join(dir, "pods.yaml")]);
  assert.equal(baseline.code, 0, baseline.stdout + baseline.stderr);
  const restricted = run(["check", "--policies", POLICIES, "--profile", "restricted", "-f", join(dir, "pods.yaml"), "--output", "json"]);
  assert.equal(restricted.code, 1, restricted.stderr);
  const results = JSON.parse(restricted.stdout).results as Array<{
    name: string;
    result: string;
    violations: Array<{ policy: string; rule: string; field: string; message: string }>;
  }>;
  assert.deepEqual(
    results.map((r) => [r.name, r.result]),
    [
      ["root", "denied"],
      ["hardened", "allowed"],
    ],
  );
  assert.ok(
    results[0]!.violations.some(
      (v) =>
        v.field === "spec.containers[0].securityContext.runAsUser" &&
        v.policy === "profile-restricted" &&
        v.rule === "restricted/run-as-user" &&
        v.message.startsWith("is 0; must be in ≥ 1"),
    ),
    JSON.stringify(results[0]!.violations),
  );
  const unknown = run(["check", "--profile", "strict", "-f", join(dir, "pods.yaml")]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown profile "strict"; shipped profiles: baseline, restricted/);
});

test("profiles lists the shipped profiles and prints one as YAML", () => {
  const list = run(["profiles"]);
  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, /^baseline\tPod Security Standards baseline/m);
  assert.match(
    list.stdout,
    /^restricted\t.*\(includes baseline\)\n\tchecks: volume-types, privilege-escalation, run-as-non-root, run-as-user, seccomp, capabilities, proc-mount$/m,
  );
  const yaml = run(["profiles", "restricted", "--output", "yaml"]);
  assert.equal(yaml.code, 0, yaml.stderr);
  assert.match(yaml.stdout, /^kind: PodRestriction$/m);
  assert.equal(run(["profiles", "nope"]).code, 2);
});

test("unknown fields in pods and templates: warnings by default, errors (exit 2) with --strict", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-check-unknown-"));
  const file = join(dir, "typo.yaml");
  await writeFile(
    file,
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    metadata: {labelz: {a: b}}\n    spec:\n      contianers: [{name: x, image: registry.example.com/x:1}]\n      containers: [{name: web, image: registry.example.com/web:1, imagePullPolice: Always}]\n",
  );
  const lenient = run(["check", "--policies", POLICIES, "-f", file]);
  assert.equal(lenient.code, 0, lenient.stdout + lenient.stderr);
  const warnings = lenient.stdout
    .split("\n")
    .filter((l) => l.includes(": warning: "))
    .map((l) => l.slice(l.indexOf(": warning: ") + 11));
  assert.deepEqual(warnings, [
    "spec.template.metadata.labelz: unknown field (not in ObjectMeta)",
    "spec.template.spec.contianers: unknown field (not in PodSpec)",
    "spec.template.spec.containers[0].imagePullPolice: unknown field (not in Container)",
  ]);
  const strict = run(["check", "--policies", POLICIES, "--strict", "-f", file]);
  assert.equal(strict.code, 2);
  assert.match(strict.stdout, /Deployment\/web: error: spec\.template\.metadata\.labelz: unknown field/);
  assert.match(strict.stdout, /1 object: 0 allowed, 0 denied, 0 skipped, 1 with errors/);
});

test("stdin, junit and yaml output; nothing to check is exit 2", async () => {
  const pod = JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec: { containers: [{ name: "c", image: "nginx:1.25" }] } });
  const junit = spawnSync(process.execPath, [BIN, "check", "--policies", POLICIES, "-f", "-", "-o", "junit"], { encoding: "utf8", input: pod });
  assert.equal(junit.status, 1, junit.stderr);
  assert.match(junit.stdout, /<testsuite name="imprimatur check" tests="1" failures="1" errors="0" skipped="0">/);
  assert.match(
    junit.stdout,
    /<testcase classname="-" name="Pod\/p">\n\s+<failure message="denied: 1 violation\(s\)" type="denied">image &quot;nginx:1.25&quot; \(spec.containers\[0\].image\) denied by policy trusted-registries default/,
  );
  const yaml = spawnSync(process.execPath, [BIN, "check", "--policies", POLICIES, "-f", "-", "-o", "yaml"], { encoding: "utf8", input: pod });
  assert.match(yaml.stdout, /^ {6}- policy: trusted-registries\n {8}rule: default\n {8}image: nginx:1.25\n/m);
  assert.match(yaml.stdout, /^summary:\n {2}objects: 1\n/m);
  const cm = spawnSync(process.execPath, [BIN, "check", "-f", "-"], { encoding: "utf8", input: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n" });
  assert.equal(cm.status, 2);
  assert.match(cm.stderr, /no object was checked \(1 skipped\)/);
});

test("--config registers custom resources, so their pod templates are checked offline like the webhook does", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-check-crd-"));
  await writeFile(
    join(dir, "config.yaml"),
    'apiVersion: imprimatur.dev/v1alpha1\nkind: ServerConfig\npodTemplates:\n  - {apiVersion: ci.example.com/v1, kind: BuildRun, resource: buildruns, templates: ["spec.steps[*].template"]}\n',
  );
  const run1 = join(dir, "run.yaml");
  await writeFile(
    run1,
    "apiVersion: ci.example.com/v1\nkind: BuildRun\nmetadata: {name: b}\nspec:\n  steps:\n    - template: {spec: {containers: [{name: s, image: busybox:1.36}]}}\n",
  );
  const without = run(["check", "--policies", POLICIES, "-f", run1]);
  assert.equal(without.code, 2, "an unregistered kind is skipped, and nothing is left to check");
  assert.match(without.stdout, /BuildRun\/b: skipped/);
  const withConfig = run(["check", "--policies", POLICIES, "--config", join(dir, "config.yaml"), "-f", run1]);
  assert.equal(withConfig.code, 1, withConfig.stdout + withConfig.stderr);
  assert.match(withConfig.stdout, /BuildRun\/b: denied: image "busybox:1.36" \(spec\.steps\[0\]\.template\.spec\.containers\[0\]\.image\)/);
});
