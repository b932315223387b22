// Test signer: verifies its output with @sigstore/verify, the independent reference verifier, so tests can prove an
// artifact is really valid (or really broken) before the verifier under test sees it.

import { bundleFromJSON } from "@sigstore/bundle";
import { TrustedRoot } from "@sigstore/protobuf-specs";
import type { PublicKey } from "@sigstore/protobuf-specs";
import { toSignedEntity, toTrustMaterial, Verifier } from "@sigstore/verify";
import type { Signer, VerificationPolicy } from "@sigstore/verify";

export interface VerifyOptions {
  keys?: Record<string, PublicKey>;
  tlogThreshold?: number;
  timestampThreshold?: number;
  ctlogThreshold?: number;
  policy?: VerificationPolicy;
  /** The signed bytes, for message-signature bundles. */
  artifact?: Buffer;
}

/** A trusted root with nothing in it: key-signed bundles without log entries or timestamps need none of it. */
export const EMPTY_TRUSTED_ROOT: Record<string, unknown> = {
  mediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
  tlogs: [],
  certificateAuthorities: [],
  ctlogs: [],
  timestampAuthorities: [],
};

/** Parses a bundle (JSON text or object) and verifies it against trustedRoot; throws on failure. */
export function verifyBundle(trustedRoot: Record<string, unknown>, bundle: Buffer | string | object, opts: VerifyOptions = {}): Signer {
  const json = Buffer.isBuffer(bundle) || typeof bundle === "string" ? JSON.parse(bundle.toString()) : bundle;
  const trust = toTrustMaterial(TrustedRoot.fromJSON(trustedRoot), opts.keys ?? {});
  const verifier = new Verifier(trust, {
    ...(opts.tlogThreshold !== undefined ? { tlogThreshold: opts.tlogThreshold } : {}),
    ...(opts.timestampThreshold !== undefined ? { timestampThreshold: opts.timestampThreshold } : {}),
    ...(opts.ctlogThreshold !== undefined ? { ctlogThreshold: opts.ctlogThreshold } : {}),
  });
  return verifier.verify(toSignedEntity(bundleFromJSON(json), opts.artifact), opts.policy);
}
