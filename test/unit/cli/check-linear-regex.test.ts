// Regular expressions a policy writes run on a linear-time engine (RE2 syntax), through `check` as a user runs
// it: a pattern that backtracks exponentially on JavaScript's engine is judged correctly and at once (each test
// has a small timeout; on a backtracking engine these took minutes), and what RE2 cannot compile is a load
// error with the file, line, field and reason.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { imprimatur } from "../../support/cli-process.ts";

// 30 "a"s without the "b" the patterns need: (a|a)+ has 2^30 ways to take them, all tried by a backtracking engine.
const A30 = "a".repeat(30);
let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-check-regex-"));
});
after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function files(name: string, policies: string, manifests: string): Promise<{ policies: string; manifests: string }> {
  await writeFile(join(dir, `${name}-policies.yaml`), policies);
  await writeFile(join(dir, `${name}-pods.yaml`), manifests);
  return { policies: join(dir, `${name}-policies.yaml`), manifests: join(dir, `${name}-pods.yaml`) };
}

const pod = (name: string, extra: string) => `apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: team-a${extra.startsWith("annotations") ? `, ${extra}` : ""}}
spec: {${extra.startsWith("annotations") ? "" : `${extra}, `}containers: [{name: c, image: registry.example.com/app:1}]}
`;

type CheckJson = { results: Array<{ name: string; result: string; violations: Array<{ message: string }> }> };

/** `check -o json` of policies and manifests given as text; every case here denies something (exit 1). */
async function checkJson<T = CheckJson>(name: string, policies: string, manifests: string): Promise<T> {
  const f = await files(name, policies, manifests);
  const r = await imprimatur(["check", "--policies", f.policies, "-f", f.manifests, "-o", "json"]);
  assert.equal(r.code, 1, r.stderr);
  return JSON.parse(r.stdout) as T;
}

test("a NamespacedPodRestriction regex that backtracks exponentially is judged at once, anchored to the whole value", { timeout: 10_000 }, async () => {
  const out = await checkJson(
    "pod-restriction",
    `apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedPodRestriction
metadata: {name: accounts, namespace: team-a}
spec:
  spec:
    serviceAccountName: {regex: "(a|a)+b"}
`,
    [pod("long", `serviceAccountName: ${A30}`), pod("matching", "serviceAccountName: aaab"), pod("unanchored", "serviceAccountName: aaabc")].join("---\n"),
  );
  assert.deepEqual(
    out.results.map((x) => [x.name, x.result, x.violations.map((v) => v.message)]),
    [
      ["long", "denied", [`is "${A30}"; must match ^(?:(a|a)+b)$`]],
      ["matching", "allowed", []],
      ["unanchored", "denied", ['is "aaabc"; must match ^(?:(a|a)+b)$']],
    ],
  );
});

