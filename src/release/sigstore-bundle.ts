// Sigstore bundles as cosign v3 attaches them to an image: a DSSE envelope of an in-toto statement, signed with a
// key and carrying the key's hint, with no transparency-log entry and no timestamp (a policy verifies it with
// `ignoreTlog: true`). @sigstore/bundle builds the bundle; what it leaves out (the media type, the empty lists
// cosign writes) is completed here, and the result is read back through @sigstore/bundle's own validation, so
// a malformed bundle fails here and never reaches a registry.
import { BUNDLE_V03_MEDIA_TYPE, bundleFromJSON, bundleToJSON, toDSSEBundle, type SerializedBundle } from "@sigstore/bundle";
import { IN_TOTO_PAYLOAD_TYPE, signDsseEnvelope } from "./in-toto.ts";
import type { ReleaseKey } from "./signing-key.ts";

/** The media type of a v0.3 bundle, which cosign v3 also gives its referrer manifests as artifactType. */
export const BUNDLE_MEDIA_TYPE = BUNDLE_V03_MEDIA_TYPE;

export interface BundleMaterial {
  mediaType: string;
  /** Transparency-log entries in their JSON form; none by default (cosign writes `"tlogEntries": []`). */
  tlogEntries?: readonly object[];
  /** DER RFC 3161 timestamps of the signature; none by default. */
  rfc3161Timestamps?: readonly Buffer[];
}

/**
 * Completes the verification material of a bundle @sigstore/bundle built: its media type, the log entries and
 * the timestamps (protobuf JSON would drop empty lists; they are kept explicit, as cosign writes them). Edits and
 * returns `json`.
 */
export function completeBundle(json: SerializedBundle, material: BundleMaterial): SerializedBundle {
  const out = json as unknown as {
    mediaType: string;
    verificationMaterial: { tlogEntries: object[]; timestampVerificationData?: { rfc3161Timestamps: Array<{ signedTimestamp: string }> } };
  };
  out.mediaType = material.mediaType;
  out.verificationMaterial.tlogEntries = [...(material.tlogEntries ?? [])];
  out.verificationMaterial.timestampVerificationData = {
    rfc3161Timestamps: (material.rfc3161Timestamps ?? []).map((t) => ({ signedTimestamp: t.toString("base64") })),
  };
  return json;
}

export interface SignedBundle {
  /** The serialized bundle: the referrer's layer. */
  bytes: Buffer;
  mediaType: string;
}

/** A v0.3 DSSE bundle of `statement`, signed with `key`, naming it by its hint; no log entry, no timestamp. */
export function keySignedStatementBundle(key: ReleaseKey, statement: Record<string, unknown>): SignedBundle {
  const payload = Buffer.from(JSON.stringify(statement));
  const { signature } = signDsseEnvelope(key, payload, { payloadType: IN_TOTO_PAYLOAD_TYPE });
  const json = completeBundle(bundleToJSON(toDSSEBundle({ artifact: payload, artifactType: IN_TOTO_PAYLOAD_TYPE, signature, keyHint: key.hint })), {
    mediaType: BUNDLE_MEDIA_TYPE,
  });
  bundleFromJSON(json);
  return { bytes: Buffer.from(JSON.stringify(json)), mediaType: BUNDLE_MEDIA_TYPE };
}
