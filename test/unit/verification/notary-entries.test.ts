// A `notary` attestor entry through the verifier (src/verification/image-verifier.ts, verify-notary-entry.ts), with
// an in-memory registry holding a cosign signature by a key and Notary Project signatures as referrers (the same
// layouts on docker-registry: test/e2e): the entries count together in one set's `count`, each signer once, and a
// denial names the entry that was missing. Policies are the YAML a user writes (allowRule compiles it).
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign } from "node:crypto";
import { before, test } from "node:test";
import { RegistryError } from "../../../src/registry/registry-error.ts";
import { ImageVerifier, type VerificationRequest } from "../../../src/verification/image-verifier.ts";
import { signCoseEnvelope } from "../../support/notation/cose-signer.ts";
import { notationPayload, signJwsEnvelope } from "../../support/notation/jws-signer.ts";
import { codeSigningChain } from "../../support/notation/test-pki.ts";
import { attestorsWith } from "../../support/verification-fixtures.ts";

const sha = (b: Buffer | string) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const imageManifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json", layers: [] }));
const digest = sha(imageManifest);
const NOTARY = "application/vnd.cncf.notary.signature";

const cosignKey = generateKeyPairSync("ec", { namedCurve: "P-256" });
const cosignPem = cosignKey.publicKey.export({ type: "spki", format: "pem" }).toString();
const cosignPayload = Buffer.from(
  JSON.stringify({
    critical: { identity: { "docker-reference": "r.example/app" }, image: { "docker-manifest-digest": digest }, type: "cosign container image signature" },
  }),
);
const cosignManifest = Buffer.from(
  JSON.stringify({
    schemaVersion: 2,
    layers: [
      {
        mediaType: "application/vnd.dev.cosign.simplesigning.v1+json",
        digest: sha(cosignPayload),
        size: cosignPayload.length,
        annotations: { "dev.cosignproject.cosign/signature": sign("sha256", cosignPayload, cosignKey.privateKey).toString("base64") },
      },
    ],
  }),
);

let pki: Awaited<ReturnType<typeof codeSigningChain>>;
before(async () => {
  pki = await codeSigningChain("C=US, ST=WA, O=Acme, CN=Release");
});

/** The registry: the image manifest by digest, the cosign tag when `cosign`, Notation envelopes as referrers. */
function registry(opts: { cosign?: boolean; envelopes?: Array<{ mediaType: string; body: Uint8Array }> }) {
  const blobs = new Map<string, Buffer>([[sha(cosignPayload), cosignPayload]]);
  const manifests = new Map<string, Buffer>([[digest, imageManifest]]);
  const referrers = (opts.envelopes ?? []).map((e) => {
    const body = Buffer.from(e.body);
    blobs.set(sha(body), body);
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: { mediaType: NOTARY, digest: sha("{}"), size: 2 },
        layers: [{ mediaType: e.mediaType, digest: sha(body), size: body.length }],
        subject: { mediaType: "application/vnd.oci.image.manifest.v1+json", digest, size: imageManifest.length },
      }),
    );
    manifests.set(sha(manifest), manifest);
    return { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: sha(manifest), size: manifest.length, artifactType: NOTARY };
  });
  return {
    async getManifest(ref: { tag?: string; digest?: string }) {
      const body = ref.tag?.endsWith(".sig") ? (opts.cosign ? cosignManifest : undefined) : ref.digest ? manifests.get(ref.digest) : undefined;
      if (!body) throw new RegistryError("not-found", "manifest unknown");
      return {
        digest: sha(body),
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        size: body.length,
        body,
        endpoint: "r.example",
        credentialSource: "anonymous",
      };
    },
    async getBlob(_repo: unknown, d: string) {
      const body = blobs.get(d);
      if (!body) throw new RegistryError("not-found", "blob unknown");
      return { digest: d, body, endpoint: "r.example", credentialSource: "anonymous" };
    },
    async listReferrers() {
      return { descriptors: referrers, source: "api" as const, endpoint: "r.example", credentialSource: "anonymous" };
    },
  };
}

const payload = () => notationPayload({ mediaType: "application/vnd.oci.image.manifest.v1+json", digest, size: imageManifest.length });
const jws = () => ({ mediaType: "application/jose+json", body: signJwsEnvelope({ payload: payload(), signer: pki.leaf, chain: pki.chain }) });
const cose = () => ({
  mediaType: "application/cose",
  body: signCoseEnvelope({ payload: new TextEncoder().encode(payload()), signer: pki.leaf, chain: pki.chain }),
});

