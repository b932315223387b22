// `check` and `imprimatur test` show failures set to Warn or Audit apart from denials: their own lines in text,
// validationActions in json, counts in the summary; they do not fail the check, and PolicyTest expects them with
// `result: warned` / `result: audited`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { reportObject, renderText, summarize } from "../../../src/cli/check-report.ts";
import { checkManifests, offlineChecker } from "../../../src/cli/offline-engine.ts";
import { judge, type Expectation } from "../../../src/cli/policy-test.ts";

const POLICIES = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: registries}
spec:
  validationActions: [Warn]
  rules:
    - {action: allow, images: ["registry.example.com/*"]}
    - {action: deny, images: ["quay.io/*"], message: quay is retired, validationActions: [Deny]}
  default: deny
  defaultMessage: use registry.example.com
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: hardening}
spec:
  validationActions: [Audit]
  checks:
    - name: privileged
      spec:
        containers: [{securityContext: {privileged: {allowNil: true, require: false}}}]
`;

const MANIFESTS = `
apiVersion: v1
kind: Pod
metadata: {name: warned}
spec: {containers: [{name: a, image: docker.io/library/nginx:1.25}]}
---
apiVersion: v1
kind: Pod
metadata: {name: audited}
spec: {containers: [{name: a, image: registry.example.com/app:1, securityContext: {privileged: true}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: denied}
spec: {containers: [{name: a, image: quay.io/app:1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: clean}
spec: {containers: [{name: a, image: registry.example.com/app:1}]}
`;

async function judged() {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-advisories-"));
  try {
    await writeFile(join(dir, "policies.yaml"), POLICIES);
    await writeFile(join(dir, "pods.yaml"), MANIFESTS);
    const checker = await offlineChecker({ policies: [join(dir, "policies.yaml")], profiles: [], allowEmpty: false, config: undefined, namespaces: undefined });
    const problems: string[] = [];
    const results = await checkManifests(checker, [join(dir, "pods.yaml")], false, problems);
    assert.deepEqual(problems, []);
    return results.map((r) => ({ ...r, file: "pods.yaml" }));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test("text: warn and audit lines apart from denials, counted in the summary; only the denial is a failure", async () => {
  const results = await judged();
  assert.deepEqual(renderText(results).trimEnd().split("\n"), [
    "pods.yaml default/Pod/warned: allowed",
    'pods.yaml default/Pod/warned: warn: image "docker.io/library/nginx:1.25" (spec.containers[0].image) violates policy registries default: use registry.example.com',
    "pods.yaml default/Pod/audited: allowed",
    "pods.yaml default/Pod/audited: audit: spec.containers[0].securityContext.privileged violates PodRestriction hardening privileged: is true; must be false",
    'pods.yaml default/Pod/denied: denied: image "quay.io/app:1" (spec.containers[0].image) denied by policy registries rules[1]: quay is retired',
    "pods.yaml default/Pod/clean: allowed",
    "4 objects: 3 allowed, 1 denied, 0 skipped; 1 warned, 1 audited",
  ]);
  const s = summarize(results);
  assert.equal(s.denied, 1, "exit 1 comes from the denial only");
});

test("json: every failure carries its validationActions; advisories are listed apart from violations", async () => {
  const report = reportObject(await judged(), []);
  const byName = new Map(report.results.map((r) => [r.name, r]));
  assert.deepEqual(byName.get("warned")?.violations, []);
  assert.deepEqual(
    byName.get("warned")?.advisories?.map((a) => [a.policy, a.rule, a.validationActions]),
    [["registries", "default", ["Warn"]]],
  );
  assert.deepEqual(
    byName.get("audited")?.advisories?.map((a) => [a.policyKind, a.rule, a.validationActions]),
    [["PodRestriction", "privileged", ["Audit"]]],
  );
  assert.deepEqual(
    byName.get("denied")?.violations.map((v) => v.validationActions),
    [["Deny"]],
  );
  assert.equal(byName.get("clean")?.advisories, undefined);
  assert.deepEqual(byName.get("warned")?.warnings, [], "the Warn failure is reported once, as an advisory");
  assert.equal(report.summary.warned, 1);
  assert.equal(report.summary.audited, 1);
});

test("PolicyTest: warned and audited are met by an admitted object with such a failure, of the policy and rule named", async () => {
  const results = await judged();
  const of = (name: string) => results.find((r) => r.name === name)!;
  const expect = (result: Expectation["result"], extra: Partial<Expectation> = {}): Expectation => ({
    index: 0,
    resource: "Pod/x",
    kind: "Pod",
    name: "x",
    result,
    ...extra,
  });
  assert.equal(judge(expect("warned"), of("warned")), undefined);
  assert.equal(judge(expect("warned", { policy: "registries", rule: "default" }), of("warned")), undefined);
  assert.equal(judge(expect("allowed"), of("warned")), undefined, "a warned object is admitted");
  assert.equal(judge(expect("audited", { policy: "hardening" }), of("audited")), undefined);
  assert.equal(
    judge(expect("warned", { policy: "hardening" }), of("audited")),
    "allowed, but not warned by hardening: its failures set to Warn or Audit are hardening privileged (Audit)",
  );
  assert.equal(judge(expect("warned"), of("clean")), "allowed, but not warned: no failure set to Warn or Audit");
  assert.equal(judge(expect("warned"), of("denied")), "expected warned, got denied (1 violation)");
});
