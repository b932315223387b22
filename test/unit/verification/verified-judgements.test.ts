// Judgements of verified data kept with the verification result (src/core/image-policy/verified-judgements.ts):
// a repeat admission of a cached verification runs no condition and no CEL, yet every answer is the one judging
// again would give — the clock, the request's cost budget and the deadline included.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CostBudget } from "../../../src/core/conditions/cost-meter.ts";
import { withEvaluationDeadline } from "../../../src/core/conditions/evaluation-deadline.ts";
import { evaluateImagePolicies } from "../../../src/core/image-policy/image-policy.ts";
import { CLOCK_REUSE_MS, judgeVerified } from "../../../src/core/image-policy/verified-judgements.ts";
import { verificationKey, type ImageVerification } from "../../../src/core/verification-results.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";

const SLSA = "https://slsa.dev/provenance/v1";
const VULN = "https://cosign.sigstore.dev/attestation/vuln/v1";
const DIGEST = `sha256:${"c".repeat(64)}`;
const IMAGE = `registry.example.com/app@${DIGEST}`;
const NOW = Date.parse("2025-06-01T12:00:00Z");
const SIGNER = [{ entry: "attestors[0].entries[0]", attestor: "keyless", signer: "subject s issuer i", format: "sigstore-bundle" }];
const GOOD_BUILD = "https://actions.github.io/buildtypes/workflow/v1";

const policyText = (checks: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: built}
spec:
  rules:
    - action: allow
      images: ["registry.example.com/*"]
      attestations:
${checks}
      validate:
        cel: "attestations['${SLSA}'].size() > 0"
  default: deny
`;
const BUILD_CHECK = `        - predicateType: ${SLSA}
          attestors: [{entries: [{keyless: {subject: s, issuer: i}}]}]
          conditions:
            - all: [{key: "{{ buildDefinition.buildType }}", operator: Equals, value: "${GOOD_BUILD}"}]
          cel: "predicate.buildDefinition.buildType.startsWith('https://')"
`;
const SCAN_AGE_CHECK = `        - predicateType: ${VULN}
          attestors: [{entries: [{keyless: {subject: s, issuer: i}}]}]
          conditions:
            - all: [{key: "{{ time_since('', metadata.scanFinishedOn, '') }}", operator: LessThan, value: 24h}]
