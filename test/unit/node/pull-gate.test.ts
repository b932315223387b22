// The judgement of one pull (src/node/pull-gate.ts) with the node's engine, online, over policies that need no
// registry (patterns, scopes, validationActions) and references that name their digest, a registry that gives no
// answer (nothing listens at 127.0.0.1:9) or an in-process one (test/unit/registry/fake-registry.ts); what the gate
// asks the engine, and what it makes of answers a real engine gives only with remote backends, with a stand-in
// engine. Signatures, tags resolved with the pull's credentials and moved tags are judged against a real registry
// in test/e2e/pull-gate.test.ts.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pino, type Logger } from "pino";
import { AuditLog } from "../../../src/audit/audit-log.ts";
import { allow, type Decision } from "../../../src/core/decision.ts";
import type { PullingPod } from "../../../src/core/pull-verification/pull-subject.ts";
import type { CredentialLookup } from "../../../src/credentials/credential.ts";
import type { AdmissionCall } from "../../../src/engine/admission-call.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import type { Engine } from "../../../src/engine/engine.ts";
import type { Reviewable } from "../../../src/engine/review-routing.ts";
import { buildNodeEngine, nodePolicySet, nodeServerConfig } from "../../../src/node/node-engine.ts";
import { PullGate, type PullVerdict } from "../../../src/node/pull-gate.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { registrySettingsMap, type RegistrySettings } from "../../../src/registry/registry-settings.ts";
import { FakeRegistry, imageManifest } from "../registry/fake-registry.ts";

const DIGEST = `sha256:${"c".repeat(64)}`;
const SILENT = "127.0.0.1:9";
const POLICIES = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: trusted}
spec:
  rules:
    - {action: allow, images: ["registry.example.com/*", "${SILENT}/*"]}
  default: deny
  defaultMessage: only registry.example.com
---
apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: {name: not-here, namespace: team-a}
spec:
  rules: [{action: deny, images: ["registry.example.com/team-b/*"], message: team-b's image}]
  default: allow
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: audited}
spec:
  matchConstraints: {objectSelector: {matchLabels: {app: audited}}}
  validationActions: [Audit]
  rules: [{action: deny, images: ["registry.example.com/audited/*"], message: would be refused}]
  default: allow
---
apiVersion: imprimatur.dev/v1alpha1
kind: PolicyException
metadata: {name: legacy-batch, namespace: policy-exceptions}
spec:
  exceptions: [{policyName: trusted}]
  match:
    any: [{resources: {kinds: [Pod], namespaces: [batch], selector: {matchLabels: {app: legacy}}}}]
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: prod-only}
spec:
  clusters: [prod]
  rules: [{action: deny, images: ["registry.example.com/staging/*"], message: not in prod}]
  default: allow
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: kubelet-labels}
spec:
  matchConstraints: {objectSelector: {matchExpressions: [{key: io.kubernetes.pod.namespace, operator: Exists}]}}
  rules: [{action: deny, images: ["*"], message: the kubelet's own labels are not the pod's}]
  default: deny
