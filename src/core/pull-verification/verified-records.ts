// The node's records of what it verified at pull time: per image (the runtime's image id), the digest judged, the
// policy generation it was judged under, whether that verdict holds for every pod, and the names it was pulled as.
// A record of another generation is no record: after a policy change an image is verified again before it is used.
// Pure: shapes, strict decoding and the updates; the files are src/node/record-store.ts.
import type { PolicySet } from "../policy-set/policy-kinds.ts";
import { exactKeys, header, nonEmptyString, object, parse, RECORD_API_VERSION, RecordFormatError, timestamp } from "./record-fields.ts";

/** How many names (tags as pods wrote them) a record keeps, newest last. */
export const MAX_VERIFIED_NAMES = 20;

export interface ImageVerifiedRecord {
  apiVersion: typeof RECORD_API_VERSION;
  kind: "ImageVerifiedRecord";
  verifiedTime: string;
  /** The image's id as the runtime returned it. */
  imageRef: string;
  /** The manifest digest that was judged and pulled. */
  digest: string;
  /** The policy generation the verdict was reached under. */
  policyGeneration: string;
  /** The verdict holds for every pod: nothing in the policies judged depended on the pod that pulled. */
  everyPod: boolean;
  /** The names the image was pulled as (the pod spec's references), newest last. */
  names: string[];
}

export interface Verification {
  imageRef: string;
  digest: string;
  policyGeneration: string;
  everyPod: boolean;
  /** The name the pod asked for. */
  name: string;
}

/** A new record, or `record` with this pull added when it is of the same digest and generation. */
export function recordVerification(record: ImageVerifiedRecord | undefined, v: Verification, now: Date): ImageVerifiedRecord {
  const same = record !== undefined && record.digest === v.digest && record.policyGeneration === v.policyGeneration;
  const names = [...(same ? record.names.filter((n) => n !== v.name) : []), v.name].slice(-MAX_VERIFIED_NAMES);
  return {
    apiVersion: RECORD_API_VERSION,
    kind: "ImageVerifiedRecord",
    verifiedTime: now.toISOString(),
    imageRef: v.imageRef,
    digest: v.digest,
    policyGeneration: v.policyGeneration,
    everyPod: v.everyPod,
    names,
  };
}

/** Whether the record says the image may be used by any pod under this generation without being judged again. */
export function verifiedForEveryPod(record: ImageVerifiedRecord | undefined, generation: string): boolean {
  return record !== undefined && record.policyGeneration === generation && record.everyPod;
}

/**
 * Whether what the node's policies say of an image cannot depend on the pod that pulls it: no namespaced policy,
 * no policy scoped by namespace, selector or match conditions, no rule whose CEL reads the object, no exception.
 * Only then may a verdict reached for one pod stand for another without judging it.
 */
export function verdictHoldsForEveryPod(set: PolicySet): boolean {
  if (set.PolicyException.length > 0) return false;
  return set.ImagePolicy.every(
    (p) =>
      p.namespace === undefined &&
      p.namespaces === undefined &&
      p.namespaceSelector === undefined &&
      p.match === undefined &&
      p.rules.every((r) => r.validate === undefined),
  );
}

export function decodeVerifiedRecord(text: string): ImageVerifiedRecord {
  const o = object(parse(text), "record");
  exactKeys(o, ["apiVersion", "kind", "verifiedTime", "imageRef", "digest", "policyGeneration", "everyPod", "names"], "record");
  header(o, "ImageVerifiedRecord");
  const digest = nonEmptyString(o.digest, "digest");
  if (!/^sha(256:[0-9a-f]{64}|512:[0-9a-f]{128})$/.test(digest)) throw new RecordFormatError("digest is not sha256:<64 hex> or sha512:<128 hex>");
  if (typeof o.everyPod !== "boolean") throw new RecordFormatError("everyPod must be true or false");
  if (!Array.isArray(o.names)) throw new RecordFormatError("names must be a list");
  return {
    apiVersion: RECORD_API_VERSION,
    kind: "ImageVerifiedRecord",
    verifiedTime: timestamp(o.verifiedTime, "verifiedTime"),
    imageRef: nonEmptyString(o.imageRef, "imageRef"),
    digest,
    policyGeneration: nonEmptyString(o.policyGeneration, "policyGeneration"),
    everyPod: o.everyPod,
    names: o.names.map((n, i) => nonEmptyString(n, `names[${i}]`)),
  };
}
