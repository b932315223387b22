// applyBreakGlass (src/core/break-glass.ts) on its own: when an override is requested at all, each reason it is
// refused (with the exact violation a person reads), and the exact shape of an override that is granted.
import assert from "node:assert/strict";
import { test } from "node:test";
import { applyBreakGlass, breakGlassRequested, type BreakGlassInput, type BreakGlassPolicy } from "../../src/core/break-glass.ts";
import { deny, renderReason, type Violation } from "../../src/core/decision.ts";
import { compileLinearRegex, matchOutcome, MAX_MATCH_WORK } from "../../src/core/primitives/linear-regex.ts";

// Spelled out rather than imported: the annotation names are an interface users write.
const REASON = "break-glass.image-policy.k8s.io/reason";
const TICKET = "break-glass.image-policy.k8s.io/ticket";
const GIVEN = { [REASON]: "CVE hotfix", [TICKET]: "INC-42" };

const permissive: BreakGlassPolicy = { allowed: true, requiredAnnotations: [REASON, TICKET] };
const denial = (policy: string, image: string): Violation => ({ policy, rule: "default", image, message: "not allowed" });

function input(annotations: Record<string, string>, denials: BreakGlassInput["denials"], blocking: Violation[] = []): BreakGlassInput {
  return { annotations, namespace: "team-a", blocking, denials };
}

function breakGlassViolations(d: { violations: Violation[] }): Violation[] {
  return d.violations.filter((v) => v.rule === "breakGlass");
}

test("only annotations under the break-glass prefix request an override", () => {
  assert.equal(breakGlassRequested({}), false);
  assert.equal(breakGlassRequested({ team: "a", "example.com/reason": "x" }), false);
  assert.equal(breakGlassRequested({ team: "a", [REASON]: "x" }), true);
});

test("without a break-glass annotation the denial is returned as it is", () => {
  const v = denial("trusted", "docker.io/evil:1");
  const denied = deny([v], { warnings: ["w"] });
  for (const annotations of [{}, { team: "a", "example.com/ticket": "INC-1" }] as Array<Record<string, string>>) {
    assert.equal(applyBreakGlass(denied, input(annotations, [{ violation: v, policy: { name: "trusted", breakGlass: permissive } }])), denied);
  }
});

test("unrelated annotations next to complete break-glass annotations do not stop the override", () => {
  const v = denial("trusted", "docker.io/evil:1");
  const d = applyBreakGlass(deny([v]), input({ ...GIVEN, team: "a" }, [{ violation: v, policy: { name: "trusted", breakGlass: permissive } }]));
  assert.equal(d.allowed, true);
});

test("a granted override: no violations, an audited warning, the annotations and the overridden denials; passes kept", () => {
  const first = denial("trusted", "docker.io/evil:1");
  const second = denial("pinned", "docker.io/evil:2");
  const passes = [{ policy: "other", rule: "rules[0]", image: "registry.example.com/ok:1" }];
  const denied = deny([first, second], { warnings: ["earlier"], auditAnnotations: { kept: "yes" }, passes });
  const d = applyBreakGlass(
    denied,
    input({ [REASON]: " CVE hotfix ", [TICKET]: " INC-42\n" }, [
      { violation: first, policy: { name: "trusted", breakGlass: permissive } },
      { violation: second, policy: { name: "pinned", breakGlass: permissive } },
    ]),
  );
  const rendered = renderReason([first, second]);
  assert.deepEqual(d, {
    allowed: true,
    violations: [],
    warnings: [
      "earlier",
      `break-glass override (ticket INC-42): 2 image denial(s) set aside; the admission is recorded in the audit log (a dry run, or imprimatur check, records nothing): ${rendered}`,
    ],
    auditAnnotations: {
      kept: "yes",
      decision: "allowed-by-break-glass",
      "break-glass": "used",
      "break-glass-reason": "CVE hotfix",
      "break-glass-ticket": "INC-42",
      overridden: rendered,
    },
    breakGlass: { reason: "CVE hotfix", ticket: "INC-42", overridden: [first, second] },
    passes,
  });
});

test("a granted override without passes adds none", () => {
  const v = denial("trusted", "docker.io/evil:1");
  const d = applyBreakGlass(deny([v]), input(GIVEN, [{ violation: v, policy: { name: "trusted", breakGlass: permissive } }]));
  assert.equal(d.allowed, true);
  assert.equal("passes" in d, false);
});