`;

let dir: string;
const engines: Engine[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-pull-gate-"));
});
after(async () => {
  await Promise.all(engines.map((e) => e.close()));
  await rm(dir, { recursive: true, force: true });
});

interface GateOptions {
  failOpen?: boolean;
  audit?: AuditLog;
  refuser?: string;
  clusterName?: string;
  exceptionNamespaces?: string[];
  logger?: Logger;
  /** Policy text instead of POLICIES. */
  policies?: string;
  /** Registries besides SILENT. */
  registries?: RegistrySettings[];
  /** The node's own credentials (--authfile), given to the gate. */
  staticCredentials?: CredentialLookup;
}

function parsed(text: string) {
  const { policies, errors } = parsePolicyText(text, "node.yaml");
  assert.deepEqual(errors, []);
  return policies;
}

async function gate(o: GateOptions = {}): Promise<PullGate> {
  const logger = o.logger ?? pino({ level: "silent" });
  const engine = await buildNodeEngine({
    policies: parsed(o.policies ?? POLICIES),
    failOpen: o.failOpen ?? false,
    logger,
    registries: registrySettingsMap([{ host: SILENT, allowLocalAddresses: true }, ...(o.registries ?? [])]),
    ...(o.audit ? { auditLog: o.audit } : {}),
    ...(o.clusterName ? { clusterName: o.clusterName } : {}),
    ...(o.exceptionNamespaces ? { exceptionNamespaces: o.exceptionNamespaces } : {}),
  });
  engines.push(engine);
  return new PullGate({
    engine,
    failOpen: o.failOpen ?? false,
    logger,
    judgementMs: 5_000,
    ...(o.audit ? { audit: o.audit } : {}),
    ...(o.refuser ? { refuser: o.refuser } : {}),
    ...(o.staticCredentials ? { staticCredentials: o.staticCredentials } : {}),
  });
}

const pod = (namespace: string, labels: Record<string, string> = {}): PullingPod => ({
  namespace,
  name: "web",
  uid: "uid-web",
  labels: { ...labels, "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": namespace, "io.kubernetes.pod.uid": "uid-web" },
});

/** `null`: the pull names no pod (containerd's image verifier). */
const judge = (g: PullGate, image: string, p: PullingPod | null = pod("apps"), digest?: string): Promise<PullVerdict> =>
  g.judge({ image, auth: undefined, pod: p ?? undefined, ...(digest ? { digest } : {}) }, Date.now() + 5_000);

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** A logger whose lines the test reads. */
function capturing(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { logger, lines };
}

const WARN = 40;
const ERROR = 50;

async function auditRecords(path: string): Promise<Record<string, unknown>[]> {
  return (await readFile(path, "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

const message = (v: PullVerdict) => (v.outcome === "refused" ? v.message : `not refused: ${JSON.stringify(v)}`);

test("an image at its digest, allowed: verified, and the runtime is asked for the repository at that digest", async () => {
  const v = await judge(await gate(), `registry.example.com/app:1.0@${DIGEST}`);
  assert.equal(v.outcome, "verified");
  assert.deepEqual(v.outcome === "verified" && [v.pullAs, v.digest], [`registry.example.com/app@${DIGEST}`, DIGEST]);
  assert.deepEqual(v.outcome === "verified" && v.decision.passes?.map((p) => p.policy), ["trusted"]);
});

test("a refusal names the image at its digest, the policy and its message, and who refused; no field path", async () => {
  const node = await judge(await gate(), `docker.io/library/nginx@${DIGEST}`);
  assert.equal(
    message(node),
    `imprimatur node-proxy refused the pull: image "docker.io/library/nginx@${DIGEST}" denied by policy trusted default: only registry.example.com`,
  );
  assert.equal(node.digest, DIGEST);
  assert.deepEqual(node.outcome === "refused" && node.decision?.violations.map((v) => [v.policy, v.rule]), [["trusted", "default"]]);
  const verifier = await judge(await gate({ refuser: "imprimatur containerd-verifier" }), `docker.io/library/nginx@${DIGEST}`);
  assert.match(message(verifier), /^imprimatur containerd-verifier refused the pull: /);
});

test("the digest a runtime already resolved is the one judged, whatever the tag", async () => {
  const v = await judge(await gate(), "registry.example.com/app:1.0", pod("apps"), DIGEST);
  assert.equal(v.outcome === "verified" && v.pullAs, `registry.example.com/app@${DIGEST}`);
});

test("a namespaced policy decides for its own namespace's pulls only; with no pod, for none", async () => {
  const image = `registry.example.com/team-b/app@${DIGEST}`;
  const g = await gate();
  assert.match(message(await judge(g, image, pod("team-a"))), /denied by NamespacedImagePolicy team-a\/not-here rules\[0\]: team-b's image$/);
  assert.equal((await judge(g, image, pod("team-b"))).outcome, "verified");
  assert.equal((await judge(g, image, null)).outcome, "verified");
});

test("the pod's labels select policies, the kubelet's own labels do not, and Audit lets the pull through with the advisory", async () => {
  const { logger, lines } = capturing();
  const g = await gate({ logger });
  const image = `registry.example.com/audited/app@${DIGEST}`;
  const audited = pod("apps", { app: "audited" });
  const labelled = await judge(g, image, audited);
  assert.equal(labelled.outcome, "verified");
  assert.deepEqual(labelled.outcome === "verified" && labelled.decision.advisories?.map((a) => [a.policy, a.message]), [["audited", "would be refused"]]);
  const plain = await judge(g, image, pod("apps", { app: "web" }));
  assert.equal(plain.outcome === "verified" && plain.decision.advisories, undefined);
  // The node's log says what would have refused the pull, without the field path; a pull nothing advises on logs nothing.
  assert.deepEqual(
    lines.filter((l) => l.level >= WARN).map(({ level, msg, image, digest, pod, wouldRefuse }) => ({ level, msg, image, digest, pod, wouldRefuse })),
    [
      {
        level: WARN,
        msg: "pull allowed; a policy in Warn or Audit would refuse it",
        image,
        digest: DIGEST,
        pod: audited,
        wouldRefuse: `image "${image}" denied by policy audited rules[0]: would be refused`,
      },
    ],
  );
});

test("a pull that names no pod is judged as an ImageReview of the image at its digest: cluster policies decide", async () => {
  assert.equal(
    message(await judge(await gate(), `docker.io/library/nginx:1.27@${DIGEST}`, null)),
    `imprimatur node-proxy refused the pull: image "docker.io/library/nginx:1.27@${DIGEST}" denied by policy trusted default: only registry.example.com`,
  );
});

test("a tag on a registry that gives no answer: refused failing closed, pulled as asked failing open", async () => {
  const image = `${SILENT}/app:1.0`;
  const closed = await judge(await gate(), image);
  assert.match(
    message(closed),
    /^imprimatur node-proxy refused the pull: the tag of "127\.0\.0\.1:9\/app:1\.0" could not be resolved to a digest \(.*\); refused because the node fails closed\. Fix the registry settings, or set --failure-policy Ignore$/,
  );
  const { logger, lines } = capturing();
  const open = await judge(await gate({ failOpen: true, logger }), image);
  assert.equal(open.outcome, "failed-open");
  assert.deepEqual(open.outcome === "failed-open" && [open.pullAs, open.digest], [image, undefined]);
  const reason = open.outcome === "failed-open" ? open.reason : "";
  assert.match(reason, /^the tag of "127\.0\.0\.1:9\/app:1\.0" could not be resolved to a digest \(.*\); the node fails open$/);
  // The node's log says which pull went on unverified, and why.
  assert.deepEqual(
    lines.filter((l) => l.level >= WARN).map(({ level, msg, image, pod, registry, reason }) => ({ level, msg, image, pod, registry, reason })),
    [{ level: WARN, msg: "pull allowed unverified", image, pod: pod("apps"), registry: SILENT, reason }],
  );
});

test("a tag is resolved with the node's own credentials after the pull's; a tag the registry does not have is refused whatever the failure policy", async () => {
  const registry = await FakeRegistry.start({ auth: "basic", users: { node: { password: "node-secret" } } });
  try {
    const digest = registry.putManifest("app", "1.0", imageManifest("one"));
    const host = registry.host;
    const g = await gate({
      policies: `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: local}
