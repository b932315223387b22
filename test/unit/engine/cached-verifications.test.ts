// A repeat admission of verified images is answered without an await (cachedVerifications in
// src/engine/verify-images.ts) — and only when everything it depends on is at hand: a digest, the pod's own
// credentials as read within their TTL, and the verifier's result for exactly those credentials. The pull secrets
// come from a stand-in PullSecretSource (the real reader's kept reads are tested against kube-apiserver in
// test/e2e/pull-secrets.test.ts); the verifier is the real one over an in-memory signature store.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { pino } from "pino";
import { subjectOfObject, type AdmissionSubject } from "../../../src/core/admission-subject.ts";
import type { CredentialLookup, RegistryCredential } from "../../../src/credentials/credential.ts";
import type { OnlineTools } from "../../../src/engine/cluster-tools.ts";
import { cachedVerifications, signaturesToVerify, verifySignatures, type SignatureWork } from "../../../src/engine/verify-images.ts";
import { PodCredentials } from "../../../src/kube/pod-credentials.ts";
import type { PodPullSecretRefs, PullCredentials } from "../../../src/kube/pull-secrets.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { ImageVerifier } from "../../../src/verification/image-verifier.ts";
import { cosignSignatureLayer, simpleSigningPayload } from "../../support/signer/cosign-signatures.ts";
import { generateSigningKey } from "../../support/signer/keys.ts";
import { signatureRegistry } from "../../support/verification-fixtures.ts";

const digest = `sha256:${createHash("sha256").update("cached admissions").digest("hex")}`;
const release = generateSigningKey("ecdsa-p256");
const signature = await cosignSignatureLayer({ key: release, payload: simpleSigningPayload({ dockerReference: "r.example/app", digest }) });

const parsed = parsePolicyText(
  `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: signed }
spec:
  rules:
    - action: allow
      images: ["r.example/*"]
      digestVerify: false
      attestors: [{ entries: [{ staticKey: { name: release, ignoreTlog: true, key: ${JSON.stringify(release.publicKeyPem)} } }] }]
  default: deny
`,
  "inline.yaml",
);
assert.deepEqual(parsed.errors, []);
const policies = parsed.policies.ImagePolicy;

/** Pull secrets by name; a secret's credentials are at hand (credentialsKnown) once credentialsFor has read it. */
function secretSource(secrets: Record<string, RegistryCredential[]>) {
  const read = new Map<string, PullCredentials>();
  const key = (refs: PodPullSecretRefs) => JSON.stringify([refs.namespace, (refs.imagePullSecrets ?? []).map((s) => s.name)]);
  const reads = { count: 0 };
  const credentialsOf = (refs: PodPullSecretRefs): PullCredentials => {
    const found = (refs.imagePullSecrets ?? []).flatMap((s) => secrets[s.name ?? ""] ?? []);
    const lookup: CredentialLookup = () => found;
    return { lookup, sources: [], problems: [] };
  };
  return {
    reads,
    forget: () => read.clear(), // the TTL passed
    source: {
      async credentialsFor(refs: PodPullSecretRefs) {
        reads.count++;
        const credentials = credentialsOf(refs);
        read.set(key(refs), credentials);
        return credentials;
      },
      credentialsKnown: (refs: PodPullSecretRefs) => read.get(key(refs)),
    },
  };
}

function setup() {
  const secrets = secretSource({
    regcred: [{ source: "secret apps/regcred", username: "team", password: "pw-1" }],
    other: [{ source: "secret apps/other", username: "intruder", password: "pw-2" }],
  });
  const registry = signatureRegistry(digest, { anyRepository: { sig: [signature] } });
  const verifier = new ImageVerifier({ client: registry.client, trustRoots: () => new Map() });
  const credentials = new PodCredentials({ pullSecrets: secrets.source, staticCredentials: () => [], logger: pino({ level: "silent" }) });
  // Only what verification uses: the pod's credentials, the verifier, and a resolver that must not be asked.
  const tools = {
    online: true,
    credentials,
    verifier,
    resolver: {
      resolve: () => {
        throw new Error("no tag is resolved here");
      },
    },
  } as unknown as OnlineTools;
  return { secrets, verifier, registry, tools };
}

