// Notary Project signatures found through the OCI 1.1 Referrers API, through the whole read path a server runs
// (RegistryClient over HTTPS → discovery → the notary entry's verification), on the in-process fake registry:
// docker-registry 2.8, the real registry here, has no Referrers API (its fallback, the referrers tag schema, is shown
// against it in test/e2e/notation-signatures.test.ts and notation-admission.test.ts). The API answers an image
// index of the image's referrers (filtered by artifact type or not, in pages); the signatures are JWS and COSE
// envelopes by the project's test signers, beside a referrer of another type that must not be read.
import assert from "node:assert/strict";
import { before, test, type TestContext } from "node:test";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { RegistryClient, type RoundTrip } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { ImageVerifier, type VerificationRequest } from "../../../src/verification/image-verifier.ts";
import { signCoseEnvelope } from "../../support/notation/cose-signer.ts";
import { notationPayload, signJwsEnvelope } from "../../support/notation/jws-signer.ts";
import { notationSignatureManifest } from "../../support/notation/notation-push.ts";
import { codeSigningChain } from "../../support/notation/test-pki.ts";
import { FakeRegistry, imageManifest, json, OCI_INDEX, OCI_MANIFEST, sha256, testTls } from "../registry/fake-registry.ts";

const REPO = "team/app";

let pki: Awaited<ReturnType<typeof codeSigningChain>>;
before(async () => {
  pki = await codeSigningChain("C=US, ST=WA, O=Acme, CN=Release");
});

/** A registry holding the image and, as its referrers, the given envelopes' signature manifests and an SBOM. */
async function registryWith(
  t: TestContext,
  envelopesFor: (payload: string) => Array<{ mediaType: string; body: Uint8Array }>,
  opts: { pageSize?: number } = {},
) {
  const image = imageManifest("notation-referrers-api");
  const referrers: Array<{ mediaType: string; digest: string; size: number; artifactType?: string }> = [];
  const registry = await FakeRegistry.start({
    https: true,
    intercept: (req, res) => {
      const prefix = `/v2/${REPO}/referrers/${sha256(image)}`;
      if (!req.url?.startsWith(prefix)) return false;
      const url = new URL(req.url, "https://x");
      const type = url.searchParams.get("artifactType");
      const listed = type === null ? referrers : referrers.filter((r) => r.artifactType === type);
      if (type !== null) res.setHeader("oci-filters-applied", "artifactType");
      const size = opts.pageSize ?? listed.length;
      const page = Number(url.searchParams.get("page") ?? 0);
      if ((page + 1) * size < listed.length)
        res.setHeader("link", `<${prefix}?page=${page + 1}${type ? `&artifactType=${encodeURIComponent(type)}` : ""}>; rel="next"`);
      json(res, 200, { schemaVersion: 2, mediaType: OCI_INDEX, manifests: listed.slice(page * size, (page + 1) * size) });
      return true;
    },
  });
  const digest = registry.putManifest(REPO, "1.0", image);
  const subject = { mediaType: OCI_MANIFEST, digest, size: image.length };
  for (const envelope of envelopesFor(notationPayload(subject))) {
    // The signature manifest as notation pushes it (test/support/notation/notation-push.ts), stored in the registry.
    const { artifact, signature } = notationSignatureManifest(envelope, subject);
    for (const blob of artifact.blobs.values()) registry.putBlob(blob);
    registry.putManifest(REPO, undefined, artifact.manifest);
    referrers.push(signature.descriptor);
  }
  // Another kind of referrer: never fetched for a notary entry.
  const sbom = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, artifactType: "application/spdx+json", layers: [], subject }));
  referrers.push({ mediaType: OCI_MANIFEST, digest: registry.putManifest(REPO, undefined, sbom), size: sbom.length, artifactType: "application/spdx+json" });

  const { caPem } = await testTls();
  const trips: RoundTrip[] = [];
  const client = new RegistryClient({
    settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]),
    onRoundTrip: (trip) => trips.push(trip),
  });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  return { registry, client, trips, digest, sbomDigest: referrers.at(-1)!.digest as string };
}

