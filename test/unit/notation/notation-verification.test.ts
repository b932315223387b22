// One Notary Project signature against one `notary` attestor entry (src/notation/notation-verification.ts): what
// each level enforces and what it only logs, in JWS and COSE alike. Integrity and the payload naming the manifest are
// enforced at every level; authenticity from permissive up; expiry and the authentic time only under strict.
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { parseTrustedIdentity as parseIdentity } from "../../../src/core/image-policy/notary-identities.ts";
import { verifyNotationSignature, type NotationLevel, type NotationTrust } from "../../../src/notation/notation-verification.ts";
import { signCoseEnvelope } from "../../support/notation/cose-signer.ts";
import { notationPayload, signJwsEnvelope } from "../../support/notation/jws-signer.ts";
import { codeSigningChain, createRoot, issue, SERVER_AUTH, type TestCertificate } from "../../support/notation/test-pki.ts";

const MANIFEST = { digest: "sha256:" + "ab".repeat(32), mediaType: "application/vnd.oci.image.manifest.v1+json", size: 1234 };
const PAYLOAD = notationPayload(MANIFEST);
const HOUR = 3_600_000;

let pki: Awaited<ReturnType<typeof codeSigningChain>>;
let otherRoot: TestCertificate;
before(async () => {
  pki = await codeSigningChain("C=US, ST=WA, L=Seattle, O=Acme, CN=Builder");
  otherRoot = await createRoot({ subject: "C=US, ST=WA, O=Other, CN=Other Root" });
});

function parseTrustedIdentity(text: string) {
  const parsed = parseIdentity(text);
  if ("error" in parsed) throw new Error(parsed.error);
  return parsed.identity;
}

function trust(o: Partial<NotationTrust> = {}): NotationTrust {
  return {
    ca: [pki.root.der],
    signingAuthority: [],
    tsa: [],
    storeName: "the entry's certs",
    identities: "*",
    level: "strict",
    verifyTimestamp: "always",
    ...o,
  };
}

type Format = "jws" | "cose";
interface SignOpts {
  payload?: string;
  signer?: TestCertificate;
  chain?: Uint8Array[];
  scheme?: string;
  signingTime?: Date;
  authenticSigningTime?: Date;
  expiry?: Date;
  tamperPayload?: boolean;
}

function sign(format: Format, o: SignOpts = {}): { bytes: Uint8Array; mediaType: string } {
  const common = {
    signer: o.signer ?? pki.leaf,
    chain: o.chain ?? pki.chain,
    ...(o.scheme ? { scheme: o.scheme } : {}),
    ...(o.expiry ? { expiry: o.expiry } : {}),
  };
  if (format === "jws")
    return {
      mediaType: "application/jose+json",
      bytes: signJwsEnvelope({
        payload: o.payload ?? PAYLOAD,
        ...common,
        ...(o.signingTime ? { signingTime: o.signingTime } : {}),
        ...(o.authenticSigningTime ? { authenticSigningTime: o.authenticSigningTime } : {}),
        ...(o.tamperPayload ? { tamperPayload: true } : {}),
      }),
    };
  return {
    mediaType: "application/cose",
    bytes: signCoseEnvelope({
      payload: new TextEncoder().encode(o.payload ?? PAYLOAD),
      ...common,
      ...(o.signingTime ? { signingTime: o.signingTime } : {}),
      ...(o.authenticSigningTime ? { authenticSigningTime: o.authenticSigningTime } : {}),
      ...(o.tamperPayload ? { tamperPayload: true } : {}),
    }),
  };
}

async function verify(format: Format, o: SignOpts, t: Partial<NotationTrust>) {
  const { bytes, mediaType } = sign(format, o);
  return verifyNotationSignature(bytes, mediaType, MANIFEST, trust(t));
}

function denied(outcome: Awaited<ReturnType<typeof verifyNotationSignature>>, reason: RegExp): void {
  assert.equal(outcome.ok, false, `expected a denial matching ${reason}`);
  if (!outcome.ok) assert.match(outcome.reason, reason);
}

function passedLogging(outcome: Awaited<ReturnType<typeof verifyNotationSignature>>, logged: RegExp): void {
  assert.equal(outcome.ok, true, outcome.ok ? "" : outcome.reason);
  if (outcome.ok)
    assert.ok(
      outcome.logged.some((l) => logged.test(l)),
      `logged: ${JSON.stringify(outcome.logged)}`,
    );
}

