// PolicyExceptions through the engine, as every entry point reaches them (/validate, /mutate, check, the scan):
// what loads, which requests an exception selects and what it sets aside, that nothing is set aside outside the
// honoured namespaces or for the request's own problems, and that every use is warned of, audited and reported.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { subjectOfObject } from "../../../src/core/admission-subject.ts";
import type { Decision } from "../../../src/core/decision.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { auditPod } from "../../../src/scan/pod-audit.ts";
import { FakeRegistry, testTls } from "../registry/fake-registry.ts";
import { mutateSubject, validateSubject } from "../../support/engine-review.ts";

const POLICIES = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: pinned-versions}
spec:
  rules:
    - {action: allow, images: ["*@sha256:*"]}
    - {action: deny, images: ["*:latest"], message: "pin a version"}
    - {action: deny, images: ["blocked.example/*"], message: "blocked registry"}
  default: allow
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: warn-only}
spec:
  validationActions: [Warn]
  rules: [{action: deny, images: ["warned.example/*"], message: "warned registry"}]
  default: allow
`;

function exception(spec: string, namespace = "policy-exceptions", name = "legacy"): string {
  return `---\napiVersion: imprimatur.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: ${name}, namespace: ${namespace}}\nspec:\n${spec}`;
}

const LEGACY = exception(`  exceptions: [{policyName: pinned-versions, ruleNames: ["rules[1]"]}]
  match:
    any:
      - resources: {kinds: [Pod], namespaces: [batch], names: ["nightly-*"], selector: {matchLabels: {team: reports}}}
`);

async function engineWith(t: TestContext, text: string, exceptionNamespaces: string[] = ["policy-exceptions"], auditLogPath?: string) {
  const parsed = parsePolicyText(text, "policies.yaml");
  assert.deepEqual(parsed.errors, []);
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-exceptions-"));
  const engine = await buildEngine({
    config: structuredClone(DEFAULT_SERVER_CONFIG),
    policies: parsed.policies,
    offline: true,
    exceptionNamespaces,
    auditLogPath: auditLogPath ?? join(dir, "audit.jsonl"),
  });
  t.after(async () => {
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { engine, auditLog: auditLogPath ?? join(dir, "audit.jsonl") };
}

function pod(opts: { name?: string; namespace?: string; labels?: Record<string, string>; images: string[]; kind?: string }) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: opts.name ?? "nightly-report", namespace: opts.namespace ?? "batch", labels: opts.labels ?? { team: "reports" } },
    spec: { containers: opts.images.map((image, i) => ({ name: `c${i}`, image })) },
  };
}

async function validate(engine: Engine, object: Record<string, unknown>, dryRun = true): Promise<Decision> {
  const plan = subjectOfObject(object);
  assert.ok(plan.review);
  return validateSubject(engine, plan.subject, { endpoint: "validate", deadline: Date.now() + 5_000, uid: "u1", dryRun });
}

test("an honoured exception sets aside the rule it names for the pod it selects: admitted, with a warning and the annotation", async (t) => {
  const { engine } = await engineWith(t, POLICIES + LEGACY);
  const d = await validate(engine, pod({ images: ["reports:latest"] }));
  assert.equal(d.allowed, true);
  assert.deepEqual(d.violations, []);
  assert.equal(d.exemptions?.length, 1);
  assert.equal(d.exemptions![0]!.exception, "policy-exceptions/legacy");
  assert.equal(d.exemptions![0]!.violation.rule, "rules[1]");
  assert.deepEqual(d.warnings, [
    'set aside by PolicyException policy-exceptions/legacy: image "reports:latest" (spec.containers[0].image) violates policy pinned-versions rules[1]: pin a version',
  ]);
  assert.equal(d.auditAnnotations["policy-exceptions"], "policy-exceptions/legacy");
  assert.equal(d.auditAnnotations.decision, undefined, "not denied");
});

test("not honoured: the same exception in a namespace serve does not name, or with no namespace named at all, sets nothing aside", async (t) => {
  for (const namespaces of [["elsewhere"], []]) {
    const { engine } = await engineWith(t, POLICIES + LEGACY, namespaces);
    const d = await validate(engine, pod({ images: ["reports:latest"] }));
    assert.equal(d.allowed, false, namespaces.join(","));
    assert.equal(d.exemptions, undefined);
  }
});

test("every field of a filter must match: another kind, namespace, name or label and the denial stands", async (t) => {
  const { engine } = await engineWith(t, POLICIES + LEGACY);
  const misses = [
    pod({ namespace: "other", images: ["reports:latest"] }),
    pod({ name: "adhoc", images: ["reports:latest"] }),
    pod({ labels: { team: "web" }, images: ["reports:latest"] }),
    {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "nightly-job", namespace: "batch", labels: { team: "reports" } },
      spec: { template: { spec: { containers: [{ name: "c", image: "reports:latest" }] } } },
    },
  ];
  for (const object of misses) {
    const d = await validate(engine, object);
    assert.equal(d.allowed, false, JSON.stringify((object as { metadata: unknown }).metadata));
    assert.equal(d.exemptions, undefined);
  }
});

test("any: one filter is enough; all: each filter must match", async (t) => {
  const any = exception(`  exceptions: [{policyName: pinned-versions}]
  match:
    any:
      - resources: {names: [nothing-*]}
      - resources: {namespaces: ["ba?ch"]}
