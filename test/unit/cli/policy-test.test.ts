// `imprimatur test`: policy tests with expected results, run as a user runs them (a child process, its
// output and exit code): a passing suite, a wrong expectation, malformed test files, untested resources,
// JSON, --strict, and the shipped policy-tests/ folder, which is how `npm test` runs the shipped tests.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import { flagsFromUsage } from "../../../src/cli/completion.ts";
import { TEST_FLAGS, TEST_USAGE } from "../../../src/cli/policy-test.ts";
import { REPO_ROOT, run, type Result } from "../../support/cli-process.ts";

const MODULE = pathToFileURL(join(REPO_ROOT, "src/cli/policy-test.ts")).href;

/** `imprimatur test ARGS`, through the command's module (independent of the command table). */
function imprimaturTest(args: string[]): Promise<Result> {
  const script = `const m = await import(${JSON.stringify(MODULE)}); process.exitCode = await m.runPolicyTest(process.argv.slice(1));`;
  return run(process.execPath, ["--input-type=module", "-e", script, "--", ...args]);
}

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A folder with the given files (paths relative to it). */
function suite(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "imprimatur-policy-test-"));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

const PODS = `apiVersion: v1
kind: Pod
metadata: {name: root}
spec:
  containers:
  - name: app
    image: registry.example.com/app:1.0
    securityContext: {runAsUser: 0, privileged: true}
---
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: shop}
spec:
  containers:
  - name: app
    image: registry.example.com/app:1.0
---
apiVersion: v1
kind: Pod
metadata: {name: floating, namespace: shop}
spec:
  containers:
  - name: app
    image: registry.example.com/app
`;

const POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: no-latest}
spec:
  rules:
  - {action: deny, images: ["*:latest"], message: pin a version}
  default: allow
`;

function testFile(results: string, extra = ""): string {
  return `apiVersion: imprimatur.dev/v1alpha1
kind: PolicyTest
metadata: {name: shop}
policies: [policies/]
profiles: [baseline]
resources: [pods.yaml]
${extra}results:
${results}`;
}

const PASSING = testFile(`  - {resource: Pod/root, result: denied, policy: profile-baseline, rule: baseline/privileged}
  - {resource: Pod/pinned, namespace: shop, result: allowed, policy: no-latest}
  - {resource: Pod/floating, result: denied, policy: no-latest, rule: "rules[0]"}
`);

function lines(s: string): string[] {
  return s.trimEnd().split("\n");
}

describe("imprimatur test", { concurrency: 4 }, () => {
  test("a passing suite exits 0 with the table and the summary", async () => {
    const dir = suite({ "imprimatur-test.yaml": PASSING, "pods.yaml": PODS, "policies/no-latest.yaml": POLICY });
    const r = await imprimaturTest([dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, "");
    assert.deepEqual(lines(r.stdout), [
      "TEST  RESOURCE            EXPECTED                                        ACTUAL   RESULT",
      "shop  Pod/root            denied by profile-baseline baseline/privileged  denied   pass",
      "shop  Pod/pinned in shop  allowed, no violation of no-latest              allowed  pass",
      "shop  Pod/floating        denied by no-latest rules[0]                    denied   pass",
      "",
      "3 tests: 3 passed, 0 failed",
    ]);
  });

  test("a wrong expectation exits 1, naming the resource and what was found", async () => {
    const dir = suite({
      "imprimatur-test.yaml": testFile(`  - {resource: Pod/root, result: denied, policy: profile-baseline, rule: baseline/hostNamespaces}
  - {resource: Pod/floating, result: allowed}
  - {resource: Pod/pinned, result: allowed}