`;

/** A predicate whose every property read is counted: a judgement that runs reads it, a kept one does not. */
function counted(predicate: Record<string, unknown>): { predicate: Record<string, unknown>; reads: () => number } {
  let reads = 0;
  const wrap = (o: Record<string, unknown>): Record<string, unknown> =>
    new Proxy(o, {
      get(target, key, receiver) {
        reads++;
        const value = Reflect.get(target, key, receiver) as unknown;
        return value !== null && typeof value === "object" ? wrap(value as Record<string, unknown>) : value;
      },
    });
  return { predicate: wrap(predicate), reads: () => reads };
}

function verified(statements: Array<{ predicateType: string; predicate: Record<string, unknown> }>): ImageVerification {
  return {
    status: "verified",
    digest: DIGEST,
    evidence: [],
    attestations: [SLSA, VULN].map((type, index) => ({
      index,
      predicateType: type,
      statements: statements.filter((s) => s.predicateType === type).map((statement) => ({ statement, signers: SIGNER })),
      failures: [],
    })),
  };
}

function admit(text: string, result: ImageVerification, now: number, image = IMAGE) {
  const { policies, errors } = parsePolicyText(text, "p.yaml");
  assert.deepEqual(errors, []);
  return evaluateImagePolicies(
    policies.ImagePolicy,
    { namespace: "shop", annotations: {}, images: [{ image }] },
    { verifications: new Map([[verificationKey("built", 0, image), result]]), now },
  );
}

test("a repeat admission of the same cached verification runs no condition and no CEL, and answers as the first did", () => {
  const text = policyText(BUILD_CHECK);
  const { policies } = parsePolicyText(text, "p.yaml");
  const good = counted({ buildDefinition: { buildType: GOOD_BUILD } });
  const result = verified([{ predicateType: SLSA, predicate: good.predicate }]);
  const evaluate = (now: number, image = IMAGE) =>
    evaluateImagePolicies(
      policies.ImagePolicy,
      { namespace: "shop", annotations: {}, images: [{ image }] },
      { verifications: new Map([[verificationKey("built", 0, image), result]]), now },
    );
  assert.equal(evaluate(NOW).allowed, true);
  const afterFirst = good.reads();
  assert.ok(afterFirst > 0, "the first admission judges the statement");
  // Without time_since, a judgement holds whatever the time: an hour later, or earlier, it is reused.
  for (const now of [NOW, NOW + 3600e3, NOW - 1]) assert.equal(evaluate(now).allowed, true);
  assert.equal(good.reads(), afterFirst, "later admissions read nothing of the statement");

  // A failing judgement is kept and given again, word for word.
  const bad = counted({ buildDefinition: { buildType: "https://evil.example/build" } });
  const denied = verified([{ predicateType: SLSA, predicate: bad.predicate }]);
  const denials = [0, 1].map(() => admit(text, denied, NOW).violations.map((v) => v.message));
  assert.match(denials[0]![0]!, /conditions\[0\]\.all\[0\]: "https:\/\/evil\.example\/build" is not Equals/);
  assert.deepEqual(denials[1], denials[0]);

  // Another image name of the same result (a tag beside the digest: CEL sees the tag) is judged on its own.
  const tagged = `registry.example.com/app:v1@${DIGEST}`;
  assert.equal(evaluate(NOW, tagged).allowed, true);
  assert.ok(good.reads() > afterFirst, "another image name is judged");
  // Another policy set (a reload: new rule objects) judges again, even with the same result object.
  const beforeReload = good.reads();
  assert.equal(admit(text, result, NOW).allowed, true);
  assert.ok(good.reads() > beforeReload, "a reloaded rule judges again");
});

test("a judgement that read the admission's time stands for at most a second, and only forwards", () => {
  const text = policyText(BUILD_CHECK + SCAN_AGE_CHECK);
  const { policies } = parsePolicyText(text, "p.yaml");
  // Stale two seconds after NOW.
  const scan = counted({ metadata: { scanFinishedOn: new Date(NOW - 24 * 3600e3 + 2_000).toISOString() } });
  const result = verified([
    { predicateType: SLSA, predicate: { buildDefinition: { buildType: GOOD_BUILD } } },
    { predicateType: VULN, predicate: scan.predicate },
  ]);
  const evaluate = (now: number) =>
    evaluateImagePolicies(
      policies.ImagePolicy,
      { namespace: "shop", annotations: {}, images: [{ image: IMAGE }] },
      { verifications: new Map([[verificationKey("built", 0, IMAGE), result]]), now },
    );
  assert.equal(evaluate(NOW).allowed, true);
  const reads = scan.reads();
  assert.equal(evaluate(NOW + CLOCK_REUSE_MS - 1).allowed, true);
  assert.equal(scan.reads(), reads, "reused within the second");
  assert.equal(evaluate(NOW - 1).allowed, true);
  assert.ok(scan.reads() > reads, "an earlier time is judged again");
  // Judged again at NOW - 1; a second after that judgement it is judged again, and the scan has gone stale.
  const late = evaluate(NOW + 2_500);
  assert.equal(late.allowed, false);
  assert.match(late.violations[0]!.message, /"24h0m0.5s" is not LessThan "24h"/);
});

test("a kept judgement takes its cost from the request's budget, and is judged again when less is left", () => {
  let runs = 0;
  const judge = (budget: CostBudget, cost: number, failure?: string) => () => {
    runs++;
    budget.remaining -= cost;
    return failure;
  };
  const result = {};
  const rule = {};
  const first = new CostBudget(1_000, "test");
  assert.equal(judgeVerified(result, rule, IMAGE, NOW, first, judge(first, 300, "no")), "no");
  assert.equal(first.remaining, 700);
  const second = new CostBudget(1_000, "test");
  assert.equal(judgeVerified(result, rule, IMAGE, NOW, second, judge(second, 300)), "no");
  assert.equal([runs, second.remaining].join(), "1,700", "kept: not run, its cost taken");
  const short = new CostBudget(1_000, "test");
  short.remaining = 299;
  assert.equal(judgeVerified(result, rule, IMAGE, NOW, short, judge(short, 100)), "");
  assert.equal(runs, 2, "with less left than it cost, judged again");
  const enough = new CostBudget(1_000, "test");
  enough.remaining = 100;
  assert.equal(judgeVerified(result, rule, IMAGE, NOW, enough, judge(enough, 100, "x")), "", "the new judgement is the one kept");
  assert.equal([runs, enough.remaining].join(), "2,0");
  // Rules and image names are told apart.
  assert.equal(
    judgeVerified(result, {}, IMAGE, NOW, new CostBudget(1_000, "t"), () => "other rule"),
    "other rule",
  );
  assert.equal(
    judgeVerified(result, rule, `${IMAGE}x`, NOW, new CostBudget(1_000, "t"), () => "other image"),
    "other image",
  );
  assert.equal(
    judgeVerified(result, rule, IMAGE, NOW, new CostBudget(1_000, "t"), () => "unused"),
    "",
  );
});

test("a judgement ended by a cost limit or the review's deadline is never kept", () => {
  let runs = 0;
  const result = {};
  const rule = {};
  const ended = (budget: CostBudget) => () => {
    runs++;
    budget.endings++;
    return "running out of cost budget";
  };
  const budget = new CostBudget(1_000, "test");
  assert.equal(judgeVerified(result, rule, IMAGE, NOW, budget, ended(budget)), "running out of cost budget");
  assert.equal(
    judgeVerified(result, rule, IMAGE, NOW, budget, () => (runs++, undefined)),
    "",
  );
  assert.equal(runs, 2);
  const past = withEvaluationDeadline(
    () => true,
    () => judgeVerified({}, rule, IMAGE, NOW, new CostBudget(1_000, "t"), () => "past the deadline"),
  );
  assert.equal(past, "past the deadline");
  const again = {};
  withEvaluationDeadline(
    () => true,
    () => judgeVerified(again, rule, IMAGE, NOW, new CostBudget(1_000, "t"), () => "past the deadline"),
  );
  assert.equal(
    judgeVerified(again, rule, IMAGE, NOW, new CostBudget(1_000, "t"), () => undefined),
    "",
    "judged again once in time",
  );
});

test("a judgement that read the time without being given one is not kept; a result keeps a bounded number of judgements", () => {
  const text = policyText(BUILD_CHECK + SCAN_AGE_CHECK);
  const { policies } = parsePolicyText(text, "p.yaml");
  const result = verified([
    { predicateType: SLSA, predicate: { buildDefinition: { buildType: GOOD_BUILD } } },
    { predicateType: VULN, predicate: { metadata: { scanFinishedOn: new Date(NOW).toISOString() } } },
  ]);
  const evaluate = () =>
    evaluateImagePolicies(
      policies.ImagePolicy,
      { namespace: "shop", annotations: {}, images: [{ image: IMAGE }] },
      { verifications: new Map([[verificationKey("built", 0, IMAGE), result]]) },
    );
  assert.match(evaluate().violations[0]!.message, /the current time was not given/);
  assert.equal(
    evaluateImagePolicies(
      policies.ImagePolicy,
      { namespace: "shop", annotations: {}, images: [{ image: IMAGE }] },
      {
        verifications: new Map([[verificationKey("built", 0, IMAGE), result]]),
        now: NOW,
      },
    ).allowed,
    true,
    "given the time later, it is judged with it",
  );

  const many = {};
  const rule = {};
  let runs = 0;
  for (let i = 0; i < 40; i++) judgeVerified(many, rule, `image-${i}`, NOW, new CostBudget(1_000, "t"), () => (runs++, undefined));
  judgeVerified(many, rule, "image-39", NOW, new CostBudget(1_000, "t"), () => (runs++, undefined));
  assert.equal(runs, 40, "the newest is kept");
  judgeVerified(many, rule, "image-0", NOW, new CostBudget(1_000, "t"), () => (runs++, undefined));
  assert.equal(runs, 41, "the oldest made room");
});
