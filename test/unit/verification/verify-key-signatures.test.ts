// Key signatures in cosign's `.sig` layout through the Sigstore verifier: the layer is adapted into a bundle
// (signed-item.ts) and judged per attestor entry (verify-entry.ts). Signatures are made here with node:crypto
// from cosign's simple-signing format; keyless and transparency-log cases use the project's test signer.
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign } from "node:crypto";
import { test } from "node:test";
import { cosignLayerToItem, SignatureFormatError } from "../../../src/verification/signed-item.ts";
import { publicGoodTrustRoot } from "../../../src/verification/trust-roots.ts";
import { imageBinding, publicKeyFromPem, verifyItem } from "../../../src/verification/verify-entry.ts";
import { leafAttestorsWith } from "../../support/verification-fixtures.ts";

const digest = `sha256:${createHash("sha256").update("image manifest").digest("hex")}`;
const other = `sha256:${createHash("sha256").update("another manifest").digest("hex")}`;

function payloadFor(d: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      critical: {
        identity: { "docker-reference": "registry.example.com/app" },
        image: { "docker-manifest-digest": d },
        type: "cosign container image signature",
      },
      optional: null,
    }),
  );
}

const keys = {
  p256: generateKeyPairSync("ec", { namedCurve: "P-256" }),
  p384: generateKeyPairSync("ec", { namedCurve: "P-384" }),
  rsa: generateKeyPairSync("rsa", { modulusLength: 2048 }),
  ed25519: generateKeyPairSync("ed25519"),
};
type KeyName = keyof typeof keys;
const hashOf: Record<KeyName, string | null> = { p256: "sha256", p384: "sha384", rsa: "sha256", ed25519: null };
const pem = (k: KeyName) => keys[k].publicKey.export({ type: "spki", format: "pem" }).toString();

function entryFor(k: KeyName, ignoreTlog: boolean) {
  return leafAttestorsWith(`{staticKey: {name: ${k}, ignoreTlog: ${ignoreTlog}, key: ${JSON.stringify(pem(k))}}}`)[0]!;
}

function signedLayer(k: KeyName, payload: Buffer) {
  const signature = sign(hashOf[k], payload, keys[k].privateKey).toString("base64");
  return cosignLayerToItem(payload, { "dev.cosignproject.cosign/signature": signature }, "tag sha256-….sig layer 0");
}

for (const k of Object.keys(keys) as KeyName[]) {
  test(`a ${k} key signature over the admitted digest verifies with ignoreTlog`, () => {
    const outcome = verifyItem(signedLayer(k, payloadFor(digest)), entryFor(k, true), {
      binding: imageBinding(digest),
      trustRoot: undefined,
      key: publicKeyFromPem(pem(k)),
    });
    assert.ok(outcome.ok, outcome.ok ? "" : outcome.reason);
    assert.match(outcome.evidence.signer, /^key sha256:[0-9a-f]{64}$/);
    assert.equal(outcome.evidence.format, "cosign-signature");
  });
}

test("another key's signature is not this key's", () => {
  const outcome = verifyItem(signedLayer("p256", payloadFor(digest)), entryFor("p384", true), {
    binding: imageBinding(digest),
    trustRoot: undefined,
    key: publicKeyFromPem(pem("p384")),
  });
  assert.deepEqual(outcome, { ok: false, reason: "the signature does not verify with this key", notThisSigner: true });
});

test("a valid signature for another digest proves nothing about this one", () => {
  const outcome = verifyItem(signedLayer("p256", payloadFor(other)), entryFor("p256", true), {
    binding: imageBinding(digest),
    trustRoot: undefined,
    key: publicKeyFromPem(pem("p256")),
  });
  assert.deepEqual(outcome, { ok: false, reason: `signs ${other}, not ${digest}` });
});

test("a signed payload of another type, or without one, is not an image signature even for the right digest", () => {
  const withType = (type: unknown) => {
    const payload = JSON.parse(payloadFor(digest).toString()) as { critical: { type?: unknown } };
    if (type === undefined) delete payload.critical.type;
    else payload.critical.type = type;
    return Buffer.from(JSON.stringify(payload));
  };
  for (const type of ["atomic container signature", "cosign container image signature v2", 7, undefined]) {
    const outcome = verifyItem(signedLayer("p256", withType(type)), entryFor("p256", true), {
      binding: imageBinding(digest),
      trustRoot: undefined,
      key: publicKeyFromPem(pem("p256")),
    });
    assert.deepEqual(outcome, { ok: false, reason: 'the signed payload is not a "cosign container image signature"' }, `type ${JSON.stringify(type)}`);
  }
});

test("a tampered payload fails the signature check", () => {
  const item = signedLayer("p256", payloadFor(digest));
  item.artifact = Buffer.from(item.artifact!.toString().replace("registry.example.com", "evil.example.com"));
  const outcome = verifyItem(item, entryFor("p256", true), { binding: imageBinding(digest), trustRoot: undefined, key: publicKeyFromPem(pem("p256")) });
  assert.equal(outcome.ok, false);
});

test("without ignoreTlog, a key signature with no log entry is refused, saying so", () => {
  const outcome = verifyItem(signedLayer("p256", payloadFor(digest)), entryFor("p256", false), {
    binding: imageBinding(digest),
    trustRoot: publicGoodTrustRoot().sigstore,
    key: publicKeyFromPem(pem("p256")),
  });
  assert.deepEqual(outcome, { ok: false, reason: "signed by this key, but without a transparency-log entry (ignoreTlog: true accepts that)" });
});

test("unreadable annotations are a SignatureFormatError naming the layer", () => {
  const payload = payloadFor(digest);
  assert.throws(
    () => cosignLayerToItem(payload, {}, "L"),
    (e: unknown) => e instanceof SignatureFormatError && /L: no dev\.cosignproject\.cosign\/signature/.test(e.message),
  );
  assert.throws(() => cosignLayerToItem(payload, { "dev.cosignproject.cosign/signature": "%%%" }, "L"), /is not base64/);
  assert.throws(
    () => cosignLayerToItem(payload, { "dev.cosignproject.cosign/signature": "AAAA", "dev.sigstore.cosign/bundle": "{" }, "L"),
    /dev\.sigstore\.cosign\/bundle is not JSON/,
  );
  assert.throws(
    () => cosignLayerToItem(payload, { "dev.cosignproject.cosign/signature": "AAAA", "dev.sigstore.cosign/certificate": "garbage" }, "L"),
    /is not a PEM certificate/,
  );
});
