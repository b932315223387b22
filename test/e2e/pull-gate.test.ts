// The node's judgement of a pull (src/node/pull-gate.ts) against a real docker-registry with TLS and token auth,
// holding images signed by the project's test signer (cosign `.sig` layouts, logged in a mock Rekor): the tag is
// resolved with the pull's own credentials, the image judged at that digest by the same policy files the webhook
// loads, for the pod in the pull's sandbox. The CRI path through the proxy and a kubelet is test/e2e/node-verify-*.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { pino } from "pino";
import type { RegistryAuth } from "../../src/core/pull-verification/credential-hash.ts";
import type { PullingPod } from "../../src/core/pull-verification/pull-subject.ts";
import type { CredentialLookup } from "../../src/credentials/credential.ts";
import type { Engine } from "../../src/engine/engine.ts";
import { buildNodeEngine } from "../../src/node/node-engine.ts";
import { PullGate, type PullVerdict } from "../../src/node/pull-gate.ts";
import { loadPolicySet } from "../../src/policy/policy-set.ts";
import { PolicyFolder } from "../../src/policy/policy-source.ts";
import { registrySettingsMap } from "../../src/registry/registry-settings.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../support/signer/mock-sigstore.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { writeSignedOnlyFolder } from "../support/node-signing-policies.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const PUSHER = { username: "pusher", password: "pusher-secret-1" };
const PULLER = { username: "puller", password: "puller-secret-1" };
/** Nothing listens here: a registry that gives no answer. */
const SILENT = "127.0.0.1:9";

let dir: string;
let registry: TestRegistry;
let sigstore: MockSigstore;
let key: SigningKey;
const layouts = new TestLayouts();
const engines: Engine[] = [];
const digests: Record<string, string> = {};

async function pushSigned(repository: string, tag: string, signed: boolean): Promise<string> {
  const { digest } = await layouts.push(registry, repository, tag, { seed: `${repository}:${tag}:${Date.now()}` });
  if (signed) await pushCosignSignatures({ registry, pusher: PUSHER, repository, digest, signers: [{ key, rekor: sigstore, hash: "sha256" }] });
  return digest;
}

async function gate(failOpen = false, staticCredentials?: CredentialLookup): Promise<PullGate> {
  const { policies } = await loadPolicySet(new PolicyFolder(dir), { profiles: [], allowEmpty: false });
  const logger = pino({ level: "silent" });
  const registries = registrySettingsMap([...registry.settings(), { host: SILENT, allowLocalAddresses: true }]);
  const engine = await buildNodeEngine({ policies, failOpen, registries, logger, ...(staticCredentials ? { staticCredentials } : {}) });
  engines.push(engine);
  return new PullGate({ engine, failOpen, logger, judgementMs: 15_000, ...(staticCredentials ? { staticCredentials } : {}) });
}

const pod = (namespace: string, labels: Record<string, string> = {}): PullingPod => ({
  namespace,
  name: `p-${namespace}`,
  uid: `uid-${namespace}`,
  labels: { ...labels, "io.kubernetes.pod.name": `p-${namespace}`, "io.kubernetes.pod.namespace": namespace, "io.kubernetes.pod.uid": `uid-${namespace}` },
});

const auth = (user?: { username: string; password: string }): RegistryAuth | undefined =>
  user && { username: user.username, password: user.password, auth: "", serverAddress: registry.host, identityToken: "", registryToken: "" };

function judge(g: PullGate, image: string, opts: { namespace?: string; labels?: Record<string, string>; user?: typeof PULLER } = {}): Promise<PullVerdict> {
  return g.judge({ image, auth: auth(opts.user), pod: pod(opts.namespace ?? "apps", opts.labels) }, Date.now() + 20_000);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-pull-gate-"));
  sigstore = await createMockSigstore({ name: "pull-gate" });
  key = generateSigningKey("ecdsa-p256");
  registry = await startRegistry({ auth: "token", publicRepositories: ["public/**"], users: [PUSHER, { ...PULLER, pull: ["private/**"], push: false }] });
  digests.signed = await pushSigned("public/signed", "1.0", true);
  digests.unsigned = await pushSigned("public/unsigned", "1.0", false);
  digests.private = await pushSigned("private/app", "1.0", true);
  digests.teamB = await pushSigned("public/team-b-only", "1.0", true);
  digests.audited = await pushSigned("public/audited", "1.0", true);
  const host = registry.host;
  await writeSignedOnlyFolder(dir, {
    sigstore,
    key,
    images: [`${host}/*`, `${SILENT}/*`],
    extra: [
      // Written by team-a's owners: it decides for team-a's pods only.
      {
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "NamespacedImagePolicy",
        metadata: { name: "not-here", namespace: "team-a" },
        spec: { rules: [{ action: "deny", images: [`${host}/public/team-b-only*`], message: "team-b's image" }], default: "allow" },
      },
      {
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "ImagePolicy",
        metadata: { name: "audited-at-the-node" },
        spec: {
          matchConstraints: { objectSelector: { matchLabels: { app: "audited" } } },
          validationActions: ["Audit"],
          rules: [{ action: "deny", images: [`${host}/public/audited*`], message: "would be refused" }],
          default: "allow",
        },
      },
    ],
  });
});