function request(entries: string, count?: number): VerificationRequest {
  const attestors = attestorsWith(entries);
  if (count !== undefined) attestors[0]!.required = count;
  return { image: { registry: "r.example", repository: "app", digest }, policy: "p", rule: 0, attestors, lookup: () => [] };
}
const soon = () => Date.now() + 5_000;
const notaryEntry = () => `{notary: {name: release, certs: ${JSON.stringify(pki.root.pem)}, trustedIdentities: ["x509.subject: C=US, ST=WA, O=Acme"]}}`;
const keyEntry = `{staticKey: {name: build, ignoreTlog: true, key: ${JSON.stringify(cosignPem)}}}`;

test("a Notary Project signature in JWS or COSE satisfies a notary entry, naming the certificate's subject and the format", async () => {
  for (const [envelope, format] of [
    [jws(), "notation-jws"],
    [cose(), "notation-cose"],
  ] as const) {
    const v = new ImageVerifier({ client: registry({ envelopes: [envelope] }), trustRoots: () => new Map() });
    const result = await v.verify(request(notaryEntry()), soon());
    assert.equal(result.status, "verified", JSON.stringify(result));
    if (result.status === "verified") {
      assert.equal(result.evidence.length, 1);
      assert.equal(result.evidence[0]!.attestor, "notary release");
      assert.equal(result.evidence[0]!.format, format);
      assert.match(result.evidence[0]!.signer, /^x509 C=US, ST=WA, O=Acme, CN=Release \(sha256:[0-9a-f]{64}\)$/);
    }
  }
});

test("count: 2 over a cosign key and a Notation certificate needs both signatures", async () => {
  const both = new ImageVerifier({ client: registry({ cosign: true, envelopes: [jws()] }), trustRoots: () => new Map() });
  const result = await both.verify(request(`${keyEntry}, ${notaryEntry()}`, 2), soon());
  assert.equal(result.status, "verified", JSON.stringify(result));
  if (result.status === "verified") assert.deepEqual(result.evidence.map((e) => e.attestor).sort(), ["key build", "notary release"]);

  const cosignOnly = await new ImageVerifier({ client: registry({ cosign: true }), trustRoots: () => new Map() }).verify(
    request(`${keyEntry}, ${notaryEntry()}`, 2),
    soon(),
  );
  assert.equal(cosignOnly.status, "denied");
  if (cosignOnly.status === "denied") assert.match(cosignOnly.reason, /needs all 2: key build verified; notary release: no Notary Project signature found/);

  const notationOnly = await new ImageVerifier({ client: registry({ envelopes: [cose()] }), trustRoots: () => new Map() }).verify(
    request(`${keyEntry}, ${notaryEntry()}`, 2),
    soon(),
  );
  assert.equal(notationOnly.status, "denied");
  if (notationOnly.status === "denied") assert.match(notationOnly.reason, /key build: .*; notary release verified/);

  const either = await new ImageVerifier({ client: registry({ envelopes: [cose()] }), trustRoots: () => new Map() }).verify(
    request(`${keyEntry}, ${notaryEntry()}`, 1),
    soon(),
  );
  assert.equal(either.status, "verified", "count: 1 is met by the Notation signature alone");
});

test("a Notation signature of another manifest, by an untrusted chain or another identity is denied with the reason", async () => {
  const otherDigest = notationPayload({ mediaType: "application/vnd.oci.image.manifest.v1+json", digest: sha("other"), size: imageManifest.length });
  const wrong = { mediaType: "application/jose+json", body: signJwsEnvelope({ payload: otherDigest, signer: pki.leaf, chain: pki.chain }) };
  const r1 = await new ImageVerifier({ client: registry({ envelopes: [wrong] }), trustRoots: () => new Map() }).verify(request(notaryEntry()), soon());
  assert.equal(r1.status, "denied");
  if (r1.status === "denied") assert.match(r1.reason, /the signature is of sha256:[0-9a-f]+, not of sha256:/);

  const stranger = await codeSigningChain("C=US, ST=WA, O=Acme, CN=Release");
  const untrusted = { mediaType: "application/jose+json", body: signJwsEnvelope({ payload: payload(), signer: stranger.leaf, chain: stranger.chain }) };
  const r2 = await new ImageVerifier({ client: registry({ envelopes: [untrusted] }), trustRoots: () => new Map() }).verify(request(notaryEntry()), soon());
  assert.equal(r2.status, "denied");
  if (r2.status === "denied") assert.match(r2.reason, /no certificate of the chain is in the certificates of notary release/);

  const other = `{notary: {certs: ${JSON.stringify(pki.root.pem)}, trustedIdentities: ["x509.subject: C=US, ST=WA, O=Acme, CN=Nightly"]}}`;
  const r3 = await new ImageVerifier({ client: registry({ envelopes: [jws()] }), trustRoots: () => new Map() }).verify(request(other), soon());
  assert.equal(r3.status, "denied");
  if (r3.status === "denied") assert.match(r3.reason, /is none of the trusted identities/);
});

