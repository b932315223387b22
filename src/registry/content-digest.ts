// Content digests ("sha256:<hex>"): what bytes hash to, compared with what a registry or a reference promised.
import { createHash } from "node:crypto";
import { checkDigest } from "../core/image-reference.ts";

export type DigestAlgorithm = "sha256" | "sha512";

/** The algorithm of a well-formed digest, undefined for anything else (including unsupported algorithms). */
export function digestAlgorithm(digest: string): DigestAlgorithm | undefined {
  if (checkDigest(digest) !== undefined) return undefined;
  return digest.startsWith("sha512:") ? "sha512" : "sha256";
}

export function computeDigest(bytes: Uint8Array, algorithm: DigestAlgorithm): string {
  return `${algorithm}:${createHash(algorithm).update(bytes).digest("hex")}`;
}
