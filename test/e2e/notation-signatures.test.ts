// Notary Project signatures through `imprimatur verify` as a user runs it, against a real docker-registry (TLS, no
// Referrers API: signatures are found through the referrers tag schema, as notation 1.x pushes them by default).
// The signatures are written by the project's own test signers (JWS and COSE envelopes over a test PKI and TSA:
// test/support/notation/); the policies are the YAML users write. A JWS and a COSE signature each satisfy a notary
// entry; count: 2 over a cosign key and a Notation certificate needs both; an untrusted chain, another identity and a
// signature of another image are denied naming why; an expired certificate counts only with a verified timestamp.
// With `revocation: enforce`, a leaf that OpenSSL's OCSP responder reports revoked is denied naming the responder,
// and one it reports good is admitted (test/support/notation/revocation-services.ts, reached over loopback as the
// registries file allows).
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { stringify } from "yaml";
import { imprimatur } from "../support/cli-process.ts";
import { signCoseEnvelope } from "../support/notation/cose-signer.ts";
import { notationPayload, signJwsEnvelope } from "../support/notation/jws-signer.ts";
import { pushNotationSignatures } from "../support/notation/notation-push.ts";
import { codeSigningChain, createRoot, issue, type TestCertificate } from "../support/notation/test-pki.ts";
import { createTestTsa } from "../support/notation/test-tsa.ts";
import { startRevocationServices, type RevocationServices } from "../support/notation/revocation-services.ts";
import { buildOciLayout } from "../support/oci-layout.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { teardown } from "../support/teardown.ts";

let dir: string;
let registry: TestRegistry;
let layout: string | undefined;
let cosignKey: SigningKey;
let pki: Awaited<ReturnType<typeof codeSigningChain>>;
let tsa: Awaited<ReturnType<typeof createTestTsa>>;
let oldRoot: TestCertificate;
let revocation: RevocationServices | undefined;