spec:
  rules: [{action: allow, images: ["${host}/*"]}]
  default: deny
`,
      registries: [{ host, insecure: true, allowLocalAddresses: true }],
      staticCredentials: () => [{ source: "authfile", username: "node", password: "node-secret" }],
      failOpen: true,
    });
    const v = await judge(g, `${host}/app:1.0`);
    assert.deepEqual(v.outcome === "verified" && [v.pullAs, v.digest], [`${host}/app@${digest}`, digest]);
    assert.deepEqual(
      registry.registryRequests.filter((r) => r.url !== "/v2/").map((r) => [r.url, r.authorization]),
      [["/v2/app/manifests/1.0", `Basic ${Buffer.from("node:node-secret").toString("base64")}`]],
    );
    assert.equal(
      message(await judge(g, `${host}/app:2.0`)),
      `imprimatur node-proxy refused the pull: the tag of "${host}/app:2.0" could not be resolved to a digest ` +
        `(not-found: ${host}/app: not found: manifest 2.0 at ${host} returned HTTP 404 (MANIFEST_UNKNOWN: manifest unknown)); ` +
        `that is the registry's answer, not an outage, so it is refused whatever the failure policy`,
    );
  } finally {
    await registry.close();
  }
});

test("an engine without registry access refuses a tag, saying so, and still judges an image at its digest", async () => {
  const engine = await buildEngine({ offline: true, config: nodeServerConfig(false), policies: nodePolicySet(parsed(POLICIES)) });
  engines.push(engine);
  const g = new PullGate({ engine, failOpen: true, logger: pino({ level: "silent" }) });
  assert.equal(
    message(await judge(g, "registry.example.com/app:1.0")),
    "imprimatur node-proxy refused the pull: the node cannot resolve tags (no registry access)",
  );
  assert.equal((await judge(g, `registry.example.com/app@${DIGEST}`)).outcome, "verified");
});

