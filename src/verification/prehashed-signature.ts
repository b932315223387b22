// A signature checked against the digest of the signed bytes when only the digest is known (`verify-bundle
// sha256:…`, as Sigstore's conformance suite asks). node:crypto verifies only over the bytes themselves, so this
// does the verification equations: ECDSA on the NIST curves (SEC 1 §4.1.4) and RSA PKCS#1 v1.5 (whose
// signature opens to the DigestInfo). Ed25519 and RSA-PSS sign the message, not a digest of it: refused.
// Only public values are involved, so running time need not be constant.
import { constants, createECDH, publicDecrypt, type KeyObject } from "node:crypto";

export type PrehashedResult = { ok: true } | { ok: false; reason: string };

interface Curve {
  p: bigint;
  n: bigint;
  g: Affine;
}
type Affine = { x: bigint; y: bigint };

const CURVE_PARAMETERS: Record<string, { ecdhName: string; bytes: number; p: string; n: string }> = {
  "P-256": {
    ecdhName: "prime256v1",
    bytes: 32,
    p: "ffffffff00000001000000000000000000000000ffffffffffffffffffffffff",
    n: "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551",
  },
  "P-384": {
    ecdhName: "secp384r1",
    bytes: 48,
    p: "fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffeffffffff0000000000000000ffffffff",
    n: "ffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf581a0db248b0a77aecec196accc52973",
  },
  "P-521": {
    ecdhName: "secp521r1",
    bytes: 66,
    p: "01ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    n: "01fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffa51868783bf2f966b7fcc0148f709a5d03bb5c9b8899c47aebb6fb71e91386409",
  },
};

const curves = new Map<string, Curve>();

/** The curve's generator is the public key of private key 1, so it comes from OpenSSL rather than a constant here. */
function curveNamed(name: string): Curve | undefined {
  const known = curves.get(name);
  if (known) return known;
  const params = CURVE_PARAMETERS[name];
  if (!params) return undefined;
  const ecdh = createECDH(params.ecdhName);
  const one = Buffer.alloc(params.bytes);
  one[params.bytes - 1] = 1;
  ecdh.setPrivateKey(one);
  const g = ecdh.getPublicKey();
  const curve = {
    p: BigInt(`0x${params.p}`),
    n: BigInt(`0x${params.n}`),
    g: { x: toBigInt(g.subarray(1, 1 + params.bytes)), y: toBigInt(g.subarray(1 + params.bytes)) },
  };
  curves.set(name, curve);
  return curve;
}

/** SHA-256's DigestInfo prefix (RFC 8017 §9.2, note 1). */
const SHA256_DIGEST_INFO = Buffer.from("3031300d060960864801650304020105000420", "hex");

/** Whether `signature` by `key` signs the SHA-256 `digest`. */
export function verifyPrehashed(key: KeyObject, digest: Buffer, signature: Buffer): PrehashedResult {
  if (digest.length !== 32) return { ok: false, reason: "only a sha256 digest can stand in for the artifact" };
  if (key.asymmetricKeyType === "ec") {
    const jwk = key.export({ format: "jwk" });
    const curve = jwk.crv ? curveNamed(jwk.crv) : undefined;
    if (!curve || !jwk.x || !jwk.y) return { ok: false, reason: `ECDSA on curve ${jwk.crv ?? "?"} cannot be verified from a digest` };
    const q: Affine = { x: toBigInt(Buffer.from(jwk.x, "base64url")), y: toBigInt(Buffer.from(jwk.y, "base64url")) };
    const rs = derSignature(signature);
    return rs && ecdsaVerifies(curve, q, digest, rs) ? { ok: true } : { ok: false, reason: "the signature does not verify with this key" };
  }
  if (key.asymmetricKeyType === "rsa") {
    let opened: Buffer;
    try {
      opened = publicDecrypt({ key, padding: constants.RSA_PKCS1_PADDING }, signature);
    } catch {
      return { ok: false, reason: "the signature does not verify with this key" };
    }
    return opened.equals(Buffer.concat([SHA256_DIGEST_INFO, digest])) ? { ok: true } : { ok: false, reason: "the signature does not verify with this key" };
  }
  return { ok: false, reason: `a ${key.asymmetricKeyType ?? "?"} signature covers the artifact itself: give the file, not its digest` };
}

function ecdsaVerifies(curve: Curve, q: Affine, digest: Buffer, [r, s]: [bigint, bigint]): boolean {
  const { n } = curve;
  if (r < 1n || r >= n || s < 1n || s >= n) return false;
  // The leftmost bits of the digest, as many as the order has.
  const orderBits = n.toString(2).length;
  let e = toBigInt(digest);
  if (digest.length * 8 > orderBits) e >>= BigInt(digest.length * 8 - orderBits);
  const w = inverse(s, n);
  const point = toAffine(curve, doubleMultiply(curve, curve.g, (e * w) % n, q, (r * w) % n));
  return point !== null && point.x % n === r;
}