function request(host: string, digest: string): VerificationRequest {
  const text = [
    "apiVersion: imprimatur.dev/v1alpha1",
    "kind: ImagePolicy",
    "metadata: {name: p}",
    "spec:",
    "  rules:",
    `    - action: allow`,
    `      images: ["${host}/*"]`,
    `      attestors: [{entries: [{notary: {name: release, certs: ${JSON.stringify(pki.root.pem)}, trustedIdentities: ["x509.subject: C=US, ST=WA, O=Acme"]}}]}]`,
    "",
  ].join("\n");
  const { policies, errors } = parsePolicyText(text, "p.yaml");
  assert.deepEqual(errors, []);
  const rule = policies.ImagePolicy[0]!.rules[0]!;
  return { image: { registry: host, repository: REPO, digest }, policy: "p", rule: 0, attestors: rule.attestors!, lookup: () => [] };
}

const jws = (payload: string) => ({ mediaType: "application/jose+json", body: signJwsEnvelope({ payload, signer: pki.leaf, chain: pki.chain }) });
const cose = (payload: string) => ({
  mediaType: "application/cose",
  body: signCoseEnvelope({ payload: new TextEncoder().encode(payload), signer: pki.leaf, chain: pki.chain }),
});

for (const [format, envelope, name] of [
  ["JWS", jws, "notation-jws"],
  ["COSE", cose, "notation-cose"],
] as const)
  test(`a ${format} signature listed by the Referrers API is found and verified; the referrers tag and the other referrer are never read`, async (t) => {
    const { client, registry, trips, digest, sbomDigest } = await registryWith(t, (payload) => [envelope(payload)]);
    const result = await new ImageVerifier({ client, trustRoots: () => new Map() }).verify(request(registry.host, digest), Date.now() + 10_000);
    assert.equal(result.status, "verified", JSON.stringify(result));
    if (result.status !== "verified") return;
    assert.equal(result.evidence[0]!.format, name);
    assert.match(result.evidence[0]!.envelope ?? "", new RegExp(`^referrer ${registry.host.replace(/[.]/g, "\\.")}/${REPO}@sha256:[0-9a-f]{64}$`));
    const urls = trips.map((trip) => trip.url);
    assert.ok(
      urls.some((u) => u.includes(`/referrers/${digest}`)),
      urls.join("\n"),
    );
    assert.ok(!urls.some((u) => u.includes(`/manifests/${digest.replace(":", "-")}`)), `the referrers tag was asked for:\n${urls.join("\n")}`);
    assert.ok(!urls.some((u) => u.includes(sbomDigest)), "the SBOM referrer was read");
    assert.ok(!urls.some((u) => u.endsWith(".sig")), "a notary-only rule reads no cosign tag");
  });

test("referrers in pages: a signature on the second page counts; a tampered one on the first is named in the denial when none verifies", async (t) => {
  const { client, registry, digest } = await registryWith(
    t,
    (payload) => {
      const tampered = JSON.parse(Buffer.from(jws(payload).body).toString()) as { payload: string };
      tampered.payload = Buffer.from(notationPayload({ mediaType: OCI_MANIFEST, digest: `sha256:${"0".repeat(64)}`, size: 1 })).toString("base64url");
      return [{ mediaType: "application/jose+json", body: Buffer.from(JSON.stringify(tampered)) }, cose(payload)];
    },
    { pageSize: 1 },
  );
  const verifier = new ImageVerifier({ client, trustRoots: () => new Map() });
  const result = await verifier.verify(request(registry.host, digest), Date.now() + 10_000);
  assert.equal(result.status, "verified", JSON.stringify(result));
  if (result.status === "verified") assert.equal(result.evidence[0]!.format, "notation-cose");

  const {
    client: onlyTampered,
    registry: other,
    digest: otherDigest,
  } = await registryWith(t, (payload) => {
    const tampered = JSON.parse(Buffer.from(jws(payload).body).toString()) as { payload: string };
    tampered.payload = Buffer.from(notationPayload({ mediaType: OCI_MANIFEST, digest: `sha256:${"0".repeat(64)}`, size: 1 })).toString("base64url");
    return [{ mediaType: "application/jose+json", body: Buffer.from(JSON.stringify(tampered)) }];
  });
  const denied = await new ImageVerifier({ client: onlyTampered, trustRoots: () => new Map() }).verify(request(other.host, otherDigest), Date.now() + 10_000);
  assert.equal(denied.status, "denied");
  if (denied.status === "denied") assert.match(denied.reason, /notary release: referrer .*: the signature does not verify/);
});