const REPOSITORIES = [
  "jws",
  "cose",
  "mixed-both",
  "mixed-cosign-only",
  "untrusted",
  "other-image",
  "expired-timestamped",
  "expired-bare",
  "revoked",
  "revocation-good",
] as const;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-notation-"));
  registry = await startRegistry({ auth: "none" });
  const image = await buildOciLayout({ tag: "1.0", seed: "notation-signatures" });
  layout = image.layoutDir;
  cosignKey = generateSigningKey("ecdsa-p256");
  pki = await codeSigningChain("C=US, ST=WA, L=Seattle, O=Acme, CN=Release");
  tsa = await createTestTsa({ notBefore: new Date(Date.now() - 72 * 3_600_000) });
  const target = { url: registry.url, caPem: registry.caPem, username: registry.username, password: registry.password };
  for (const repository of REPOSITORIES) await registry.push(image.layoutDir, "1.0", repository, "1.0");
  const { raw, digest } = await registry.inspectRaw("jws", "1.0");
  const subject = { mediaType: (JSON.parse(raw.toString()) as { mediaType: string }).mediaType, digest, size: raw.length };
  const payload = notationPayload(subject);
  const jws = (o: Partial<Parameters<typeof signJwsEnvelope>[0]> = {}) => ({
    mediaType: "application/jose+json",
    body: signJwsEnvelope({ payload, signer: pki.leaf, chain: pki.chain, ...o }),
    chain: o.chain ?? pki.chain,
  });
  await pushNotationSignatures(target, "jws", subject, [jws()]);
  await pushNotationSignatures(target, "cose", subject, [
    {
      mediaType: "application/cose",
      body: signCoseEnvelope({ payload: new TextEncoder().encode(payload), signer: pki.leaf, chain: pki.chain }),
      chain: pki.chain,
    },
  ]);
  await pushCosignSignatures({ registry, repository: "mixed-both", digest, signers: [{ key: cosignKey }] });
  await pushNotationSignatures(target, "mixed-both", subject, [jws()]);
  await pushCosignSignatures({ registry, repository: "mixed-cosign-only", digest, signers: [{ key: cosignKey }] });
  const stranger = await codeSigningChain("C=US, ST=WA, L=Seattle, O=Acme, CN=Release");
  await pushNotationSignatures(target, "untrusted", subject, [jws({ signer: stranger.leaf, chain: stranger.chain })]);
  const otherPayload = notationPayload({ ...subject, digest: `sha256:${"0".repeat(64)}` });
  await pushNotationSignatures(target, "other-image", subject, [
    { mediaType: "application/jose+json", body: signJwsEnvelope({ payload: otherPayload, signer: pki.leaf, chain: pki.chain }) },
  ]);
  // A leaf that expired an hour ago, signed (and time-stamped) while it was valid.
  const hour = 3_600_000;
  // Its root and CA were valid then too (the test PKI's default is from an hour ago).
  const since = new Date(Date.now() - 72 * hour);
  oldRoot = await createRoot({ subject: "C=US, ST=WA, O=Acme, CN=Acme Root 2025", notBefore: since });
  const oldCa = await issue(oldRoot, { subject: "C=US, ST=WA, O=Acme, CN=Acme Signing CA 2025", isCa: true, notBefore: since });
  const old = await issue(oldCa, {
    subject: "C=US, ST=WA, O=Acme, CN=Release",
    notBefore: new Date(Date.now() - 48 * hour),
    notAfter: new Date(Date.now() - hour),
  });
  const oldChain = [old.der, oldCa.der, oldRoot.der];
  const signedAt = new Date(Date.now() - 2 * hour);
  const stamped = signJwsEnvelope({ payload, signer: old, chain: oldChain, signingTime: signedAt });
  const signature = Buffer.from((JSON.parse(Buffer.from(stamped).toString()) as { signature: string }).signature, "base64url");
  const token = await tsa.timestamp(signature, { genTime: signedAt });
  // The token goes in the unprotected header, over the signature's bytes: added to the envelope as signed.
  const withToken = JSON.parse(Buffer.from(stamped).toString()) as { header: Record<string, unknown> };
  withToken.header["io.cncf.notary.timestampSignature"] = Buffer.from(token).toString("base64");
  await pushNotationSignatures(target, "expired-timestamped", subject, [{ mediaType: "application/jose+json", body: Buffer.from(JSON.stringify(withToken)) }]);
  await pushNotationSignatures(target, "expired-bare", subject, [{ mediaType: "application/jose+json", body: stamped }]);

  // Leaves that name the intermediate's OCSP responder and CRL: one good, one revoked for key compromise.
  revocation = await startRevocationServices(pki.intermediate);
  const named = (cn: string) =>
    issue(pki.intermediate, { subject: `C=US, ST=WA, L=Seattle, O=Acme, CN=${cn}`, ocspUrls: [revocation!.ocspUrl], crlUrls: [revocation!.crlUrl] });
  const [good, revoked] = [await named("Release"), await named("Release 2")];
  await revocation.register(good, revoked);
  await revocation.revoke(revoked, { reason: 1 });
  for (const [repository, leaf] of [
    ["revocation-good", good],
    ["revoked", revoked],
  ] as const)
    await pushNotationSignatures(target, repository, subject, [jws({ signer: leaf, chain: [leaf.der, pki.intermediate.der, pki.root.der] })]);

  const notary = (extra: Record<string, unknown> = {}) => ({
    notary: { name: "release", certs: pki.root.pem, trustedIdentities: ["x509.subject: C=US, ST=WA, O=Acme"], ...extra },
  });
  const rule = (repository: string, attestors: unknown) => ({ action: "allow", images: [`${registry.host}/${repository}:*`], attestors });
  const rules = [
    ...["jws", "cose", "untrusted", "other-image"].map((r) => rule(r, [{ entries: [notary()] }])),
    rule("expired-bare", [{ entries: [notary({ certs: oldRoot.pem })] }]),
    ...["revoked", "revocation-good"].map((r) => rule(r, [{ entries: [notary({ revocation: "enforce" })] }])),
    rule("expired-timestamped", [{ entries: [notary({ certs: oldRoot.pem, tsaCerts: tsa.root.pem })] }]),
    ...["mixed-both", "mixed-cosign-only"].map((r) =>
      rule(r, [{ count: 2, entries: [{ staticKey: { name: "build", key: cosignKey.publicKeyPem, ignoreTlog: true } }, notary()] }]),
    ),
  ];
  await writeFile(
    join(dir, "policies.yaml"),
    stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePolicy", metadata: { name: "notation" }, spec: { rules, default: "deny" } }),
  );
  // The revocation services are on loopback: the registries file lets the server reach them there.
  const registries = JSON.parse(registry.registryConfig()) as { registries: Array<Record<string, unknown>> };
  for (const url of [revocation.ocspUrl, revocation.crlUrl]) registries.registries.push({ host: new URL(url).host, allowLocalAddresses: true });
  await writeFile(join(dir, "registries.yaml"), JSON.stringify(registries));
});