test("a break-glass ticketPattern that backtracks exponentially is judged at once, unanchored", { timeout: 10_000 }, async () => {
  const annotations = (ticket: string) =>
    `annotations: {break-glass.image-policy.k8s.io/reason: "incident", break-glass.image-policy.k8s.io/ticket: "${ticket}"}`;
  const out = await checkJson(
    "ticket",
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: nothing-runs}
spec:
  default: deny
  rules: []
  breakGlass: {allowed: true, ticketPattern: "(a|a)+b"}
`,
    [pod("long", annotations(A30)), pod("inside", annotations("x-aab-1"))].join("---\n"),
  );
  assert.equal(out.results[0]!.result, "denied");
  assert.ok(
    out.results[0]!.violations.some((v) => v.message === `break-glass ticket "${A30}" does not match the required form (a|a)+b`),
    JSON.stringify(out.results[0]),
  );
  assert.equal(out.results[1]!.result, "allowed", JSON.stringify(out.results[1]));
});

test("a value too long for its pattern's work limit is denied with the reason, never matched or passed over", async () => {
  const out = await checkJson(
    "work-limit",
    `apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedPodRestriction
metadata: {name: notes, namespace: team-a}
spec:
  metadata:
    annotations:
      values: {note: {regex: "[a-z ]{1,1000}"}}
`,
    [pod("long", `annotations: {note: "${"a".repeat(20_000)}"}`), pod("short", `annotations: {note: "a short note"}`)].join("---\n"),
  );
  assert.deepEqual(
    out.results.map((x) => [x.name, x.result, x.violations.map((v) => v.message.replace(/\d+ for a pattern of \d+/, "N for a pattern of M"))]),
    [
      ["long", "denied", ["a value of 20000 characters is too long to match against /[a-z ]{1,1000}/ (at most N for a pattern of M instructions)"]],
      ["short", "allowed", []],
    ],
  );
});

test(
  "JMESPath's trim_right in an imagePaths filter is judged at once on a long value (the library's own backtracks quadratically)",
  { timeout: 10_000 },
  async () => {
    // 200,000 spaces and an "x": the library's /(.*?)[\s]*$/ tries every split of the spaces.
    const name = `${" ".repeat(200_000)}x`;
    const out = await checkJson<{ results: Array<{ result: string; violations: Array<{ image: string; field: string; rule: string }> }> }>(
      "trim",
      `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: tasks}
spec:
  imagePaths: [{kinds: ["tekton.dev/v1/Task"], path: "{{ spec.steps[?trim_right(name) != ''] }}"}]
  rules: [{action: allow, images: ["registry.example.com/*"]}]
  default: deny
`,
      JSON.stringify({
        apiVersion: "tekton.dev/v1",
        kind: "Task",
        metadata: { name: "build", namespace: "ci" },
        spec: {
          steps: [
            { name, image: "evil.example/miner:1" },
            { name: "   ", image: "evil.example/unseen:1" },
          ],
        },
      }),
    );
    // The step whose name trims to something is selected; the one of spaces only is not.
    assert.deepEqual(
      out.results.map((x) => [x.result, x.violations.map((v) => [v.image, v.field, v.rule])]),
      [["denied", [["evil.example/miner:1", "spec.steps[0].image", "default"]]]],
    );
  },
);

test("patterns RE2 refuses (backreferences, look-around) are load errors with file, line, field and reason", async () => {
  const f = await files(
    "refused",
    `apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: accounts}
spec:
  spec:
    serviceAccountName: {regex: "(a)\\\\1"}
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: signed}
spec:
  breakGlass: {allowed: true, ticketPattern: "^INC-(?=[0-9])"}
  rules:
    - action: allow
      images: ["registry.example.com/*"]
      attestors: [{entries: [{keyless: {subjectRegExp: "^(?<!x)ops@", issuer: "https://accounts.example"}}]}]
  matchConditions:
    - {name: named, expression: "object.metadata.name.matches('a++')"}
`,
    pod("any", "serviceAccountName: x"),
  );
  const r = await imprimatur(["check", "--policies", f.policies, "-f", f.manifests]);
  assert.equal(r.code, 2, r.stdout);
  const lines = r.stderr.split("\n").map((l) => l.replace(f.policies, "P"));
  const expected = [
    "P:6 (document 1, spec.spec.serviceAccountName.regex): invalid regular expression (RE2 syntax): invalid escape sequence: `\\1`: RE2 has no backreferences",
    "P:12 (document 2, spec.breakGlass.ticketPattern): invalid regular expression (RE2 syntax): invalid or unsupported Perl syntax: `(?=`: RE2 has no look-around",
    "P:16 (document 2, spec.rules[0].attestors[0].entries[0].keyless.subjectRegExp): invalid regular expression (RE2 syntax): invalid named capture: `(?<!x)ops@`: RE2 has no look-around",
    "P:18 (document 2, spec.matchConditions[0].expression): ",
  ];
  for (const line of expected)
    assert.ok(
      lines.some((l) => l.trim().startsWith(line)),
      `${line}\nnot in\n${lines.join("\n")}`,
    );
  assert.match(r.stderr, /matchConditions\[0\]\.expression\): .*invalid regular expression \(RE2 syntax\): invalid nested repetition operator: `\+\+`/);
});
