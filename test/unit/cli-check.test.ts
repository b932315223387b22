// `imprimatur check` as a CI pipeline runs it: a real child process, its output and exit code.
import { test } from "node:test";
import { tempFolder } from "../support/temp-folders.ts";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freshKeyPolicy } from "../support/image-policies.ts";

const BIN = fileURLToPath(new URL("../../bin/imprimatur.js", import.meta.url));
const POLICIES = fileURLToPath(new URL("../fixtures/e2e-policies/", import.meta.url));

function run(args: string[], cwd?: string) {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", ...(cwd ? { cwd } : {}) });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function manifests() {
  const dir = await tempFolder("imprimatur-check-");
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
      "DIR/app.yaml shop/Deployment/web: allowed",
      "DIR/app.yaml ConfigMap/settings: skipped: ConfigMap runs no pods (not a Pod, a built-in workload, a registered custom resource or a kind named in imagePaths)",
      'DIR/app.yaml default/CronJob/nightly: denied: image "busybox:1.36" (spec.jobTemplate.spec.template.spec.initContainers[0].image) denied by policy trusted-registries default: only images from registry.example.com may run',
      "DIR/pod.json default/Pod/solo: allowed",
      "4 objects: 2 allowed, 1 denied, 1 skipped (ConfigMap)",
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
    summary: { objects: 1, allowed: 1, denied: 0, unverified: 0, skipped: 0, errors: 0, warned: 0, audited: 0 },
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
      validationActions: ["Deny"],
    },
  ]);
});

test("exit 2 on usage errors, policy-load errors and unreadable manifests", async () => {
  const usage = run(["check"]);
  assert.equal(usage.code, 2);
  assert.equal(usage.stderr, "imprimatur check: at least one -f FILE|DIR|- is required\nsee 'imprimatur check --help'\n");
  assert.equal(run(["check", "-f", "x.yaml", "--output", "xml"]).code, 2);
  const dir = await tempFolder("imprimatur-badpolicy-");
  await writeFile(
    join(dir, "p.yaml"),
    "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: x}\nspec: {rules: [{action: maybe, images: [a]}]}\n",
  );
  const bad = run(["check", "--policies", dir, "-f", dir]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /p\.yaml:4 \(document 1, spec\.rules\[0\]\.action\): must be one of "allow", "deny"/);
  assert.ok(bad.stderr.includes(`  ${join(dir, "p.yaml")}:4 `), `an absolute --policies path is printed as given: ${bad.stderr}`);
  const missing = run(["check", "-f", "/nonexistent/manifests"]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /no such file or directory/);
});

test("serve refuses to start on an invalid policy, naming file and line", async () => {
  const dir = await tempFolder("imprimatur-badserve-");
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
  const dir = await tempFolder("imprimatur-check-profile-");
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
        v.rule === "restricted/runAsUser" &&
        v.message.startsWith("is 0; must be at least 1"),
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
    /^restricted\t.*\(includes baseline\)\n\tchecks: restrictedVolumes, allowPrivilegeEscalation, runAsNonRoot, runAsUser, seccompProfile_restricted, capabilities_restricted, procMount$/m,
  );
  const yaml = run(["profiles", "restricted", "--output", "yaml"]);
  assert.equal(yaml.code, 0, yaml.stderr);
  assert.match(yaml.stdout, /^kind: PodRestriction$/m);
  assert.equal(run(["profiles", "nope"]).code, 2);
});