after(() =>
  teardown([
    () => revocation?.stop(),
    () => registry?.stop(),
    () => layout && rm(layout, { recursive: true, force: true }),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

interface Judged {
  allowed: boolean;
  /** The denial's messages, joined. */
  reason: string;
  signers: string[];
}

async function verifyAll(): Promise<Map<string, Judged>> {
  const images = REPOSITORIES.map((r) => `${registry.host}/${r}:1.0`);
  const r = await imprimatur(["verify", "--policies", join(dir, "policies.yaml"), "--registries", join(dir, "registries.yaml"), "-o", "json", ...images]);
  assert.equal(r.code, 1, r.stderr);
  const results = (JSON.parse(r.stdout) as { results: Array<{ image: string; allowed: boolean; signers: string[]; violations: Array<{ message: string }> }> })
    .results;
  return new Map(
    results.map((x) => [
      x.image.slice(registry.host.length + 1, -":1.0".length),
      { allowed: x.allowed, signers: x.signers, reason: x.violations.map((v) => v.message).join("; ") },
    ]),
  );
}

test("imprimatur verify judges Notary Project signatures found through the referrers tag schema", { timeout: 120_000 }, async () => {
  const results = await verifyAll();
  const outcome = (r: string) => results.get(r)!;
  for (const [repository, format] of [
    ["jws", "JWS"],
    ["cose", "COSE"],
  ] as const) {
    assert.equal(outcome(repository).allowed, true, outcome(repository).reason);
    assert.match(
      outcome(repository).signers.join("\n"),
      new RegExp(
        `^notary release: x509 C=US, ST=WA, L=Seattle, O=Acme, CN=Release \\(sha256:[0-9a-f]{64}\\), identity "x509\\.subject: C=US, ST=WA, O=Acme", ${format} envelope of referrer ${registry.host}/${repository}@sha256:[0-9a-f]{64}$`,
      ),
    );
  }
  assert.equal(outcome("mixed-both").allowed, true, outcome("mixed-both").reason);
  assert.equal(outcome("mixed-both").signers.length, 2);
  assert.equal(outcome("mixed-cosign-only").allowed, false);
  assert.match(outcome("mixed-cosign-only").reason, /needs all 2: key build verified; notary release: no Notary Project signature found/);
  assert.equal(outcome("untrusted").allowed, false);
  assert.match(outcome("untrusted").reason, /no certificate of the chain is in the certificates of notary release/);
  assert.equal(outcome("other-image").allowed, false);
  assert.match(outcome("other-image").reason, /the signature is of sha256:0{64}, not of sha256:/);
  assert.equal(outcome("expired-bare").allowed, false);
  assert.match(outcome("expired-bare").reason, /certificate 0 .* not at the present/);
  assert.equal(outcome("expired-timestamped").allowed, true, outcome("expired-timestamped").reason);
  assert.match(outcome("expired-timestamped").signers.join(""), /\(signed \d{4}-\d{2}-\d{2}T/);
  assert.equal(outcome("revocation-good").allowed, true, outcome("revocation-good").reason);
  assert.equal(outcome("revoked").allowed, false);
  assert.match(
    outcome("revoked").reason,
    new RegExp(
      `notary release: referrer .*: certificate 0 \\(C=US, ST=WA, L=Seattle, O=Acme, CN=Release 2\\) is revoked since [^,]+, reason keyCompromise \\(OCSP ${revocation!.ocspUrl.replace(/[.]/g, "\\.")}\\)`,
    ),
  );
});