`),
      "pods.yaml": PODS,
      "policies/no-latest.yaml": POLICY,
    });
    const r = await imprimaturTest([dir]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr, "");
    const out = lines(r.stdout);
    assert.match(out[1]!, /^shop +Pod\/root +denied by profile-baseline baseline\/hostNamespaces +denied +fail$/);
    assert.match(out[2]!, /^shop +Pod\/floating +allowed +denied +fail$/);
    assert.match(out[3]!, /^shop +Pod\/pinned +allowed +allowed +pass$/);
    const pods = join(dir, "pods.yaml");
    assert.ok(
      r.stdout.includes(
        `shop: Pod/root in default (${pods}): denied, but not by profile-baseline baseline/hostNamespaces: no such violation among the 1 violation found\n` +
          "  found: spec.containers[0].securityContext.privileged denied by PodRestriction profile-baseline baseline/privileged: is true; must be false\n",
      ),
      r.stdout,
    );
    assert.ok(
      r.stdout.includes(
        `shop: Pod/floating in shop (${pods}): expected allowed, got denied (1 violation)\n` +
          '  found: image "registry.example.com/app" (spec.containers[0].image) denied by policy no-latest rules[0]: pin a version\n',
      ),
      r.stdout,
    );
    assert.equal(out.at(-1), "3 tests: 1 passed, 2 failed");
  });

  test("a malformed test file exits 2, naming the file, line and field of every problem; nothing runs", async () => {
    const dir = suite({
      "imprimatur-test.yaml": `apiVersion: imprimatur.dev/v1
kind: PolicyTest
metadata: {name: broken}
polices: [policies/]
profiles: [strict]
resources: [pods.yaml, missing.yaml]
results:
  - {resource: Pod/root, result: rejected}
  - {resource: root, result: denied}
  - {resource: Pod/root, result: denied, rule: baseline/privileged}
  - {resource: Pod/root, result: skipped, policy: profile-baseline}