function subjectOf(images: string[], pullSecrets: string[] = ["regcred"]): AdmissionSubject {
  const plan = subjectOfObject({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "apps" },
    spec: { imagePullSecrets: pullSecrets.map((name) => ({ name })), containers: images.map((image, i) => ({ name: `c${i}`, image })) },
  });
  assert.ok(plan.review);
  return plan.subject;
}

function workFor(tools: OnlineTools, subject: AdmissionSubject): SignatureWork {
  const work = signaturesToVerify(tools, policies, subject, undefined);
  assert.ok(work);
  return work;
}

const noPins = new Map<string, string>();
const image = `r.example/app@${digest}`;

test("a repeat admission with the pod's secret at hand gets the cached result, with no read and no verification", async () => {
  const { tools, verifier, secrets, registry } = setup();
  const subject = subjectOf([image]);
  assert.equal(cachedVerifications(workFor(tools, subject), subject, noPins), undefined, "nothing read or verified yet");
  const first = await verifySignatures(workFor(tools, subject), subject, noPins, Date.now() + 5_000);
  const [result] = [...first.values()];
  assert.equal(result?.status, "verified");
  assert.equal(result.digest, digest);
  const lookups = registry.calls.manifests;

  const again = cachedVerifications(workFor(tools, subject), subject, noPins);
  assert.ok(again, "answered without an await");
  assert.deepEqual([...again.keys()], [...first.keys()]);
  assert.equal([...again.values()][0], result, "the same verification object, with its digest");
  assert.equal(verifier.verifications, 1);
  assert.equal(verifier.hits, 1);
  assert.equal(secrets.reads.count, 1, "the secret was not read again");
  assert.equal(registry.calls.manifests, lookups, "nothing asked of the registry");
});

test("never another pod's result: other credentials, secrets not at hand, a tag, or one image not cached leave it to verifySignatures", async () => {
  const { tools, verifier, secrets } = setup();
  const subject = subjectOf([image]);
  await verifySignatures(workFor(tools, subject), subject, noPins, Date.now() + 5_000);

  // A pod whose pull secret holds other credentials: the result verified with regcred's is not its answer.
  const intruder = subjectOf([image], ["other"]);
  await secrets.source.credentialsFor({ namespace: "apps", imagePullSecrets: [{ name: "other" }] });
  assert.equal(cachedVerifications(workFor(tools, intruder), intruder, noPins), undefined);
  // No pull secret at all: the server's own (here none) credentials, another identity.
  const bare = subjectOf([image], []);
  assert.equal(cachedVerifications(workFor(tools, bare), bare, noPins), undefined);

  // The secret's read expired: it must be read again (it may have changed), so no answer here.
  secrets.forget();
  assert.equal(cachedVerifications(workFor(tools, subject), subject, noPins), undefined);
  await secrets.source.credentialsFor({ namespace: "apps", imagePullSecrets: [{ name: "regcred" }] });
  assert.ok(cachedVerifications(workFor(tools, subject), subject, noPins));

  // A tag is resolved first (digestVerify: false), which needs the registry.
  const tagged = subjectOf(["r.example/app:1.0"]);
  assert.equal(cachedVerifications(workFor(tools, tagged), tagged, noPins), undefined);
  // ...unless the digest it was pinned to is given.
  assert.ok(cachedVerifications(workFor(tools, tagged), tagged, new Map([["spec.containers[0].image", digest]])));

  // Two images, one never verified: neither is answered here, and no hit is counted for the cached one.
  const hits = verifier.hits;
  const other = `sha256:${createHash("sha256").update("another").digest("hex")}`;
  const mixed = subjectOf([image, `r.example/app@${other}`]);
  assert.equal(cachedVerifications(workFor(tools, mixed), mixed, noPins), undefined);
  assert.equal(verifier.hits, hits);
  assert.equal(verifier.verifications, 1);
});

test("a denial is answered from the cache as the verifier keeps it, naming the reason", async () => {
  const { tools } = setup();
  const unsigned = `sha256:${createHash("sha256").update("unsigned").digest("hex")}`;
  const subject = subjectOf([`r.example/app@${unsigned}`]);
  const first = await verifySignatures(workFor(tools, subject), subject, noPins, Date.now() + 5_000);
  assert.equal([...first.values()][0]?.status, "denied");
  const again = cachedVerifications(workFor(tools, subject), subject, noPins);
  assert.ok(again);
  assert.deepEqual([...again.values()], [...first.values()]);
});