test("policies scoped with spec.clusters apply at a node of that cluster (--cluster-name), and at no other", async () => {
  const image = `registry.example.com/staging/app@${DIGEST}`;
  assert.match(message(await judge(await gate({ clusterName: "prod" }), image)), /denied by policy prod-only rules\[0\]: not in prod$/);
  assert.equal((await judge(await gate({ clusterName: "dev" }), image)).outcome, "verified");
  assert.equal((await judge(await gate(), image)).outcome, "verified");
});

test("a PolicyException exempts a pod's pull only where the node honours its namespace (--exceptions-namespace)", async () => {
  const image = `docker.io/library/nginx@${DIGEST}`;
  const legacy = pod("batch", { app: "legacy" });
  assert.match(message(await judge(await gate(), image, legacy)), /denied by policy trusted default/);
  // An exemption is an override: the node records it in its audit log before the pull goes on.
  const audit = new AuditLog(join(dir, "exceptions.log"));
  const honouring = await gate({ exceptionNamespaces: ["policy-exceptions"], audit });
  const honoured = await judge(honouring, image, legacy);
  assert.equal(honoured.outcome, "verified");
  assert.deepEqual(honoured.outcome === "verified" && honoured.decision.exemptions?.map((x) => x.exception), ["policy-exceptions/legacy-batch"]);
  assert.match(message(await judge(honouring, image, pod("batch", { app: "web" }))), /denied by policy trusted/);
  await audit.close();
  const events = (await readFile(join(dir, "exceptions.log"), "utf8"))
    .trim()
    .split("\n")
    .map((l) => (JSON.parse(l) as { event: string }).event);
  assert.deepEqual(events, ["policy-exception", "pull-verified", "pull-refused"]);
});

test("what is not an image reference is refused with the reason", async () => {
  assert.match(message(await judge(await gate(), "UPPER/case")), /refused the pull: "UPPER\/case" is not an image reference: /);
});

