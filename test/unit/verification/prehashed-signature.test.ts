// Signatures checked against a SHA-256 digest alone, against node:crypto's signing of the bytes themselves.
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign } from "node:crypto";
import { test } from "node:test";
import { verifyPrehashed } from "../../../src/verification/prehashed-signature.ts";

const data = Buffer.from("release tarball bytes");
const digest = createHash("sha256").update(data).digest();
const otherDigest = createHash("sha256").update("other bytes").digest();
const flip = (b: Buffer, at = b.length - 1) => {
  const copy = Buffer.from(b);
  copy[at]! ^= 0x01;
  return copy;
};

const keyPairs = {
  "P-256": () => generateKeyPairSync("ec", { namedCurve: "P-256" }),
  "P-384": () => generateKeyPairSync("ec", { namedCurve: "P-384" }),
  "P-521": () => generateKeyPairSync("ec", { namedCurve: "P-521" }),
  "RSA 2048": () => generateKeyPairSync("rsa", { modulusLength: 2048 }),
};

for (const [name, generate] of Object.entries(keyPairs)) {
  test(`${name}: a SHA-256 signature verifies from the digest; another digest, signature or key does not`, () => {
    const { publicKey, privateKey } = generate();
    const stranger = generate().publicKey;
    for (let i = 0; i < 8; i++) {
      // Several signatures: ECDSA's are random, and some have short or high-bit r and s.
      const signature = sign("sha256", data, privateKey);
      assert.deepEqual(verifyPrehashed(publicKey, digest, signature), { ok: true });
      assert.equal(verifyPrehashed(publicKey, otherDigest, signature).ok, false);
      assert.equal(verifyPrehashed(publicKey, flip(digest, 0), signature).ok, false);
      assert.equal(verifyPrehashed(publicKey, digest, flip(signature)).ok, false);
      assert.equal(verifyPrehashed(stranger, digest, signature).ok, false);
    }
  });
}

test("ECDSA signatures that are not strict DER, or whose r or s is out of range, are refused", () => {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const signature = sign("sha256", data, privateKey);
  const p1363 = sign("sha256", data, { key: privateKey, dsaEncoding: "ieee-p1363" });
  const r = p1363.subarray(0, 32);
  const s = p1363.subarray(32);
  const raw = (v: Buffer) => Buffer.concat([Buffer.from([0x02, v.length]), v]);
  /** A DER INTEGER of the unsigned big-endian value, minimal. */
  const integer = (v: Buffer) => {
    let at = 0;
    while (at < v.length - 1 && v[at] === 0) at++;
    const bytes = v.subarray(at);
    return raw(bytes[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
  };
  const sequence = (...parts: Buffer[]) => {
    const body = Buffer.concat(parts);
    return Buffer.concat([Buffer.from([0x30, body.length]), body]);
  };
  const padded = (v: Buffer) => Buffer.concat([Buffer.from([0, 0]), v]);
  const n = Buffer.from("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551", "hex");
  const plusOrder = (v: Buffer, order: Buffer) => {
    const hex = (BigInt(`0x${v.toString("hex")}`) + BigInt(`0x${order.toString("hex")}`)).toString(16);
    return Buffer.from(hex.padStart(hex.length + (hex.length % 2), "0"), "hex");
  };
  assert.deepEqual(verifyPrehashed(publicKey, digest, sequence(integer(r), integer(s))), { ok: true }, "re-encoded as the tests encode");
  for (const [why, bad] of [
    ["trailing bytes", Buffer.concat([signature, Buffer.from([0])])],
    ["a non-minimal integer", sequence(raw(padded(r)), integer(s))],
    ["IEEE P1363 instead of DER", p1363],
    ["r equal to the order", sequence(integer(n), integer(s))],
    ["s zero", sequence(integer(r), integer(Buffer.from([0])))],
    ["s plus the order (the same signature, not in range)", sequence(integer(r), integer(plusOrder(s, n)))],
    ["empty", Buffer.alloc(0)],
  ] as const) {
    assert.deepEqual(verifyPrehashed(publicKey, digest, bad), { ok: false, reason: "the signature does not verify with this key" }, why);
  }
});

test("keys whose signatures cover the message itself, and digests that are not SHA-256, are refused with the reason", () => {
  const ed = generateKeyPairSync("ed25519");
  assert.deepEqual(verifyPrehashed(ed.publicKey, digest, sign(null, data, ed.privateKey)), {
    ok: false,
    reason: "a ed25519 signature covers the artifact itself: give the file, not its digest",
  });
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  assert.deepEqual(verifyPrehashed(publicKey, createHash("sha384").update(data).digest(), sign("sha384", data, privateKey)), {
    ok: false,
    reason: "only a sha256 digest can stand in for the artifact",
  });
  const k1 = generateKeyPairSync("ec", { namedCurve: "secp256k1" });
  assert.deepEqual(verifyPrehashed(k1.publicKey, digest, sign("sha256", data, k1.privateKey)), {
    ok: false,
    reason: "ECDSA on curve secp256k1 cannot be verified from a digest",
  });
});