`);
  const all = exception(
    `  exceptions: [{policyName: pinned-versions}]
  match:
    all:
      - resources: {namespaces: [batch]}
      - resources: {names: [nothing-*]}
`,
    "policy-exceptions",
    "all-of-them",
  );
  const { engine } = await engineWith(t, POLICIES + any);
  assert.equal((await validate(engine, pod({ images: ["reports:latest"] }))).allowed, true);
  const second = await engineWith(t, POLICIES + all);
  assert.equal((await validate(second.engine, pod({ images: ["reports:latest"] }))).allowed, false);
});

test("ruleNames narrows: another rule of the same policy still denies, and the exempted one is still warned of", async (t) => {
  const { engine } = await engineWith(t, POLICIES + LEGACY);
  const d = await validate(engine, pod({ images: ["reports:latest", "blocked.example/x:1"] }));
  assert.equal(d.allowed, false);
  assert.deepEqual(
    d.violations.map((v) => v.rule),
    ["rules[2]"],
  );
  assert.deepEqual(
    d.exemptions?.map((x) => x.violation.rule),
    ["rules[1]"],
  );
  assert.equal(d.auditAnnotations.decision, "denied");
});

test("kind narrows: an exception for a PodRestriction of that name does not set aside the ImagePolicy", async (t) => {
  const { engine } = await engineWith(
    t,
    POLICIES +
      exception(`  exceptions: [{policyName: pinned-versions, kind: PodRestriction}]
  match: {any: [{resources: {namespaces: [batch]}}]}
`),
  );
  assert.equal((await validate(engine, pod({ images: ["reports:latest"] }))).allowed, false);
  const imagePolicy = await engineWith(
    t,
    POLICIES +
      exception(`  exceptions: [{policyName: pinned-versions, kind: ImagePolicy}]
  match: {any: [{resources: {namespaces: [batch]}}]}
`),
  );
  assert.equal((await validate(imagePolicy.engine, pod({ images: ["reports:latest"] }))).allowed, true);
});

test("the request's own problems are never set aside: an invalid image reference is denied under an exception for every policy", async (t) => {
  const { engine } = await engineWith(
    t,
    POLICIES +
      exception(`  exceptions: [{policyName: pinned-versions}, {policyName: warn-only}]
  match: {any: [{resources: {namespaces: [batch]}}]}
`),
  );
  const d = await validate(engine, pod({ images: ["Not A Reference"] }));
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]!.policy, "imprimatur");
});

test("a Warn failure set aside no longer warns as a failure; it is said as set aside", async (t) => {
  const { engine } = await engineWith(
    t,
    POLICIES +
      exception(`  exceptions: [{policyName: warn-only}]
  match: {any: [{resources: {namespaces: [batch]}}]}
`),
  );
  const d = await validate(engine, pod({ images: ["warned.example/app:1"] }));
  assert.equal(d.allowed, true);
  assert.equal(d.advisories, undefined);
  assert.deepEqual(d.warnings, [
    'set aside by PolicyException policy-exceptions/legacy: image "warned.example/app:1" (spec.containers[0].image) violates policy warn-only rules[0]: warned registry',
  ]);
});

test("an admission under an exception is written to the audit log before the answer; a log that cannot be written denies", async (t) => {
  const { engine, auditLog } = await engineWith(t, POLICIES + LEGACY);
  const d = await validate(engine, pod({ images: ["reports:latest"] }), false);
  assert.equal(d.allowed, true);
  const records = (await readFile(auditLog, "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.equal(records.length, 1);
  assert.equal(records[0]!.event, "policy-exception");
  assert.deepEqual(records[0]!.exceptions, ["policy-exceptions/legacy"]);
  assert.equal((records[0]!.setAside as Array<{ violation: { rule: string } }>)[0]!.violation.rule, "rules[1]");
  assert.equal(records[0]!.name, "nightly-report");
  assert.equal(records[0]!.namespace, "batch");

  const dryRun = await validate(engine, pod({ images: ["reports:latest"] }), true);
  assert.equal(dryRun.allowed, true);
  assert.equal((await readFile(auditLog, "utf8")).trim().split("\n").length, 1, "a dry run leaves no record");

  const unwritable = await engineWith(t, POLICIES + LEGACY, ["policy-exceptions"], "/proc/imprimatur-cannot-write/audit.jsonl");
  const refused = await validate(unwritable.engine, pod({ images: ["reports:latest"] }), false);
  assert.equal(refused.allowed, false);
  assert.equal(refused.violations[0]!.rule, "auditLog");
});

test("the scan reports a failure set aside as skip, naming the exception", async (t) => {
  // A running pod is judged by the digests it runs (so pinned-versions' digest rule would allow it): a registry rule.
  const { engine } = await engineWith(
    t,
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: no-blocked}
spec:
  rules: [{action: deny, images: ["blocked.example/*"], message: "blocked registry"}]
  default: allow
` +
      exception(`  exceptions: [{policyName: no-blocked}]
  match: {any: [{resources: {kinds: [Pod], names: ["nightly-*"]}}]}
`),
  );
  const running = (name: string) => ({
    ...pod({ name, images: ["blocked.example/reports:1"] }),
    metadata: { name, namespace: "batch", uid: `u-${name}`, labels: { team: "reports" } },
    status: { containerStatuses: [{ name: "c0", image: "blocked.example/reports:1", imageID: `blocked.example/reports@sha256:${"a".repeat(64)}` }] },
  });
  const exempted = await auditPod(engine, running("nightly-report"));
  assert.deepEqual(
    exempted.results.map((r) => [r.policy, r.rule, r.result]),
    [["no-blocked", "rules[0]", "skip"]],
  );
  assert.match(exempted.results[0]!.message, /^set aside by PolicyException policy-exceptions\/legacy: blocked registry$/);
  assert.equal(exempted.denials, 0);
  const other = await auditPod(engine, running("adhoc"));
  assert.deepEqual(
    other.results.map((r) => [r.rule, r.result]),
    [["rules[0]", "fail"]],
  );
});