test("every verdict is a record in the audit log; an allowing verdict that cannot be recorded refuses the pull", async () => {
  const path = join(dir, "audit.log");
  const audit = new AuditLog(path);
  const g = await gate({ audit });
  await judge(g, `registry.example.com/app@${DIGEST}`);
  const refused = await judge(g, `docker.io/library/nginx@${DIGEST}`);
  const unparsed = await judge(g, "UPPER/case");
  await judge(g, `registry.example.com/audited/app@${DIGEST}`, pod("apps", { app: "audited" }));
  await audit.close();
  const records = await auditRecords(path);
  assert.deepEqual(
    records.map((r) => [r.event, r.image, r.digest, r.namespace, r.name, r.uid]),
    [
      ["pull-verified", `registry.example.com/app@${DIGEST}`, DIGEST, "apps", "web", "uid-web"],
      ["pull-refused", `docker.io/library/nginx@${DIGEST}`, DIGEST, "apps", "web", "uid-web"],
      ["pull-refused", "UPPER/case", undefined, "apps", "web", "uid-web"],
      ["pull-verified", `registry.example.com/audited/app@${DIGEST}`, DIGEST, "apps", "web", "uid-web"],
    ],
  );
  // What passed, what refused (the message the pod's events show), and what a policy in Audit would have refused.
  assert.deepEqual(records[0]!.passes, [
    { kind: "ImagePolicy", policy: "trusted", rule: "rules[0]", image: `registry.example.com/app@${DIGEST}`, field: "spec.containers[0].image" },
  ]);
  assert.deepEqual([records[1]!.reason, records[2]!.reason], [message(refused), message(unparsed)]);
  assert.deepEqual(records[3]!.advisories, [
    { policy: "audited", rule: "rules[0]", image: `registry.example.com/audited/app@${DIGEST}`, message: "would be refused", actions: ["Audit"] },
  ]);
  // A log that cannot be written (its folder is a file): the allowed pull is refused, the refused one stays refused.
  await writeFile(join(dir, "not-a-folder"), "");
  const { logger, lines } = capturing();
  const broken = await gate({ audit: new AuditLog(join(dir, "not-a-folder", "audit.log")), logger });
  const allowed = await judge(broken, `registry.example.com/app@${DIGEST}`);
  assert.match(message(await judge(broken, `docker.io/library/nginx@${DIGEST}`)), /denied by policy trusted default/);
  const errors = lines.filter((l) => l.level >= ERROR);
  assert.deepEqual(
    errors.map(({ level, msg, image, outcome }) => ({ level, msg, image, outcome })),
    [
      { level: ERROR, msg: "the pull could not be recorded in the node's audit log", image: `registry.example.com/app@${DIGEST}`, outcome: "verified" },
      { level: ERROR, msg: "the pull could not be recorded in the node's audit log", image: `docker.io/library/nginx@${DIGEST}`, outcome: "refused" },
    ],
  );
  const cause = (errors[0]!.err as { message: string }).message;
  assert.equal(message(allowed), `imprimatur node-proxy refused the pull: the pull could not be recorded in the node's audit log (${cause}), so it is refused`);
});

/** An engine that answers every review with `decision`, and keeps what it was asked. */
function answering(decision: Decision | undefined): { engine: Engine; asked: { input: Reviewable; call: AdmissionCall }[] } {
  const asked: { input: Reviewable; call: AdmissionCall }[] = [];
  const review = (input: Reviewable, call: AdmissionCall) => {
    asked.push({ input, call });
    return Promise.resolve({ decision });
  };
  return { engine: { resolver: undefined, review } as unknown as Engine, asked };
}

const QUIET = pino({ level: "silent" });