/** A DER ECDSA-Sig-Value (SEQUENCE of two positive INTEGERs), strictly; undefined when it is not one. */
function derSignature(der: Buffer): [bigint, bigint] | undefined {
  if (der.length < 8 || der[0] !== 0x30) return undefined;
  let at = 1;
  const length = (): number | undefined => {
    const first = der[at++];
    if (first === undefined) return undefined;
    if (first < 0x80) return first;
    if (first !== 0x81) return undefined; // no ECDSA signature on these curves needs more
    const value = der[at++];
    return value !== undefined && value >= 0x80 ? value : undefined;
  };
  const total = length();
  if (total === undefined || at + total !== der.length) return undefined;
  const integer = (): bigint | undefined => {
    if (der[at++] !== 0x02) return undefined;
    const size = length();
    if (size === undefined || size === 0 || at + size > der.length) return undefined;
    const bytes = der.subarray(at, at + size);
    at += size;
    if (bytes[0]! & 0x80) return undefined; // negative
    if (size > 1 && bytes[0] === 0 && !(bytes[1]! & 0x80)) return undefined; // not minimal
    return toBigInt(bytes);
  };
  const r = integer();
  const s = integer();
  return r !== undefined && s !== undefined && at === der.length ? [r, s] : undefined;
}

function toBigInt(bytes: Buffer): bigint {
  return bytes.length === 0 ? 0n : BigInt(`0x${bytes.toString("hex")}`);
}

function mod(a: bigint, m: bigint): bigint {
  const r = a % m;
  return r < 0n ? r + m : r;
}

/** a⁻¹ mod m (m prime, a not a multiple of m), by the extended Euclidean algorithm. */
function inverse(a: bigint, m: bigint): bigint {
  let [oldR, r] = [mod(a, m), m];
  let [oldS, s] = [1n, 0n];
  while (r !== 0n) {
    const quotient = oldR / r;
    [oldR, r] = [r, oldR - quotient * r];
    [oldS, s] = [s, oldS - quotient * s];
  }
  return mod(oldS, m);
}

// Jacobian coordinates (x = X/Z², y = Y/Z³; Z = 0 is the point at infinity) on y² = x³ − 3x + b: the NIST
// curves' a is −3, and b is not needed to add points. One inversion per verification, at the end.
type Jacobian = { x: bigint; y: bigint; z: bigint };
const INFINITY: Jacobian = { x: 1n, y: 1n, z: 0n };

function double(curve: Curve, a: Jacobian): Jacobian {
  const { p } = curve;
  if (a.z === 0n || a.y === 0n) return INFINITY;
  const zz = (a.z * a.z) % p;
  const yy = (a.y * a.y) % p;
  const m = mod(3n * (a.x - zz) * (a.x + zz), p);
  const s = (4n * a.x * yy) % p;
  const x = mod(m * m - 2n * s, p);
  return { x, y: mod(m * (s - x) - 8n * yy * yy, p), z: (2n * a.y * a.z) % p };
}

function add(curve: Curve, a: Jacobian, b: Jacobian): Jacobian {
  const { p } = curve;
  if (a.z === 0n) return b;
  if (b.z === 0n) return a;
  const az2 = (a.z * a.z) % p;
  const bz2 = (b.z * b.z) % p;
  const u1 = (a.x * bz2) % p;
  const u2 = (b.x * az2) % p;
  const s1 = (a.y * bz2 * b.z) % p;
  const s2 = (b.y * az2 * a.z) % p;
  const h = mod(u2 - u1, p);
  const r = mod(s2 - s1, p);
  if (h === 0n) return r === 0n ? double(curve, a) : INFINITY;
  const hh = (h * h) % p;
  const hhh = (hh * h) % p;
  const x = mod(r * r - hhh - 2n * u1 * hh, p);
  return { x, y: mod(r * (u1 * hh - x) - s1 * hhh, p), z: (h * a.z * b.z) % p };
}

/** k·P + l·Q in one pass over the bits (Shamir's trick). */
function doubleMultiply(curve: Curve, p: Affine, k: bigint, q: Affine, l: bigint): Jacobian {
  const pj = { ...p, z: 1n };
  const qj = { ...q, z: 1n };
  const both = add(curve, pj, qj);
  let result = INFINITY;
  for (let bit = BigInt(Math.max(k.toString(2).length, l.toString(2).length) - 1); bit >= 0n; bit--) {
    result = double(curve, result);
    const fromK = (k >> bit) & 1n;
    const fromL = (l >> bit) & 1n;
    if (fromK && fromL) result = add(curve, result, both);
    else if (fromK) result = add(curve, result, pj);
    else if (fromL) result = add(curve, result, qj);
  }
  return result;
}

function toAffine(curve: Curve, a: Jacobian): Affine | null {
  if (a.z === 0n) return null;
  const zInverse = inverse(a.z, curve.p);
  const zz = (zInverse * zInverse) % curve.p;
  return { x: (a.x * zz) % curve.p, y: (a.y * zz * zInverse) % curve.p };
}
