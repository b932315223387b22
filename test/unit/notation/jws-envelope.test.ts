// The Notary Project JWS envelope reader (src/notation/jws-envelope.ts) against envelopes written by an independent
// signer (test/support/notation/jws-signer.ts, node:crypto): every allowed key type reads back, and each rule of the
// specification broken on its own is refused with the rule's error code.
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { readJwsEnvelope } from "../../../src/notation/jws-envelope.ts";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";
import { notationPayload, signJwsEnvelope, type NotationSignOptions } from "../../support/notation/jws-signer.ts";
import { codeSigningChain, createRoot, issue, type TestCertificate, type TestKeyType } from "../../support/notation/test-pki.ts";

const DIGEST = "sha256:" + "ab".repeat(32);
const PAYLOAD = notationPayload({ mediaType: "application/vnd.oci.image.manifest.v1+json", digest: DIGEST, size: 1234 });

let chain: Awaited<ReturnType<typeof codeSigningChain>>;
before(async () => {
  chain = await codeSigningChain();
});

function envelope(o: Partial<NotationSignOptions> = {}): Uint8Array {
  return signJwsEnvelope({ payload: PAYLOAD, signer: chain.leaf, chain: chain.chain, ...o });
}

async function refused(bytes: Uint8Array, code: string, message?: RegExp): Promise<void> {
  await assert.rejects(readJwsEnvelope(bytes), (e: unknown) => {
    assert.ok(hasErrorCode(e, code), `want code ${code}, got ${String((e as { code?: string }).code)}: ${(e as Error).message}`);
    if (message) assert.match((e as Error).message, message);
    return true;
  });
}

describe("a valid JWS envelope", () => {
  for (const keyType of ["ec-p256", "ec-p384", "ec-p521", "rsa-2048", "rsa-3072", "rsa-4096"] satisfies TestKeyType[]) {
    test(`signed with ${keyType} reads back with its attributes`, async () => {
      const leaf: TestCertificate = await issue(chain.intermediate, { subject: "C=US, ST=WA, O=Example, CN=Builder", keyType });
      const signingTime = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
      const expiry = new Date(signingTime.getTime() + 86_400_000);
      const read = await readJwsEnvelope(
        signJwsEnvelope({
          payload: PAYLOAD,
          signer: leaf,
          chain: [leaf.der, chain.intermediate.der, chain.root.der],
          signingTime,
          expiry,
          signingAgent: "notation-go/1.3.0",
        }),
      );
      assert.equal(Buffer.from(read.payload).toString(), PAYLOAD);
      assert.equal(read.signingScheme, "notary.x509");
      assert.equal(
        read.algorithm,
        { "ec-p256": "ES256", "ec-p384": "ES384", "ec-p521": "ES512", "rsa-2048": "PS256", "rsa-3072": "PS384", "rsa-4096": "PS512" }[keyType],
      );
      assert.equal(read.signingTime?.getTime(), signingTime.getTime());
      assert.equal(read.expiry?.getTime(), expiry.getTime());
      assert.equal(read.certificateChain.length, 3);
      assert.deepEqual(Buffer.from(read.certificateChain[0]!), Buffer.from(leaf.der));
      assert.equal(read.signingAgent, "notation-go/1.3.0");
      assert.equal(read.timestampToken, undefined);
    });
  }

  test("signingAuthority with its authentic signing time, and a timestamp token carried through", async () => {
    const at = new Date(Math.floor(Date.now() / 1000) * 1000);
    const read = await readJwsEnvelope(
      envelope({ scheme: "notary.x509.signingAuthority", authenticSigningTime: at, timestampToken: new Uint8Array([1, 2, 3]) }),
    );
    assert.equal(read.signingScheme, "notary.x509.signingAuthority");
    assert.equal(read.authenticSigningTime?.getTime(), at.getTime());
    assert.equal(read.signingTime, undefined);
    assert.deepEqual([...read.timestampToken!], [1, 2, 3]);
  });
});