test("a policy that does not allow overrides refuses, by name and namespace, even with every annotation given", () => {
  const v = denial("locked", "docker.io/evil:1");
  const d = applyBreakGlass(
    deny([v], { warnings: ["earlier"] }),
    input(GIVEN, [{ violation: v, policy: { name: "locked", breakGlass: { allowed: false, requiredAnnotations: [REASON, TICKET] } } }]),
  );
  assert.equal(d.allowed, false);
  assert.equal(d.breakGlass, undefined);
  const refusal = { policy: "locked", rule: "breakGlass", message: 'break-glass was requested but this policy does not allow overrides in namespace "team-a"' };
  assert.deepEqual(d.violations, [v, refusal]);
  assert.deepEqual(d.warnings, ["earlier"]);
  assert.equal(d.auditAnnotations["break-glass"], "refused");
  assert.equal(d.auditAnnotations.reason, renderReason([v, refusal]));
});

test("missing annotations are named, together with the full list the denying policies require", () => {
  const approver = "break-glass.image-policy.k8s.io/approver";
  const v = denial("trusted", "docker.io/evil:1");
  const d = applyBreakGlass(
    deny([v]),
    input({ [REASON]: "CVE hotfix" }, [
      { violation: v, policy: { name: "trusted", breakGlass: { allowed: true, requiredAnnotations: [REASON, TICKET, approver] } } },
    ]),
  );
  assert.equal(d.allowed, false);
  assert.deepEqual(breakGlassViolations(d), [
    {
      policy: "trusted",
      rule: "breakGlass",
      message: `break-glass needs every one of these annotations, non-empty: ${REASON}, ${TICKET}, ${approver}; missing: ${TICKET}, ${approver}`,
    },
  ]);
});

test("a ticket of the wrong form is refused, once per policy; a missing ticket is reported as missing, not as malformed", () => {
  const jira: BreakGlassPolicy = { allowed: true, requiredAnnotations: [REASON, TICKET], ticketPattern: /^[A-Z]+-[0-9]+$/ };
  const one = denial("jira", "docker.io/evil:1");
  const two = denial("jira", "docker.io/evil:2");
  const denials = [
    { violation: one, policy: { name: "jira", breakGlass: jira } },
    { violation: two, policy: { name: "jira", breakGlass: jira } },
  ];

  const wrong = applyBreakGlass(deny([one, two]), input({ [REASON]: "CVE hotfix", [TICKET]: "see slack" }, denials));
  assert.equal(wrong.allowed, false);
  assert.deepEqual(breakGlassViolations(wrong), [
    { policy: "jira", rule: "breakGlass", message: 'break-glass ticket "see slack" does not match the required form ^[A-Z]+-[0-9]+$' },
  ]);

  const missing = applyBreakGlass(deny([one, two]), input({ [REASON]: "CVE hotfix" }, denials));
  assert.deepEqual(
    breakGlassViolations(missing).map((v) => v.message),
    [`break-glass needs every one of these annotations, non-empty: ${REASON}, ${TICKET}; missing: ${TICKET}`],
  );

  assert.equal(applyBreakGlass(deny([one, two]), input(GIVEN, denials)).allowed, true);
});

test("every distinct refusal is reported: a refusing policy, a missing annotation and a blocking violation together", () => {
  const locked = denial("locked", "docker.io/evil:1");
  const trusted = denial("trusted", "docker.io/evil:2");
  const blocking = { policy: "imprimatur", rule: "imageReference", image: "UPPER/case:1", message: "invalid" };
  const d = applyBreakGlass(
    deny([locked, trusted, blocking]),
    input(
      { [REASON]: "CVE hotfix" },
      [
        { violation: locked, policy: { name: "locked", breakGlass: { allowed: false, requiredAnnotations: [REASON] } } },
        { violation: trusted, policy: { name: "trusted", breakGlass: permissive } },
      ],
      [blocking],
    ),
  );
  assert.deepEqual(
    breakGlassViolations(d).map((v) => [v.policy, v.message]),
    [
      ["locked", 'break-glass was requested but this policy does not allow overrides in namespace "team-a"'],
      ["locked", `break-glass needs every one of these annotations, non-empty: ${REASON}, ${TICKET}; missing: ${TICKET}`],
      ["imprimatur", "break-glass cannot override invalid image references or undecidable policies"],
    ],
  );
});