test("no signature of any kind: the denial says where it looked, Notary Project signatures included", async () => {
  const r = await new ImageVerifier({ client: registry({}), trustRoots: () => new Map() }).verify(request(notaryEntry()), soon());
  assert.equal(r.status, "denied");
  if (r.status === "denied")
    assert.match(r.reason, /^no signatures found \(looked for Notary Project signatures referring to sha256:[0-9a-f]{64} in r\.example\/app\); /);
});

test("the verified-images record names the entry, the certificate and the envelope of a Notation signature", async () => {
  const { verifiedImagesRecord, verificationKey } = await import("../../../src/core/verification-results.ts");
  const v = new ImageVerifier({ client: registry({ envelopes: [cose()] }), trustRoots: () => new Map() });
  const result = await v.verify(request(notaryEntry()), soon());
  assert.equal(result.status, "verified");
  if (result.status !== "verified") return;
  const record = verifiedImagesRecord(new Map([[verificationKey("p", 0, "r.example/app"), { ...result, digest }]]));
  const signers = (record["r.example/app"] as { signers: string[] }).signers;
  assert.equal(signers.length, 1);
  assert.match(
    signers[0]!,
    /^notary release: x509 C=US, ST=WA, O=Acme, CN=Release \(sha256:[0-9a-f]{64}\), identity "x509\.subject: C=US, ST=WA, O=Acme", COSE envelope of referrer r\.example\/app@sha256:[0-9a-f]{64}$/,
  );
});

test("the image's manifest unanswered while Notation signatures wait to be compared: an outage for the failure policy, not a denial", async () => {
  const client = registry({ envelopes: [jws()] });
  const failing = {
    ...client,
    async getManifest(ref: { tag?: string; digest?: string }) {
      if (ref.digest === digest) throw new RegistryError("unreachable", "connect ECONNREFUSED");
      return client.getManifest(ref);
    },
  };
  const r = await new ImageVerifier({ client: failing, trustRoots: () => new Map() }).verify(request(notaryEntry()), soon());
  assert.equal(r.status, "unavailable", JSON.stringify(r));
  if (r.status === "unavailable") assert.match(r.reason, /did not answer every signature lookup \(connect ECONNREFUSED\)/);
});

