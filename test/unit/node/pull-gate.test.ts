// The judgement of one pull (src/node/pull-gate.ts) with the node's engine, online, over policies that need no
// registry (patterns, scopes, validationActions) and references that name their digest, or a registry that gives no
// answer (nothing listens at 127.0.0.1:9). Signatures, tags resolved with the pull's credentials and moved tags are
// judged against a real registry in test/e2e/pull-gate.test.ts.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pino } from "pino";
import { AuditLog } from "../../../src/audit/audit-log.ts";
import type { PullingPod } from "../../../src/core/pull-verification/pull-subject.ts";
import type { Engine } from "../../../src/engine/engine.ts";
import { buildNodeEngine } from "../../../src/node/node-engine.ts";
import { PullGate, type PullVerdict } from "../../../src/node/pull-gate.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";

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

async function gate(
  o: { failOpen?: boolean; audit?: AuditLog; refuser?: string; clusterName?: string; exceptionNamespaces?: string[] } = {},
): Promise<PullGate> {
  const { policies, errors } = parsePolicyText(POLICIES, "node.yaml");
  assert.deepEqual(errors, []);
  const logger = pino({ level: "silent" });
  const engine = await buildNodeEngine({
    policies,
    failOpen: o.failOpen ?? false,
    logger,
    registries: registrySettingsMap([{ host: SILENT, allowLocalAddresses: true }]),
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
  });
}

const pod = (namespace: string, labels: Record<string, string> = {}): PullingPod => ({
  namespace,
  name: "web",
  uid: "uid-web",
  labels: { ...labels, "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": namespace, "io.kubernetes.pod.uid": "uid-web" },
});

const judge = (g: PullGate, image: string, p: PullingPod | undefined = pod("apps"), digest?: string): Promise<PullVerdict> =>
  g.judge({ image, auth: undefined, pod: p, ...(digest ? { digest } : {}) }, Date.now() + 5_000);

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
  assert.equal((await judge(g, image, undefined)).outcome, "verified");
});

test("the pod's labels select policies, the kubelet's own labels do not, and Audit lets the pull through with the advisory", async () => {
  const g = await gate();
  const image = `registry.example.com/audited/app@${DIGEST}`;
  const labelled = await judge(g, image, pod("apps", { app: "audited" }));
  assert.equal(labelled.outcome, "verified");
  assert.deepEqual(labelled.outcome === "verified" && labelled.decision.advisories?.map((a) => [a.policy, a.message]), [["audited", "would be refused"]]);
  const plain = await judge(g, image, pod("apps", { app: "web" }));
  assert.equal(plain.outcome === "verified" && plain.decision.advisories, undefined);
});

test("a tag on a registry that gives no answer: refused failing closed, pulled as asked failing open", async () => {
  const image = `${SILENT}/app:1.0`;
  const closed = await judge(await gate(), image);
  assert.match(message(closed), /the tag of "127\.0\.0\.1:9\/app:1\.0" could not be resolved to a digest \(.*\); refused because the node fails closed/);
  const open = await judge(await gate({ failOpen: true }), image);
  assert.equal(open.outcome, "failed-open");
  assert.deepEqual(open.outcome === "failed-open" && [open.pullAs, open.digest], [image, undefined]);
  assert.match(open.outcome === "failed-open" ? open.reason : "", /could not be resolved to a digest .*the node fails open/);
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
  await judge(g, `docker.io/library/nginx@${DIGEST}`);
  await audit.close();
  const records = (await readFile(path, "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(
    records.map((r) => [r.event, r.image, r.digest, r.namespace, r.name, r.uid]),
    [
      ["pull-verified", `registry.example.com/app@${DIGEST}`, DIGEST, "apps", "web", "uid-web"],
      ["pull-refused", `docker.io/library/nginx@${DIGEST}`, DIGEST, "apps", "web", "uid-web"],
    ],
  );
  assert.match(String(records[1]!.reason), /denied by policy trusted default/);
  // A log that cannot be written (its folder is a file): the allowed pull is refused, the refused one stays refused.
  await writeFile(join(dir, "not-a-folder"), "");
  const broken = await gate({ audit: new AuditLog(join(dir, "not-a-folder", "audit.log")) });
  assert.match(message(await judge(broken, `registry.example.com/app@${DIGEST}`)), /could not be recorded in the node's audit log .*so it is refused$/);
  assert.match(message(await judge(broken, `docker.io/library/nginx@${DIGEST}`)), /denied by policy trusted default/);
});