`,
      "pods.yaml": PODS,
    });
    const file = join(dir, "imprimatur-test.yaml");
    const r = await imprimaturTest([dir]);
    assert.equal(r.code, 2);
    assert.deepEqual(lines(r.stderr), [
      `imprimatur test: ${file}:1 (apiVersion): must be "imprimatur.dev/v1alpha1"`,
      `imprimatur test: ${file}:4 (polices): unknown field; did you mean "policies"?`,
      `imprimatur test: ${file}:5 (profiles[0]): unknown profile "strict"; shipped profiles: baseline, restricted`,
      `imprimatur test: ${file}:6 (resources[1]): ${join(dir, "missing.yaml")}: no such file or directory`,
      `imprimatur test: ${file}:8 (results[0].result): must be one of allowed, denied, unverified, skipped, warned, audited; got "rejected"`,
      `imprimatur test: ${file}:9 (results[1].resource): must be KIND/NAME, e.g. Pod/web; got "root"`,
      `imprimatur test: ${file}:10 (results[2].rule): needs policy: a rule is named within a policy`,
      `imprimatur test: ${file}:11 (results[3].policy): only with result allowed, denied, unverified, warned or audited: a skipped resource is judged by no policy`,
    ]);
    assert.equal(r.stdout, "0 tests: 0 passed, 0 failed, 8 errors\n");
    // docs/policy-tests.md quotes the same errors, from a file at policy-tests/shop/.
    const page = readFileSync(join(REPO_ROOT, "docs/policy-tests.md"), "utf8");
    for (const line of lines(r.stderr).filter((l) => /:(6|8) \((resources\[1\]|results\[0\]\.result)\)/.test(l))) {
      const quoted = line.replaceAll(`${dir}/`, "policy-tests/shop/");
      assert.ok(page.includes(quoted), `docs/policy-tests.md quotes it as the tool says it: ${quoted}`);
    }
  });

  test("a file given directly may have any name; required fields and the kind are checked", async () => {
    const dir = suite({ "other.yaml": "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {}\n" });
    const file = join(dir, "other.yaml");
    const r = await imprimaturTest([file]);
    assert.equal(r.code, 2);
    assert.deepEqual(lines(r.stderr), [
      `imprimatur test: ${file}:1 (resources): is required: a list of files or folders, relative to the test file`,
      `imprimatur test: ${file}:1 (results): is required: the expected result of each resource tested`,
      `imprimatur test: ${file}:2 (kind): must be "PolicyTest"`,
      `imprimatur test: ${file}:3 (metadata.name): must be a non-empty string (the test's name)`,
    ]);
  });

  test("an expectation that names no resource, or several, is an error (exit 2); the others still run", async () => {
    const dir = suite({
      "imprimatur-test.yaml": testFile(`  - {resource: Pod/ghost, result: allowed}
  - {resource: Pod/root, namespace: shop, result: denied}
  - {resource: Pod/pinned, result: allowed}
`),
      "pods.yaml": PODS,
      "policies/no-latest.yaml": POLICY,
    });
    const file = join(dir, "imprimatur-test.yaml");
    const r = await imprimaturTest([dir]);
    assert.equal(r.code, 2);
    assert.deepEqual(lines(r.stderr), [
      `imprimatur test: ${file}:8 (test "shop", results[0]): Pod/ghost matches no resource of the test; its resources: Pod/root, Pod/pinned in shop, Pod/floating in shop`,
      `imprimatur test: ${file}:9 (test "shop", results[1]): Pod/root in namespace shop matches no resource of the test; its resources: Pod/root, Pod/pinned in shop, Pod/floating in shop`,
    ]);
    assert.match(r.stdout, /^shop +Pod\/pinned +allowed +allowed +pass$/m);
    assert.match(r.stdout, /^shop +Pod\/root +- +denied +untested$/m);
    assert.equal(lines(r.stdout).at(-1), "1 test: 1 passed, 0 failed, 2 resources untested, 2 errors");
  });

  test("policies that do not load exit 2, naming the test and the policy file", async () => {
    const dir = suite({
      "imprimatur-test.yaml": PASSING,
      "pods.yaml": PODS,
      "policies/no-latest.yaml": POLICY.replace("action: deny", "action: refuse"),
    });
    const r = await imprimaturTest([dir]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, new RegExp(`^imprimatur test: ${escape(join(dir, "imprimatur-test.yaml"))} \\(test "shop"\\): policies failed to load:$`, "m"));
    assert.match(r.stderr, /no-latest\.yaml:6 \(document 1, spec\.rules\[0\]\.action\)/);
  });

  test("resources no expectation names are listed as untested and do not fail the test", async () => {
    const dir = suite({
      "imprimatur-test.yaml": testFile("  - {resource: Pod/pinned, result: allowed}\n"),
      "pods.yaml": PODS,
      "policies/no-latest.yaml": POLICY,
    });
    const r = await imprimaturTest([dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      lines(r.stdout).map((l) => l.replace(/ +/g, " ")),
      [
        "TEST RESOURCE EXPECTED ACTUAL RESULT",
        "shop Pod/pinned allowed allowed pass",
        "shop Pod/root - denied untested",
        "shop Pod/floating in shop - denied untested",
        "",
        "1 test: 1 passed, 0 failed, 2 resources untested",
      ],
    );
  });

  test("-o json: each test's results with expected and actual, the violations, untested resources and a summary", async () => {
    const dir = suite({
      "imprimatur-test.yaml": testFile(`  - {resource: Pod/floating, result: denied, policy: no-latest}
  - {resource: Pod/pinned, result: denied}
`),
      "pods.yaml": PODS,
      "policies/no-latest.yaml": POLICY,
    });
    const r = await imprimaturTest(["-o", "json", dir]);
    assert.equal(r.code, 1, r.stderr);
    const pods = join(dir, "pods.yaml");
    assert.deepEqual(JSON.parse(r.stdout), {
      tests: [
        {
          name: "shop",
          file: join(dir, "imprimatur-test.yaml"),
          results: [
            {
              resource: "Pod/floating",
              namespace: "shop",
              file: pods,
              expected: { result: "denied", policy: "no-latest" },
              actual: "denied",
              status: "pass",
              violations: [
                {
                  policy: "no-latest",
                  rule: "rules[0]",
                  image: "registry.example.com/app",
                  field: "spec.containers[0].image",
                  message: "pin a version",
                  validationActions: ["Deny"],
                },
              ],
              warnings: [],
            },
            {
              resource: "Pod/pinned",
              namespace: "shop",
              file: pods,
              expected: { result: "denied" },
              actual: "allowed",
              status: "fail",
              why: "expected denied, got allowed",
              violations: [],
              warnings: [],
            },
          ],
          untested: [{ resource: "Pod/root", namespace: "default", file: pods, actual: "denied" }],
        },
      ],
      summary: { tests: 2, passed: 1, failed: 1, untested: 1, errors: 0 },
      errors: [],
    });
  });

  test("--strict makes unknown Pod fields errors, which fail the expectation", async () => {
    const dir = suite({
      "imprimatur-test.yaml": `apiVersion: imprimatur.dev/v1alpha1
kind: PolicyTest
metadata: {name: typo}
resources: [pod.yaml]
results:
  - {resource: Pod/typo, result: allowed}
`,
      "pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: typo}\nspec:\n  containers: [{name: a, image: nginx:1.27, imagePullPolicie: Always}]\n",
    });
    const lax = await imprimaturTest([dir]);
    assert.equal(lax.code, 0, lax.stderr);
    const strict = await imprimaturTest(["--strict", dir]);
    assert.equal(strict.code, 1, strict.stderr);
    assert.match(strict.stdout, /^typo +Pod\/typo +allowed +error +fail$/m);
    assert.match(strict.stdout, /expected allowed, got error: spec\.containers\[0\]\.imagePullPolicie: unknown field/);
  });

  test("no test found, a missing operand and usage errors exit 2", async () => {
    const empty = suite({ "README.md": "no tests here\n" });
    const none = await imprimaturTest([empty]);
    assert.equal(none.code, 2);
    assert.equal(none.stderr, `imprimatur test: ${empty}: no test found (no file named imprimatur-test.yaml or imprimatur-test.yml)\n`);
    const missing = await imprimaturTest([join(empty, "nope")]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /nope: no such file or directory/);
    for (const args of [[], ["-o", "xml", empty], ["--frobnicate", empty]]) {
      const r = await imprimaturTest(args);
      assert.equal(r.code, 2, args.join(" "));
      assert.match(r.stderr, /^imprimatur test: [^\n]+\nsee 'imprimatur test --help'\n$/, args.join(" "));
    }
  });

  test("--help and -h print the usage, which documents every flag", async () => {
    for (const flag of ["--help", "-h"]) {
      const r = await imprimaturTest([flag]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, TEST_USAGE);
    }
    assert.match(TEST_USAGE, /^Usage: imprimatur test\b/);
    assert.match(TEST_USAGE, /^ +-h, --help +show this help$/m);
    const documented = new Set(flagsFromUsage(TEST_USAGE).flatMap((f) => f.names));
    for (const [name, o] of Object.entries(TEST_FLAGS)) {
      assert.ok(documented.has(`--${name}`), `--${name}`);
      if ("short" in o) assert.ok(documented.has(`-${o.short}`), `-${o.short}`);
    }
  });

  test("the shipped policy tests (policy-tests/) pass", async () => {
    const r = await imprimaturTest(["policy-tests/"]);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.equal(r.stderr, "");
    const summary = lines(r.stdout).at(-1)!;
    const m = /^(\d+) tests: (\d+) passed, 0 failed$/.exec(summary);
    assert.ok(m, summary);
    assert.equal(m[1], m[2]);
    assert.ok(Number(m[1]) >= 50, summary);
    for (const name of [
      "baseline-profile",
      "restricted-profile",
      "pinned-versions",
      "psp-restricted",
      "kube-system-addons",
      "restricted-by-label",
      "tour-all-policies",
    ]) {
      assert.match(r.stdout, new RegExp(`^${name} `, "m"), name);
    }
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

test("exceptionNamespaces: the test's PolicyExceptions in those namespaces are honoured, as serve --exceptions-namespace; elsewhere not", async () => {
  const policies = readFileSync(join(REPO_ROOT, "examples/exceptions/policies.yaml"), "utf8");
  const pods = readFileSync(join(REPO_ROOT, "examples/exceptions/pods.yaml"), "utf8");
  const test = (namespaces: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: PolicyTest
metadata: {name: exceptions}
policies: [policies.yaml]
${namespaces}
resources: [pods.yaml]
results:
  - {resource: Pod/nightly-report, namespace: batch, result: allowed}
  - {resource: Pod/adhoc, namespace: batch, result: denied, policy: pinned-versions, rule: "rules[1]"}
`;
  const honoured = await imprimaturTest([
    suite({ "policies.yaml": policies, "pods.yaml": pods, "imprimatur-test.yaml": test("exceptionNamespaces: [policy-exceptions]") }),
  ]);
  assert.equal(honoured.code, 0, honoured.stdout + honoured.stderr);
  const ignored = await imprimaturTest([
    suite({ "policies.yaml": policies, "pods.yaml": pods, "imprimatur-test.yaml": test("exceptionNamespaces: [elsewhere]") }),
  ]);
  assert.equal(ignored.code, 1, "the exception is not honoured: nightly-report is denied");
  assert.match(ignored.stdout, /nightly-report.*allowed.*denied.*fail/i);
});