test("the engine is asked to judge the pull by the caller's deadline or the gate's own bound, whichever is sooner", async () => {
  const { engine, asked } = answering(allow());
  const image = `registry.example.com/app:1.0@${DIGEST}`;
  const pull = { image, auth: undefined, pod: pod("apps") };
  const bounded = new PullGate({ engine, failOpen: false, logger: QUIET, judgementMs: 2_000 });
  const within = async (g: PullGate, bound: number): Promise<void> => {
    const start = Date.now();
    await g.judge(pull, start + 600_000);
    const deadline = asked.at(-1)!.call.deadline;
    assert.ok(deadline >= start + bound && deadline <= Date.now() + bound, `${deadline - start} ms, not ${bound}`);
  };
  await within(bounded, 2_000);
  // The kubelet's own deadline, when sooner, is the one.
  const soon = Date.now() + 500;
  await bounded.judge(pull, soon);
  assert.equal(asked.at(-1)!.call.deadline, soon);
  // Without judgementMs: 30 s.
  await within(new PullGate({ engine, failOpen: false, logger: QUIET }), 30_000);
  // A pull, judged for real (not a dry run), as the node's own cluster, with the pod's uid and the credentials it presented.
  const { deadline: _deadline, presentedCredentials, ...call } = asked[0]!.call;
  assert.deepEqual(call, { endpoint: "pull", dryRun: false, ownCluster: true, uid: "uid-web" });
  assert.equal(typeof presentedCredentials, "function");
  assert.deepEqual(
    asked.map((a) => a.input.kind === "object" && a.input.namespace),
    ["apps", "apps", "apps"],
  );
  // No pod: an ImageReview of the image at its digest, with no uid.
  await bounded.judge({ image, auth: undefined, pod: undefined }, Date.now() + 5_000);
  assert.deepEqual(asked.at(-1)!.input, { kind: "image-review", spec: { containers: [{ image }] } });
  assert.equal(asked.at(-1)!.call.uid, undefined);
});

test("a pull the engine finds nothing to judge in is verified, with a plain allow", async () => {
  const { engine } = answering(undefined);
  const v = await new PullGate({ engine, failOpen: false, logger: QUIET }).judge(
    { image: `registry.example.com/app@${DIGEST}`, auth: undefined, pod: pod("apps") },
    Date.now() + 5_000,
  );
  assert.deepEqual(v, { outcome: "verified", pullAs: `registry.example.com/app@${DIGEST}`, digest: DIGEST, decision: allow() });
});

test("a judgement a registry or backend gave no answer to, failing open: the pull goes on unverified, logged and recorded with the reasons", async () => {
  const decision = allow({
    failOpen: [
      { backend: "signatures", error: "registry.example.com: timeout" },
      { backend: "team-review", error: "no answer" },
    ],
  });
  const { engine } = answering(decision);
  const { logger, lines } = capturing();
  const path = join(dir, "failed-open.log");
  const audit = new AuditLog(path);
  const image = `registry.example.com/app:1.0@${DIGEST}`;
  const v = await new PullGate({ engine, failOpen: true, logger, audit }).judge({ image, auth: undefined, pod: pod("apps") }, Date.now() + 5_000);
  await audit.close();
  const reason = "registry.example.com: timeout; no answer";
  assert.deepEqual(v, { outcome: "failed-open", pullAs: `registry.example.com/app@${DIGEST}`, digest: DIGEST, reason, decision });
  assert.deepEqual(
    lines.map(({ level, msg, image, digest, pod, reason }) => ({ level, msg, image, digest, pod, reason })),
    [{ level: WARN, msg: "pull allowed unverified: a registry gave no answer and the node fails open", image, digest: DIGEST, pod: pod("apps"), reason }],
  );
  assert.deepEqual(
    (await auditRecords(path)).map((r) => [r.event, r.image, r.digest, r.reason]),
    [["pull-failed-open", image, DIGEST, reason]],
  );
});

test("empty lists of fail-opens and advisories are none: the pull is verified and nothing is logged", async () => {
  const { logger, lines } = capturing();
  for (const decision of [allow({ failOpen: [] }), allow({ advisories: [] })]) {
    const v = await new PullGate({ engine: answering(decision).engine, failOpen: true, logger }).judge(
      { image: `registry.example.com/app@${DIGEST}`, auth: undefined, pod: pod("apps") },
      Date.now() + 5_000,
    );
    assert.deepEqual(v, { outcome: "verified", pullAs: `registry.example.com/app@${DIGEST}`, digest: DIGEST, decision });
  }
  assert.deepEqual(lines, []);
});