for (const format of ["jws", "cose"] as const)
  describe(`a ${format.toUpperCase()} signature`, () => {
    test("by a trusted chain and identity verifies, naming the leaf's subject and fingerprint", async () => {
      const outcome = await verify(format, {}, { identities: [parseTrustedIdentity("x509.subject: C=US, ST=WA, O=Acme")] });
      assert.equal(outcome.ok, true, outcome.ok ? "" : outcome.reason);
      if (outcome.ok) {
        assert.match(outcome.signer, /^x509 C=US, ST=WA, L=Seattle, O=Acme, CN=Builder \(sha256:[0-9a-f]{64}\)$/);
        assert.deepEqual(outcome.logged, []);
        assert.equal(outcome.envelope.mediaType, format === "jws" ? "application/jose+json" : "application/cose");
      }
    });

    test("by a chain that ends elsewhere: denied from permissive up, logged under audit", async () => {
      for (const level of ["strict", "permissive"] satisfies NotationLevel[])
        denied(await verify(format, {}, { ca: [otherRoot.der], level }), /no certificate of the chain is in the entry's certs \(ca\)/);
      passedLogging(await verify(format, {}, { ca: [otherRoot.der], level: "audit" }), /^authenticity: no certificate/);
    });

    test("by another identity: denied, or logged under audit", async () => {
      const identities = [parseTrustedIdentity("x509.subject: C=US, ST=WA, O=Acme, CN=Release")];
      denied(await verify(format, {}, { identities }), /subject C=US, ST=WA, L=Seattle, O=Acme, CN=Builder is none of the trusted identities/);
      passedLogging(await verify(format, {}, { identities, level: "audit" }), /^authenticity: .*trusted identities/);
    });

    test("that expired: denied under strict, logged under permissive", async () => {
      const o = { signingTime: new Date(Date.now() - 2 * HOUR), expiry: new Date(Date.now() - HOUR) };
      denied(await verify(format, o, {}), /the signature expired at/);
      passedLogging(await verify(format, o, { level: "permissive" }), /^expiry: /);
    });

    test("by a leaf that expired, with no timestamp verified: denied under strict, logged under permissive", async () => {
      const old = await issue(pki.intermediate, {
        subject: "C=US, ST=WA, O=Acme, CN=Old",
        notBefore: new Date(Date.now() - 48 * HOUR),
        notAfter: new Date(Date.now() - HOUR),
      });
      const o = { signer: old, chain: [old.der, pki.intermediate.der, pki.root.der] };
      denied(await verify(format, o, {}), /certificate 0 .* not at the present/);
      passedLogging(await verify(format, o, { level: "permissive" }), /^authenticTimestamp: certificate 0/);
    });

    test("with tsaCerts but no timestamp: denied under strict", async () => {
      denied(await verify(format, {}, { tsa: [otherRoot.der] }), /no RFC 3161 timestamp/);
    });

    test("of a signing authority: its chain must be in the signingAuthority store, and valid at the authentic signing time", async () => {
      const at = new Date(Math.floor(Date.now() / 1000) * 1000 - HOUR / 2);
      denied(await verify(format, { scheme: "notary.x509.signingAuthority", authenticSigningTime: at }, {}), /\(signingAuthority\)/);
      const outcome = await verify(format, { scheme: "notary.x509.signingAuthority", authenticSigningTime: at }, { ca: [], signingAuthority: [pki.root.der] });
      assert.equal(outcome.ok, true, outcome.ok ? "" : outcome.reason);
      if (outcome.ok) assert.equal(outcome.signedAt?.getTime(), at.getTime());
      const before = new Date(Date.now() - 10 * 24 * HOUR);
      denied(
        await verify(format, { scheme: "notary.x509.signingAuthority", authenticSigningTime: before }, { ca: [], signingAuthority: [pki.root.der] }),
        /not at the authentic signing time/,
      );
    });

    test("of another manifest, or tampered with, is denied at every level, audit included", async () => {
      for (const level of ["strict", "permissive", "audit"] satisfies NotationLevel[]) {
        denied(await verify(format, { payload: notationPayload({ ...MANIFEST, digest: "sha256:" + "cd".repeat(32) }) }, { level }), /is of sha256:cdcd/);
        denied(await verify(format, { payload: notationPayload({ ...MANIFEST, size: 99 }) }, { level }), /99 bytes/);
        denied(await verify(format, { tamperPayload: true }, { level }), /does not verify|signature/);
      }
    });

    test("by a leaf that is not a code-signing certificate is denied at every level", async () => {
      const tls = await issue(pki.intermediate, { subject: "C=US, ST=WA, O=Acme, CN=Web", extendedKeyUsage: { usages: [SERVER_AUTH] } });
      denied(
        await verify(format, { signer: tls, chain: [tls.der, pki.intermediate.der, pki.root.der] }, { level: "audit" }),
        /extendedKeyUsage includes 1\.3\.6\.1\.5\.5\.7\.3\.1/,
      );
    });
  });

test("an envelope of another media type is not read", async () => {
  const outcome = await verifyNotationSignature(new Uint8Array([1]), "application/pgp-signature", MANIFEST, trust());
  denied(outcome, /neither JWS nor COSE/);
});
