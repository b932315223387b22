// Verifying from a digest alone, at the edges: each refusal says why, and a signature that is not even a
// signature is a refusal, never a crash.
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign } from "node:crypto";
import { test } from "node:test";
import { verifyPrehashed } from "../../../src/verification/prehashed-signature.ts";

const data = Buffer.from("release tarball bytes");
const digest = createHash("sha256").update(data).digest();
const otherDigest = createHash("sha256").update("other bytes").digest();
const DOES_NOT_VERIFY = { ok: false, reason: "the signature does not verify with this key" };

test("an ECDSA curve without a digest verifier is refused by name", () => {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "secp256k1" });
  assert.deepEqual(verifyPrehashed(publicKey, digest, sign("sha256", data, privateKey)), {
    ok: false,
    reason: "ECDSA on curve secp256k1 cannot be verified from a digest",
  });
});

test("an ECDSA signature that is not DER is a failed verification, not a crash", () => {
  const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  assert.deepEqual(verifyPrehashed(publicKey, digest, Buffer.from("not a DER signature")), DOES_NOT_VERIFY);
  assert.deepEqual(verifyPrehashed(publicKey, digest, Buffer.alloc(0)), DOES_NOT_VERIFY);
});

test("RSA: a signature that does not open, or opens to another digest, says it does not verify", () => {
  const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  assert.deepEqual(verifyPrehashed(publicKey, digest, Buffer.alloc(256, 7)), DOES_NOT_VERIFY);
  assert.deepEqual(verifyPrehashed(publicKey, otherDigest, sign("sha256", data, privateKey)), DOES_NOT_VERIFY);
});

test("Ed25519 signs the artifact itself: refused, asking for the file", () => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  assert.deepEqual(verifyPrehashed(publicKey, digest, sign(null, data, privateKey)), {
    ok: false,
    reason: "a ed25519 signature covers the artifact itself: give the file, not its digest",
  });
});