after(() =>
  teardown([...engines.map((e) => () => e.close()), ...layouts.removals(), () => registry?.stop(), () => dir && rm(dir, { recursive: true, force: true })]),
);

describe("a pull judged at the node", () => {
  test("a signed tag is verified at the digest it resolves to, and the runtime is asked for that digest", async () => {
    const verdict = await judge(await gate(), `${registry.host}/public/signed:1.0`);
    assert.equal(verdict.outcome, "verified", JSON.stringify(verdict));
    assert.equal(verdict.digest, digests.signed);
    assert.equal(verdict.outcome === "verified" && verdict.pullAs, `${registry.host}/public/signed@${digests.signed}`);
  });

  test("an unsigned image is refused; the reason names the policy and the digest judged", async () => {
    const verdict = await judge(await gate(), `${registry.host}/public/unsigned:1.0`);
    assert.equal(verdict.outcome, "refused");
    assert.equal(verdict.digest, digests.unsigned);
    assert.match(
      verdict.outcome === "refused" ? verdict.message : "",
      new RegExp(
        `^imprimatur node-proxy refused the pull: image ".*/public/unsigned:1\\.0@${digests.unsigned}" denied by policy signed-at-the-node rules\\[0\\]: .*release\\.pub`,
      ),
    );
  });

  test("a private image resolves with the pull's own credentials; without them the registry's answer refuses it", async () => {
    const g = await gate();
    const withCredentials = await judge(g, `${registry.host}/private/app:1.0`, { user: PULLER });
    assert.equal(withCredentials.outcome, "verified", JSON.stringify(withCredentials));
    assert.equal(withCredentials.digest, digests.private);
    const without = await judge(g, `${registry.host}/private/app:1.0`);
    assert.equal(without.outcome, "refused");
    assert.match(without.outcome === "refused" ? without.message : "", /could not be resolved to a digest .*registry's answer, not an outage/);
    // The node's own credentials (--authfile) come after the pull's: a pull without any is resolved with them.
    const authfile: CredentialLookup = (host) => (host === registry.host ? [{ source: "authfile", ...PULLER }] : []);
    const withNodeCredentials = await judge(await gate(false, authfile), `${registry.host}/private/app:1.0`);
    assert.equal(withNodeCredentials.outcome, "verified", JSON.stringify(withNodeCredentials));
  });

  test("a tag moved to an unsigned build is judged at its new digest on the next pull, and refused", async () => {
    const g = await gate();
    const first = await pushSigned("public/moving", "1.0", true);
    const before = await judge(g, `${registry.host}/public/moving:1.0`);
    assert.equal(before.outcome, "verified");
    assert.equal(before.digest, first);
    const moved = await pushSigned("public/moving", "1.0", false);
    assert.notEqual(moved, first);
    const after = await judge(g, `${registry.host}/public/moving:1.0`);
    assert.equal(after.outcome, "refused");
    assert.equal(after.digest, moved);
  });

  test("a namespaced policy decides for its own namespace's pulls only", async () => {
    const g = await gate();
    const image = `${registry.host}/public/team-b-only:1.0`;
    const inTeamA = await judge(g, image, { namespace: "team-a" });
    assert.equal(inTeamA.outcome, "refused");
    assert.match(
      inTeamA.outcome === "refused" ? inTeamA.message : "",
      /^imprimatur node-proxy refused the pull: image ".*\/public\/team-b-only:1\.0@sha256:[0-9a-f]{64}" denied by NamespacedImagePolicy team-a\/not-here rules\[0\]: team-b's image$/,
    );
    assert.equal((await judge(g, image, { namespace: "team-b" })).outcome, "verified");
  });

  test("the pod's labels from the sandbox select policies; Audit at the node lets the pull through and says what would refuse it", async () => {
    const g = await gate();
    const image = `${registry.host}/public/audited:1.0`;
    const labelled = await judge(g, image, { labels: { app: "audited" } });
    assert.equal(labelled.outcome, "verified");
    assert.deepEqual(labelled.outcome === "verified" ? (labelled.decision.advisories ?? []).map((a) => [a.policy, a.message]) : [], [
      ["audited-at-the-node", "would be refused"],
    ]);
    const other = await judge(g, image, { labels: { app: "web" } });
    assert.equal(other.outcome, "verified");
    assert.deepEqual(other.outcome === "verified" ? (other.decision.advisories ?? []) : ["?"], []);
  });

  test("a registry that gives no answer: refused when the node fails closed, pulled as asked when it fails open", async () => {
    const image = `${SILENT}/app:1.0`;
    const closed = await judge(await gate(false), image);
    assert.equal(closed.outcome, "refused");
    assert.match(closed.outcome === "refused" ? closed.message : "", /could not be resolved to a digest .*refused because the node fails closed/);
    const open = await judge(await gate(true), image);
    assert.equal(open.outcome, "failed-open", JSON.stringify(open));
    assert.equal(open.outcome === "failed-open" && open.pullAs, image);
  });

  test("what is not an image reference is refused with the reason", async () => {
    const verdict = await judge(await gate(), "Not/An:Image:Ref");
    assert.equal(verdict.outcome, "refused");
    assert.match(verdict.outcome === "refused" ? verdict.message : "", /"Not\/An:Image:Ref" is not an image reference: /);
  });
});