describe("a JWS envelope is refused", () => {
  test("when it is not JSON", () => refused(Buffer.from("{not json"), "malformed"));
  test("when it has a member flattened JWS does not", async () => {
    const o = JSON.parse(Buffer.from(envelope()).toString()) as Record<string, unknown>;
    await refused(Buffer.from(JSON.stringify({ ...o, signatures: [] })), "malformed", /signatures/);
  });
  test("when the payload was changed after signing", () => refused(envelope({ tamperPayload: true }), "signature"));
  test("when signed by another key than the leaf's", async () => {
    const other = await issue(chain.intermediate, { subject: "C=US, ST=WA, O=Example, CN=Other" });
    await refused(signJwsEnvelope({ payload: PAYLOAD, signer: other, chain: chain.chain }), "signature");
  });
  test("when alg is not the one the key implies", () => refused(envelope({ alg: "ES384" }), "algorithm", /does not match/));
  test("when alg is not allowed at all", () => refused(envelope({ alg: "HS256" }), "algorithm"));
  test("when the leaf's key is an RSA size the specification does not allow", async () => {
    const weak = await issue(chain.intermediate, { subject: "C=US, ST=WA, O=Example, CN=Weak", keyType: "rsa-1024" });
    await refused(
      signJwsEnvelope({ payload: PAYLOAD, signer: weak, chain: [weak.der, chain.intermediate.der, chain.root.der], alg: "PS256" }),
      "algorithm",
      /not one/,
    );
  });
  test("when the content type is not the Notary payload's", () => refused(envelope({ contentType: "application/json" }), "content-type"));
  test("when crit is missing", () => refused(envelope({ crit: [] }), "critical-header"));
  test("when the signing scheme is not marked critical", () =>
    refused(envelope({ crit: ["io.cncf.notary.expiry"], expiry: new Date(Date.now() + 60_000) }), "critical-header", /signingScheme/));
  test("when an expiry is not marked critical", () =>
    refused(envelope({ expiry: new Date(Date.now() + 60_000), crit: ["io.cncf.notary.signingScheme"] }), "critical-header", /expiry/));
  test("when a critical header is unknown", () =>
    refused(envelope({ extra: { "com.example.policy": "x" }, crit: ["io.cncf.notary.signingScheme", "com.example.policy"] }), "critical-header", /unknown/));
  test("when a critical header is not present", () =>
    refused(envelope({ crit: ["io.cncf.notary.signingScheme", "com.example.absent"] }), "critical-header", /not a protected header/));
  test("when crit lists a registered header", () => refused(envelope({ crit: ["io.cncf.notary.signingScheme", "alg"] }), "critical-header", /registered/));
  test("when it requires a verification plugin", () =>
    refused(
      envelope({
        extra: { "io.cncf.notary.verificationPlugin": "com.example.plugin" },
        crit: ["io.cncf.notary.signingScheme", "io.cncf.notary.verificationPlugin"],
      }),
      "critical-header",
      /plugin/,
    ));
  test("when the signing scheme is unknown", () => refused(envelope({ scheme: "notary.pgp" }), "missing-header"));
  test("when notary.x509.signingAuthority has no authentic signing time", () =>
    refused(
      envelope({
        scheme: "notary.x509.signingAuthority",
        signingTime: new Date(),
        crit: ["io.cncf.notary.signingScheme", "io.cncf.notary.authenticSigningTime"],
      }),
      "missing-header",
    ));
  test("when notary.x509 carries an authentic signing time", () =>
    refused(envelope({ authenticSigningTime: new Date(), signingTime: new Date() }), "missing-header"));
  test("when the expiry is not after the signing time", () => {
    const t = new Date(Math.floor(Date.now() / 1000) * 1000);
    return refused(envelope({ signingTime: t, expiry: t }), "malformed", /not after/);
  });
  test("when a time is not RFC 3339", () => refused(envelope({ extra: { "io.cncf.notary.signingTime": "yesterday" } }), "malformed", /RFC 3339/));
  test("when the certificate chain is missing", async () => {
    const o = JSON.parse(Buffer.from(envelope()).toString()) as { header: Record<string, unknown> };
    delete o.header.x5c;
    await refused(Buffer.from(JSON.stringify(o)), "missing-header", /x5c/);
  });
  test("when a certificate of the chain is not one", async () => {
    const o = JSON.parse(Buffer.from(envelope()).toString()) as { header: { x5c: string[] } };
    o.header.x5c[0] = Buffer.from("not a certificate").toString("base64");
    await refused(Buffer.from(JSON.stringify(o)), "malformed", /certificate 0/);
  });
  test("when it is larger than verification reads", () => refused(new Uint8Array(4 * 1024 * 1024 + 1), "too-large"));
  test("a self-signed leaf signs a valid envelope (the chain's trust is judged later, not here)", async () => {
    const self = await createRoot({ subject: "C=US, ST=WA, O=Example, CN=Self", isCa: false });
    const read = await readJwsEnvelope(signJwsEnvelope({ payload: PAYLOAD, signer: self }));
    assert.equal(read.certificateChain.length, 1);
  });
});