test("unknown fields in pods and templates: warnings by default, errors (exit 2) with --strict", async () => {
  const dir = await tempFolder("imprimatur-check-unknown-");
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

test("stdin, junit and yaml output; only objects Imprimatur does not review is a pass, no object at all a usage error", async () => {
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
  const cm = spawnSync(process.execPath, [BIN, "check", "-f", "-"], {
    encoding: "utf8",
    input:
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
  });
  assert.equal(cm.status, 0, cm.stderr);
  assert.match(cm.stdout, /^3 objects: 0 allowed, 0 denied, 3 skipped \(2 ConfigMap, Service\)$/m);
  const dir = await tempFolder("imprimatur-check-empty-");
  await writeFile(join(dir, "empty.yaml"), "# nothing yet\n");
  for (const args of [
    ["-f", join(dir, "empty.yaml")],
    ["-f", dir],
    ["-f", "-"],
  ]) {
    const none = spawnSync(process.execPath, [BIN, "check", ...args], { encoding: "utf8", input: "" });
    assert.equal(none.status, 2, args.join(" "));
    assert.equal(none.stdout, "");
    assert.equal(none.stderr, `imprimatur check: no object in ${args[1]}\nsee 'imprimatur check --help'\n`);
  }
  // A glob that matched nothing reaches the command as it was written.
  const glob = join(dir, "*.json");
  const unmatched = run(["check", "-f", glob]);
  assert.equal(unmatched.code, 2);
  assert.equal(unmatched.stderr, `imprimatur check: ${glob}: no such file or directory\n`, 'the problem is the whole answer: no "no object in" after it');
});

test("--config registers custom resources, so their pod templates are checked offline like the webhook does", async () => {
  const dir = await tempFolder("imprimatur-check-crd-");
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
  assert.equal(without.code, 0, "an unregistered kind is skipped: nothing Imprimatur reviews, a pass");
  assert.match(without.stdout, /BuildRun\/b: skipped/);
  assert.match(without.stdout, /^1 object: 0 allowed, 0 denied, 1 skipped \(BuildRun\)$/m);
  const withConfig = run(["check", "--policies", POLICIES, "--config", join(dir, "config.yaml"), "-f", run1]);
  assert.equal(withConfig.code, 1, withConfig.stdout + withConfig.stderr);
  assert.match(withConfig.stdout, /BuildRun\/b: denied: image "busybox:1.36" \(spec\.steps\[0\]\.template\.spec\.containers\[0\]\.image\)/);
});

const HARDENED = `apiVersion: v1
kind: Pod
metadata: {name: hardened}
spec:
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: nginx
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`;

const EMPTY_SET = "no policy was found (an empty set admits everything); add policies, or pass --allow-empty if that is what you mean";

test("check, test and serve build one policy set from the same flags: --profile adds to the embedded default; an empty folder is refused by all three alike", async () => {
  const dir = await tempFolder("imprimatur-check-set-");
  const pods = join(dir, "pods.yaml");
  await writeFile(pods, HARDENED);
  // As `serve --profile restricted`: the embedded default policy still judges (nginx has no pinned version).
  const profiled = run(["check", "--profile", "restricted", "-f", pods, "-o", "json"]);
  assert.equal(profiled.code, 1, profiled.stderr);
  assert.deepEqual(
    JSON.parse(profiled.stdout).results[0].violations.map((v: { policy: string; rule: string }) => `${v.policy} ${v.rule}`),
    ["pinned-versions rules[1]"],
  );

  const empty = join(dir, "no-policies");
  await mkdir(empty);
  const testFile = join(dir, "imprimatur-test.yaml");
  await writeFile(
    testFile,
    `apiVersion: imprimatur.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: empty}\npolicies: [${empty}]\nresources: [pods.yaml]\nresults:\n- {resource: Pod/hardened, result: allowed}\n`,
  );
  const refusals = [
    run(["check", "--policies", empty, "-f", pods]),
    run(["test", testFile]),
    run(["serve", "--policies", empty, "--port", "0", "--state-dir", join(dir, "state")]),
  ];
  for (const r of refusals) {
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.ok(r.stderr.includes(`  ${empty}: ${EMPTY_SET}\n`), r.stderr);
  }
  const missing = join(dir, "no-such-folder");
  for (const r of [
    run(["check", "--policies", missing, "-f", pods]),
    run(["serve", "--policies", missing, "--port", "0", "--state-dir", join(dir, "state")]),
  ]) {
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.ok(r.stderr.includes(`  ${missing}: cannot read the policy folder: no such file or directory\n`), r.stderr);
  }
  const allowedEmpty = run(["check", "--policies", empty, "--allow-empty", "-f", pods]);
  assert.equal(allowedEmpty.code, 0, allowedEmpty.stderr);
  assert.match(allowedEmpty.stdout, /Pod\/hardened: allowed/);
  const testAllowedEmpty = run(["test", "--allow-empty", testFile]);
  assert.equal(testAllowedEmpty.code, 0, testAllowedEmpty.stdout + testAllowedEmpty.stderr);
});

/** An ImagePolicy whose allow rule needs a signature by a fresh key: offline, nothing can verify it. */
async function signedPolicy(dir: string): Promise<string> {
  const file = join(dir, "signed.yaml");
  await writeFile(file, freshKeyPolicy("signed", "registry.example.com/*"));
  return file;
}

const DIGEST = `sha256:${"0123456789abcdef".repeat(4)}`;

test("offline, an image allowed only with verified signatures is unverified: reported with the reason, counted, exit 1 unless --allow-unverified", async () => {
  const dir = await tempFolder("imprimatur-check-unverified-");
  const policy = await signedPolicy(dir);
  const pods = join(dir, "pods.yaml");
  await writeFile(
    pods,
    `apiVersion: v1\nkind: Pod\nmetadata: {name: signed}\nspec: {containers: [{name: c, image: "registry.example.com/app@${DIGEST}"}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: other}\nspec: {containers: [{name: c, image: "elsewhere.example.com/app@${DIGEST}"}]}\n`,
  );
  const text = run(["check", "--policies", policy, "-f", pods]);
  assert.equal(text.code, 1, text.stderr);
  assert.deepEqual(text.stdout.trim().split("\n"), [
    `${pods} default/Pod/signed: unverified: image "registry.example.com/app@${DIGEST}" (spec.containers[0].image) under policy signed rules[0]: signatures required by this rule cannot be verified offline (no registry is asked)`,
    `${pods} default/Pod/other: denied: image "elsewhere.example.com/app@${DIGEST}" (spec.containers[0].image) denied by policy signed default: no rule of this policy allows this image`,
    "2 objects: 0 allowed, 1 denied, 1 unverified, 0 skipped",
  ]);
  const signedPod = join(dir, "signed-pod.yaml");
  await writeFile(
    signedPod,
    `apiVersion: v1\nkind: Pod\nmetadata: {name: signed}\nspec: {containers: [{name: c, image: "registry.example.com/app@${DIGEST}"}]}\n`,
  );
  const signedOnly = ["check", "--policies", policy, "-f", signedPod, "-o", "json"];
  for (const [extra, code] of [
    [[], 1],
    [["--allow-unverified"], 0],
  ] as const) {
    const r = run([...signedOnly, ...extra]);
    assert.equal(r.code, code, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.equal(report.results[0].result, "unverified");
    assert.match(report.results[0].reason, /cannot be checked offline/);
    assert.deepEqual(report.results[0].unverified, [
      {
        policy: "signed",
        rule: "rules[0]",
        image: `registry.example.com/app@${DIGEST}`,
        field: "spec.containers[0].image",
        reason: "signatures required by this rule cannot be verified offline (no registry is asked)",
      },
    ]);
    assert.deepEqual(report.results[0].warnings, [], "said once, as the result");
    assert.equal(report.summary.unverified, 1);
  }

  await writeFile(
    join(dir, "imprimatur-test.yaml"),
    `apiVersion: imprimatur.dev/v1alpha1
kind: PolicyTest
metadata: {name: signed}
description: signed images from our registry
policies: [signed.yaml]
resources: [signed-pod.yaml]
results:
- {resource: Pod/signed, result: unverified}
- {resource: Pod/signed, result: unverified, policy: signed, rule: "rules[0]"}
---
apiVersion: imprimatur.dev/v1alpha1
kind: PolicyTest
metadata: {name: signed-as-allowed}
policies: [signed.yaml]
resources: [signed-pod.yaml]
results:
- {resource: Pod/signed, result: allowed}
---
apiVersion: imprimatur.dev/v1alpha1
kind: PolicyTest
metadata: {name: signed-elsewhere}
policies: [signed.yaml]
resources: [signed-pod.yaml]
results:
- {resource: Pod/signed, result: unverified, policy: signed, rule: "rules[1]"}
`,
  );
  const strict = run(["test", dir, "-o", "json"]);
  assert.equal(strict.code, 1, strict.stderr);
  const report = JSON.parse(strict.stdout);
  assert.deepEqual(
    report.tests.map((t: { name: string; description?: string; results: Array<{ actual: string; status: string }> }) => [
      t.name,
      t.description,
      t.results[0]!.actual,
      t.results[0]!.status,
    ]),
    [
      ["signed", "signed images from our registry", "unverified", "pass"],
      ["signed-as-allowed", undefined, "unverified", "fail"],
      ["signed-elsewhere", undefined, "unverified", "fail"],
    ],
  );
  assert.equal(report.tests[0].results[1].status, "pass", "unverified under the policy and rule named");
  assert.equal(report.tests[2].results[0].why, "unverified, but not under signed rules[1]: signed rules[0]");
  const lenient = run(["test", "--allow-unverified", dir]);
  assert.equal(lenient.code, 1, lenient.stdout + lenient.stderr);
  assert.match(lenient.stdout, /^signed-elsewhere +Pod\/signed +unverified under signed rules\[1\] +unverified +fail$/m);
  assert.match(lenient.stdout, /^signed-as-allowed +Pod\/signed +allowed +unverified +pass$/m);
});

test("-n names the namespace of objects that name none, and --namespace-labels labels it, so namespaceSelector policies are judged offline", async () => {
  const dir = await tempFolder("imprimatur-check-namespace-");
  await writeFile(
    join(dir, "prod-only.yaml"),
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: prod-registry}
spec:
  namespaceSelector: {matchLabels: {env: prod}}
  rules:
    - action: allow
      images: ["registry.example.com/*"]
  default: deny
`,
  );
  const pods = join(dir, "pods.yaml");
  await writeFile(
    pods,
    `apiVersion: v1\nkind: Pod\nmetadata: {name: loose}\nspec: {containers: [{name: c, image: "docker.io/library/busybox:1.36"}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: pinned, namespace: lab}\nspec: {containers: [{name: c, image: "docker.io/library/busybox:1.36"}]}\n`,
  );
  const policies = join(dir, "prod-only.yaml");
  const judged = (args: string[]) => {
    const r = run(["check", "--policies", policies, "-f", pods, "-o", "json", ...args]);
    return {
      code: r.code,
      stderr: r.stderr,
      results: (JSON.parse(r.stdout || '{"results": []}').results as Array<{ name: string; namespace: string; result: string }>).map(
        (x) => `${x.name} ${x.namespace} ${x.result}`,
      ),
    };
  };
  // Unknown labels: whether the policy applies cannot be decided, which denies (fail closed), as serve does.
  assert.deepEqual(judged([]).results, ["loose default denied", "pinned lab denied"]);
  assert.deepEqual(judged(["-n", "team-a", "--namespace-labels", "team-a:env=prod,tier=web", "--namespace-labels", "lab:env=dev"]).results, [
    "loose team-a denied",
    "pinned lab allowed",
  ]);
  assert.deepEqual(judged(["--namespace", "team-a", "--namespace-labels", "team-a:env=dev", "--namespace-labels", "lab:"]).results, [
    "loose team-a allowed",
    "pinned lab allowed",
  ]);
  // Labels from a file, and the flag over them.
  await writeFile(join(dir, "namespaces.yaml"), "team-a: {env: prod}\nlab: {env: prod}\n");
  assert.deepEqual(judged(["-n", "team-a", "--namespaces", join(dir, "namespaces.yaml"), "--namespace-labels", "lab:env=dev"]).results, [
    "loose team-a denied",
    "pinned lab allowed",
  ]);
  for (const bad of ["team-a", "Team:env=prod", "team-a:env", "team-a:=x"]) {
    const r = run(["check", "--policies", policies, "-f", pods, "--namespace-labels", bad]);
    assert.equal(r.code, 2, bad);
    assert.match(
      r.stderr,
      /^imprimatur check: --namespace-labels "[^"]*": .*; expected NAMESPACE:KEY=VALUE\[,KEY=VALUE…\], e\.g\. team-a:env=prod,tier=web\nsee 'imprimatur check --help'\n$/,
      bad,
    );
  }
  assert.equal(run(["check", "--policies", policies, "-f", pods, "-n", "Not_A_Namespace"]).code, 2);

  // The same in a PolicyTest: its namespace and namespaceLabels, or -n and --namespace-labels for every test.
  await writeFile(
    join(dir, "imprimatur-test.yaml"),
    `apiVersion: imprimatur.dev/v1alpha1
kind: PolicyTest
metadata: {name: prod}
policies: [prod-only.yaml]
namespace: team-a
namespaceLabels:
  team-a: {env: prod}
  lab: {env: dev}
resources: [pods.yaml]
results:
- {resource: Pod/loose, namespace: team-a, result: denied, policy: prod-registry, rule: default}
- {resource: Pod/pinned, result: allowed}
`,
  );
  const test1 = run(["test", dir]);
  assert.equal(test1.code, 0, test1.stdout + test1.stderr);
});

test("a break-glass override offline: allowed as the server would admit it, saying that check records nothing (docs/policy-tests.md)", () => {
  const resources = fileURLToPath(new URL("../../policy-tests/default/resources.yaml", import.meta.url));
  const r = run(["check", "-f", resources]);
  const lines = r.stdout.split("\n").filter((l) => l.includes("Pod/break-glass:"));
  assert.ok(
    lines.some((l) => l.endsWith("Pod/break-glass: allowed")),
    r.stdout,
  );
  assert.ok(
    lines.some((l) => l.includes("the admission is recorded in the audit log (a dry run, or imprimatur check, records nothing)")),
    r.stdout,
  );
  assert.doesNotMatch(r.stdout, /this admission is audited/);
});

test("text output names each object's namespace: Pod/hub of two namespaces are two objects (NAMESPACE/KIND/NAME)", async () => {
  const dir = await tempFolder("imprimatur-check-namespaces-");
  const pod = (namespace: string) =>
    `apiVersion: v1\nkind: Pod\nmetadata: {name: hub, namespace: ${namespace}}\nspec:\n  containers: [{name: c, image: "nginx:latest"}]\n`;
  await writeFile(join(dir, "pods.yaml"), [pod("shop"), pod("dev")].join("---\n"));
  const r = run(["check", "-f", join(dir, "pods.yaml")]);
  assert.equal(r.code, 1, r.stderr);
  const who = r.stdout
    .trimEnd()
    .split("\n")
    .slice(0, -1)
    .map((l) => l.slice(0, l.indexOf(": ")));
  assert.deepEqual(who, [`${join(dir, "pods.yaml")} shop/Pod/hub`, `${join(dir, "pods.yaml")} dev/Pod/hub`]);
});

test("check FILE without -f says to name files with -f", () => {
  const r = run(["check", "app.yaml"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /Unexpected argument 'app\.yaml'.*name files and folders with -f \(-f FILE, -f DIR, -f - for standard input\)/);
});

test('a file whose only document is not valid YAML: its errors with line, exit 2, and no "no object in" after them', async () => {
  const dir = await tempFolder("imprimatur-check-bad-");
  const file = join(dir, "bad.yaml");
  await writeFile(file, "apiVersion: v1\nkind: Pod\nmetadata: {name: x\nspec: [\n");
  const r = run(["check", "-f", file]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, new RegExp(`^imprimatur check: ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:\\d+ \\(document 1\\): not valid YAML: `));
  assert.doesNotMatch(r.stderr, /no object in/);
});