test("what does not load: no namespace, the request-level policy named, a filter with no field, an unknown field, a bad selector", () => {
  const load = (spec: string, namespace?: string) =>
    parsePolicyText(
      `apiVersion: imprimatur.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: x${namespace === undefined ? "" : `, namespace: ${namespace}`}}\nspec:\n${spec}`,
      "x.yaml",
    ).errors.map((e) => `${e.path ?? ""}: ${e.message}`);
  const fine = `  exceptions: [{policyName: p}]\n  match: {any: [{resources: {kinds: [Pod]}}]}\n`;
  assert.deepEqual(load(fine, "ok"), []);
  assert.match(load(fine).join("\n"), /metadata\.namespace: missing required field "namespace": a PolicyException is honoured only/);
  assert.match(
    load(`  exceptions: [{policyName: imprimatur}]\n  match: {any: [{resources: {kinds: [Pod]}}]}\n`, "ok").join("\n"),
    /names the request's own problems/,
  );
  assert.match(load(`  exceptions: [{policyName: p}]\n  match: {any: [{resources: {}}]}\n`, "ok").join("\n"), /spec\.match\.any\[0\]\.resources: /);
  assert.match(load(`  exceptions: [{policyName: p}]\n  match: {}\n`, "ok").join("\n"), /spec\.match: /);
  assert.match(load(`  exceptions: [{policyName: p, rules: [x]}]\n  match: {any: [{resources: {kinds: [Pod]}}]}\n`, "ok").join("\n"), /unknown field "rules"/);
  assert.match(
    load(`  exceptions: [{policyName: p}]\n  match: {any: [{resources: {selector: {matchLabels: {"bad key!": x}}}}]}\n`, "ok").join("\n"),
    /spec\.match\.any\[0\]\.resources\.selector\.matchLabels/,
  );
  assert.match(load(`  exceptions: []\n  match: {any: [{resources: {kinds: [Pod]}}]}\n`, "ok").join("\n"), /spec\.exceptions: /);
});

test("/mutate: a pin that fails under a rule an exception sets aside does not deny; the image goes through unpinned", async (t) => {
  const registry = await FakeRegistry.start({ https: true }); // holds nothing: every tag is unknown
  const { caPem } = await testTls();
  const text = (withException: boolean) =>
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: pin}
spec:
  rules: [{action: allow, images: ["${registry.host}/*"], digestMutate: true}]
  default: allow
` +
    (withException
      ? exception(`  exceptions: [{policyName: pin}]
  match: {any: [{resources: {names: ["nightly-*"]}}]}
`)
      : "");
  const mutate = async (withException: boolean) => {
    const parsed = parsePolicyText(text(withException), "policies.yaml");
    assert.deepEqual(parsed.errors, []);
    const engine = await buildEngine({
      config: structuredClone(DEFAULT_SERVER_CONFIG),
      policies: parsed.policies,
      exceptionNamespaces: ["policy-exceptions"],
      registries: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]),
    });
    t.after(() => engine.close());
    const plan = subjectOfObject(pod({ images: [`${registry.host}/team/app:1`] }));
    assert.ok(plan.review);
    return mutateSubject(engine, plan.subject, { endpoint: "mutate", deadline: Date.now() + 10_000, dryRun: true });
  };
  t.after(() => registry.close());
  const refused = await mutate(false);
  assert.equal(refused?.allowed, false, "without the exception the unknown tag denies");
  const admitted = await mutate(true);
  assert.equal(admitted?.allowed, true);
  assert.equal(admitted?.patches, undefined, "nothing pinned");
  assert.equal(admitted?.exemptions?.[0]?.exception, "policy-exceptions/legacy");
});