test("a refusal because of a namespaced policy names its kind, so the message says which policy of which namespace refused", () => {
  const v: Violation = { policy: "team-only", kind: "NamespacedImagePolicy", rule: "default", image: "docker.io/evil:1", message: "not allowed" };
  const namespaced = { name: "team-only", namespace: "team-a" };
  const refusing = applyBreakGlass(
    deny([v]),
    input(GIVEN, [{ violation: v, policy: { ...namespaced, breakGlass: { allowed: false, requiredAnnotations: [] } } }]),
  );
  const incomplete = applyBreakGlass(deny([v]), input({ [REASON]: "x" }, [{ violation: v, policy: { ...namespaced, breakGlass: permissive } }]));
  const badTicket = applyBreakGlass(
    deny([v]),
    input(GIVEN, [{ violation: v, policy: { ...namespaced, breakGlass: { ...permissive, ticketPattern: /^JIRA-\d+$/ } } }]),
  );
  for (const d of [refusing, incomplete, badTicket]) {
    assert.equal(d.allowed, false);
    assert.deepEqual(
      breakGlassViolations(d).map((b) => [b.policy, b.kind]),
      [["team-only", "NamespacedImagePolicy"]],
    );
  }
  // A cluster policy's refusal names no kind (ImagePolicy is the default).
  const cluster = applyBreakGlass(
    deny([v]),
    input(GIVEN, [{ violation: v, policy: { name: "team-only", breakGlass: { allowed: false, requiredAnnotations: [] } } }]),
  );
  assert.deepEqual(
    breakGlassViolations(cluster).map((b) => Object.hasOwn(b, "kind")),
    [false],
  );
});

test("a ticket too long to check against its pattern is refused with the reason, not as malformed and not as a match", () => {
  // The ticketPattern runs on the linear-time engine, which bounds instructions × characters per test.
  const compiled = compileLinearRegex("^[A-Z]{1,1000}-[0-9]{1,1000}$", "anywhere");
  assert.ok("regex" in compiled);
  const jira: BreakGlassPolicy = { allowed: true, requiredAnnotations: [REASON, TICKET], ticketPattern: compiled.regex };
  const v = denial("jira", "docker.io/evil:1");
  const ticket = `INC-${"4".repeat(MAX_MATCH_WORK / 1000)}`;
  const outcome = matchOutcome(compiled.regex, ticket);
  assert.ok(typeof outcome === "object", String(outcome));
  const d = applyBreakGlass(deny([v]), input({ [REASON]: "CVE hotfix", [TICKET]: ticket }, [{ violation: v, policy: { name: "jira", breakGlass: jira } }]));
  assert.equal(d.allowed, false);
  assert.deepEqual(breakGlassViolations(d), [{ policy: "jira", rule: "breakGlass", message: `break-glass ticket cannot be checked: ${outcome.error}` }]);
  assert.match(outcome.error, new RegExp(`^a value of ${ticket.length} characters is too long to match against /`));
});

test("failures that only warn or audit (advisories) are kept whether the override is granted or refused; a refusal keeps the passes", () => {
  const v = denial("trusted", "docker.io/evil:1");
  const advisory: Violation = { policy: "audited", rule: "rules[0]", image: "docker.io/evil:1", message: "would be denied" };
  const passes = [{ policy: "other", rule: "rules[0]", image: "registry.example.com/ok:1" }];
  const denied = deny([v], { advisories: [advisory], passes });
  const granted = applyBreakGlass(denied, input(GIVEN, [{ violation: v, policy: { name: "trusted", breakGlass: permissive } }]));
  assert.equal(granted.allowed, true);
  assert.deepEqual(granted.advisories, [advisory]);
  const refused = applyBreakGlass(
    denied,
    input(GIVEN, [{ violation: v, policy: { name: "trusted", breakGlass: { allowed: false, requiredAnnotations: [REASON, TICKET] } } }]),
  );
  assert.equal(refused.allowed, false);
  assert.deepEqual(refused.advisories, [advisory]);
  assert.deepEqual(refused.passes, passes);
});
