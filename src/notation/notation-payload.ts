// The signed payload of a Notary Project signature (application/vnd.cncf.notary.payload.v1+json): a descriptor of
// the artifact signed. A signature proves something about the admitted image only if that descriptor is the image's
// own: the same digest, and the media type and size of the manifest the registry served for it.
import { asObject } from "../core/primitives/json-shapes.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type NotationPayloadErrorCode =
  /** The payload is not the descriptor the specification defines. */
  | "malformed"
  /** The descriptor names another artifact than the one verified. */
  | "other-artifact";

export class NotationPayloadError extends ImprimaturError<NotationPayloadErrorCode> {}

/** The manifest verified: its digest, and its media type and size as the registry served it. */
export interface TargetManifest {
  digest: string;
  mediaType: string;
  size: number;
}

export interface SignedTarget extends TargetManifest {
  /** The descriptor's annotations (notation sign --user-metadata). */
  annotations: Record<string, string>;
}

/** Reads the payload's targetArtifact; throws NotationPayloadError("malformed"). */
export function readPayload(payload: Uint8Array): SignedTarget {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload));
  } catch (e) {
    throw new NotationPayloadError("malformed", `the signed payload is not JSON: ${(e as Error).message}`);
  }
  const target = asObject(asObject(parsed)?.targetArtifact);
  if (!target) throw new NotationPayloadError("malformed", "the signed payload has no targetArtifact");
  const { digest, mediaType, size } = target;
  if (typeof digest !== "string" || !/^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/.test(digest))
    throw new NotationPayloadError("malformed", `targetArtifact.digest is not a digest: ${JSON.stringify(digest)}`);
  if (typeof mediaType !== "string" || mediaType === "") throw new NotationPayloadError("malformed", "targetArtifact.mediaType is missing");
  if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0)
    throw new NotationPayloadError("malformed", `targetArtifact.size is not a size: ${JSON.stringify(size)}`);
  const annotations: Record<string, string> = {};
  const given = target.annotations;
  if (given !== undefined) {
    const object = asObject(given);
    if (!object) throw new NotationPayloadError("malformed", "targetArtifact.annotations is not an object");
    for (const [key, value] of Object.entries(object)) {
      if (typeof value !== "string") throw new NotationPayloadError("malformed", `targetArtifact.annotations[${JSON.stringify(key)}] is not a string`);
      annotations[key] = value;
    }
  }
  return { digest, mediaType, size, annotations };
}

/**
 * Whether the signed descriptor is the verified manifest's: digest, media type and size all equal (a signature of a
 * manifest with the same digest but another claimed type or size is refused, as notation refuses it). Annotations a
 * policy requires must be present with the same value.
 */
export function checkTarget(signed: SignedTarget, manifest: TargetManifest, requiredAnnotations: Readonly<Record<string, string>> = {}): void {
  if (signed.digest !== manifest.digest) throw new NotationPayloadError("other-artifact", `the signature is of ${signed.digest}, not of ${manifest.digest}`);
  if (signed.mediaType !== manifest.mediaType)
    throw new NotationPayloadError(
      "other-artifact",
      `the signature names media type ${signed.mediaType}; the registry serves ${manifest.digest} as ${manifest.mediaType}`,
    );
  if (signed.size !== manifest.size)
    throw new NotationPayloadError("other-artifact", `the signature names a manifest of ${signed.size} bytes; ${manifest.digest} is ${manifest.size} bytes`);
  for (const [key, value] of Object.entries(requiredAnnotations))
    if (signed.annotations[key] !== value)
      throw new NotationPayloadError(
        "other-artifact",
        `the signature's annotation ${key} is ${signed.annotations[key] === undefined ? "missing" : JSON.stringify(signed.annotations[key])}, the policy requires ${JSON.stringify(value)}`,
      );
}