test("certificates kept in Kubernetes Secrets: read when needed, once per TTL, and a changed Secret is not served the old result", async () => {
  const stranger = await codeSigningChain("C=US, ST=WA, O=Acme, CN=Release");
  const secrets = new Map([["security/roots/ca.crt", pki.root.pem]]);
  const reads: string[] = [];
  let clock = 0;
  const v = new ImageVerifier({
    client: registry({ envelopes: [jws()] }),
    trustRoots: () => new Map(),
    now: () => clock,
    secretKeys: async (ref) => {
      const name = `${ref.namespace}/${ref.secret}/${ref.key}`;
      reads.push(name);
      const text = secrets.get(name);
      if (text === undefined) throw new Error(`cannot read secret ${ref.namespace}/${ref.secret}: HTTP 404: secrets "${ref.secret}" not found`);
      return text;
    },
  });
  const fromSecret = `{notary: {name: release, certsRef: "k8s://security/roots", trustedIdentities: ["x509.subject: C=US, ST=WA, O=Acme"]}}`;
  const first = await v.verify(request(fromSecret), soon());
  assert.equal(first.status, "verified", JSON.stringify(first));
  assert.deepEqual(reads, ["security/roots/ca.crt"]);
  // Within the TTL the result is answered at once, without reading the Secret again.
  assert.equal(v.peekAll([request(fromSecret)])?.[0]?.status, "verified");
  assert.deepEqual(reads, ["security/roots/ca.crt"]);

  // The Secret now holds another root: once the kept text expires, the signature no longer chains to it.
  secrets.set("security/roots/ca.crt", stranger.root.pem);
  clock += 60_000;
  assert.equal(v.peekAll([request(fromSecret)]), undefined, "the Secret must be read again first");
  const after = await v.verify(request(fromSecret), soon());
  assert.equal(after.status, "denied");
  if (after.status === "denied") assert.match(after.reason, /no certificate of the chain is in the certificates of notary release/);
  assert.deepEqual(reads, ["security/roots/ca.crt", "security/roots/ca.crt"]);

  // A Secret that is gone, or holds no certificate, denies naming the entry and the Secret.
  secrets.delete("security/roots/ca.crt");
  clock += 60_000;
  const gone = await v.verify(request(fromSecret), soon());
  assert.equal(gone.status, "denied");
  if (gone.status === "denied")
    assert.match(gone.reason, /^notary release: certificates k8s:\/\/security\/roots\/ca\.crt: cannot read secret security\/roots: HTTP 404.*this rule denies/);
  secrets.set("security/roots/ca.crt", "not a certificate");
  clock += 60_000;
  const unreadable = await v.verify(request(fromSecret), soon());
  assert.equal(unreadable.status, "denied");
  if (unreadable.status === "denied") assert.match(unreadable.reason, /^notary release: certificates k8s:\/\/security\/roots\/ca\.crt: no PEM certificate/);

  const noApi = await new ImageVerifier({ client: registry({ envelopes: [jws()] }), trustRoots: () => new Map() }).verify(request(fromSecret), soon());
  assert.equal(noApi.status, "denied");
  if (noApi.status === "denied") assert.match(noApi.reason, /^notary release: k8s:\/\/security\/roots cannot be read: the server has no Kubernetes API access/);
});

test("a notary entry naming a TrustRoot verifies against that root's Notation stores, as loaded now", async () => {
  const stranger = await codeSigningChain("C=US, ST=WA, O=Acme, CN=Release");
  const roots = new Map([["acme-notation", { name: "acme-notation", notation: { ca: [pki.root.der], signingAuthority: [], tsa: [] } }]]);
  const v = new ImageVerifier({ client: registry({ envelopes: [jws()] }), trustRoots: () => roots });
  const entry = `{notary: {name: release, trustRoot: acme-notation, trustedIdentities: ["x509.subject: C=US, ST=WA, O=Acme"]}}`;
  const verified = await v.verify(request(entry), soon());
  assert.equal(verified.status, "verified", JSON.stringify(verified));
  // TrustRoots change with a policy reload, which clears the verifier's results (clear()).
  roots.set("acme-notation", { name: "acme-notation", notation: { ca: [stranger.root.der], signingAuthority: [], tsa: [] } });
  v.clear();
  const denied = await v.verify(request(entry), soon());
  assert.equal(denied.status, "denied");
  if (denied.status === "denied") assert.match(denied.reason, /no certificate of the chain is in the certificates of trust root acme-notation/);
});

test("a rule of notary entries only looks for no cosign signature, and reads the image's manifest beside the signatures", async () => {
  const client = registry({ cosign: true, envelopes: [jws()] });
  const asked: string[] = [];
  const counting = {
    ...client,
    async getManifest(ref: { tag?: string; digest?: string }) {
      asked.push(ref.tag ?? ref.digest!);
      return client.getManifest(ref);
    },
  };
  const r = await new ImageVerifier({ client: counting, trustRoots: () => new Map() }).verify(request(notaryEntry()), soon());
  assert.equal(r.status, "verified", JSON.stringify(r));
  assert.equal(asked.filter((a) => a.endsWith(".sig")).length, 0, asked.join(", "));
  assert.equal(asked[0], digest, "the image's manifest is asked for first, before the signatures are listed");

  asked.length = 0;
  const mixed = await new ImageVerifier({ client: counting, trustRoots: () => new Map() }).verify(request(`${keyEntry}, ${notaryEntry()}`, 2), soon());
  assert.equal(mixed.status, "verified", JSON.stringify(mixed));
  assert.equal(asked.filter((a) => a.endsWith(".sig")).length, 1, "a key entry beside it: the cosign tag is read");
});
