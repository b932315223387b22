// The node proxy's records of who pulled which image with which credentials, in the kubelet's layout and kinds
// (KEP-2535 as released: ImagePullIntent, ImagePulledRecord, credentialMapping, nodePodsAccessible) under the
// project's own apiVersion. Pure: shapes, strict decoding and the updates; the files are src/node/record-store.ts.
//
// Differences from the kubelet's records, because a proxy sees credentials, not Secrets: a credential is kept as
// a keyed hash (HMAC-SHA256 with a node-local key, so a leaked record cannot be checked against guesses), with
// the last pods that presented it, instead of a Secret's coordinates.

import { exactKeys, header, nonEmptyString, object, parse, RECORD_API_VERSION, RecordFormatError, string, timestamp } from "./record-fields.ts";

export { RECORD_API_VERSION, RecordFormatError } from "./record-fields.ts";

/** How many pods are remembered per credential, for `node-records` (the most recent). */
export const MAX_PODS_PER_CREDENTIAL = 10;

export interface PodRef {
  namespace: string;
  name: string;
  uid: string;
}

export interface RecordedCredential {
  /** "hmac-sha256:<hex>" of the credential the pull succeeded with. */
  credentialHash: string;
  /** The most recent pods that presented it, newest last. */
  presentedBy: PodRef[];
}

/** Who may use an image of one repository: every pod (an anonymous pull), or pods holding one of the credentials. */
export interface PullCredentials {
  nodePodsAccessible?: true;
  credentials?: RecordedCredential[];
}

export interface ImagePulledRecord {
  apiVersion: typeof RECORD_API_VERSION;
  kind: "ImagePulledRecord";
  lastUpdatedTime: string;
  /** The image's id as the runtime returned it (containerd's image_ref). */
  imageRef: string;
  /** Normalised repository (no tag or digest) → who may use the image under that name. Empty: nobody yet. */
  credentialMapping: Record<string, PullCredentials>;
}

/** Written before a pull is forwarded and removed after: one left over means a pull may have ended unrecorded. */
export interface ImagePullIntent {
  apiVersion: typeof RECORD_API_VERSION;
  kind: "ImagePullIntent";
  /** The image as the pod named it. */
  image: string;
}

/**
 * The images on the node when the proxy first ran (pulled outside it), each with the repositories it had then: an
 * image is preloaded under those names only, so a pull of the same digest under another name changes nothing for
 * them (kubernetes#138175), and under none of the others.
 */
export interface PreloadedImages {
  apiVersion: typeof RECORD_API_VERSION;
  kind: "PreloadedImages";
  recordedTime: string;
  images: PreloadedImage[];
}

export interface PreloadedImage {
  imageRef: string;
  /** Normalised repositories (no tag or digest), sorted. */
  repositories: string[];
}

/** What a credential is, for a record: its keyed hash and the pod that presented it; undefined for an anonymous pull. */
export interface PresentedCredential {
  hash: string;
  pod: PodRef;
}

/** A new record, or `record` with this pull added. Returns a new object; the input is not changed. */
export function recordPull(
  record: ImagePulledRecord | undefined,
  imageRef: string,
  repository: string,
  credential: PresentedCredential | undefined,
  now: Date,
): ImagePulledRecord {
  const mapping = { ...(record?.credentialMapping ?? {}) };
  const before = mapping[repository] ?? {};
  if (!credential) mapping[repository] = { nodePodsAccessible: true };
  else if (!before.nodePodsAccessible) {
    const credentials = (before.credentials ?? []).map((c) => ({ ...c, presentedBy: [...c.presentedBy] }));
    let entry = credentials.find((c) => c.credentialHash === credential.hash);
    if (!entry) credentials.push((entry = { credentialHash: credential.hash, presentedBy: [] }));
    entry.presentedBy = [...entry.presentedBy.filter((p) => p.uid !== credential.pod.uid), credential.pod].slice(-MAX_PODS_PER_CREDENTIAL);
    mapping[repository] = { credentials };
  }
  return { apiVersion: RECORD_API_VERSION, kind: "ImagePulledRecord", lastUpdatedTime: now.toISOString(), imageRef, credentialMapping: mapping };
}

/** A record for an image whose pull may have ended without being recorded: nobody may use it without verifying. */
export function credentialLessRecord(imageRef: string, now: Date): ImagePulledRecord {
  return { apiVersion: RECORD_API_VERSION, kind: "ImagePulledRecord", lastUpdatedTime: now.toISOString(), imageRef, credentialMapping: {} };
}

export function accessibleToAllPods(record: ImagePulledRecord, repository: string): boolean {
  return record.credentialMapping[repository]?.nodePodsAccessible === true;
}

export function credentialRecorded(record: ImagePulledRecord, repository: string, hash: string): boolean {
  return record.credentialMapping[repository]?.credentials?.some((c) => c.credentialHash === hash) === true;
}

export function pullIntent(image: string): ImagePullIntent {
  return { apiVersion: RECORD_API_VERSION, kind: "ImagePullIntent", image };
}

export function preloadedImages(images: readonly PreloadedImage[], now: Date): PreloadedImages {
  const sorted = images
    .map((i) => ({ imageRef: i.imageRef, repositories: [...new Set(i.repositories)].sort() }))
    .sort((a, b) => (a.imageRef < b.imageRef ? -1 : 1));
  return { apiVersion: RECORD_API_VERSION, kind: "PreloadedImages", recordedTime: now.toISOString(), images: sorted };
}

/** Whether the image is preloaded under `repository`: listed so, and not pulled under that name through the proxy since. */
export function preloadedUnder(
  preloaded: ReadonlyMap<string, ReadonlySet<string>>,
  record: ImagePulledRecord | undefined,
  imageRef: string,
  repository: string,
): boolean {
  return preloaded.get(imageRef)?.has(repository) === true && record?.credentialMapping[repository] === undefined;
}

// Strict decoding: a record that is not exactly what this code writes is corrupt, and a corrupt record means
// "verify", never "allow" (the caller decides that; this only refuses).

export function decodePulledRecord(text: string): ImagePulledRecord {
  const o = object(parse(text), "record");
  exactKeys(o, ["apiVersion", "kind", "lastUpdatedTime", "imageRef", "credentialMapping"], "record");
  header(o, "ImagePulledRecord");
  const lastUpdatedTime = timestamp(o.lastUpdatedTime, "lastUpdatedTime");
  const imageRef = nonEmptyString(o.imageRef, "imageRef");
  const mapping = object(o.credentialMapping, "credentialMapping");
  const credentialMapping: Record<string, PullCredentials> = {};
  for (const [repository, raw] of Object.entries(mapping)) {
    const at = `credentialMapping[${JSON.stringify(repository)}]`;
    const entry = object(raw, at);
    exactKeys(entry, ["nodePodsAccessible", "credentials"], at, true);
    if (entry.nodePodsAccessible !== undefined && entry.nodePodsAccessible !== true)
      throw new RecordFormatError(`${at}.nodePodsAccessible must be true when present`);
    if ((entry.nodePodsAccessible === true) === (entry.credentials !== undefined))
      throw new RecordFormatError(`${at} needs exactly one of nodePodsAccessible and credentials`);
    credentialMapping[repository] = entry.nodePodsAccessible
      ? { nodePodsAccessible: true }
      : { credentials: credentialList(entry.credentials, `${at}.credentials`) };
  }
  return { apiVersion: RECORD_API_VERSION, kind: "ImagePulledRecord", lastUpdatedTime, imageRef, credentialMapping };
}

export function decodePullIntent(text: string): ImagePullIntent {
  const o = object(parse(text), "intent");
  exactKeys(o, ["apiVersion", "kind", "image"], "intent");
  header(o, "ImagePullIntent");
  return pullIntent(nonEmptyString(o.image, "image"));
}

export function decodePreloadedImages(text: string): PreloadedImages {
  const o = object(parse(text), "preloaded images");
  exactKeys(o, ["apiVersion", "kind", "recordedTime", "images"], "preloaded images");
  header(o, "PreloadedImages");
  if (!Array.isArray(o.images)) throw new RecordFormatError("images must be a list");
  return {
    apiVersion: RECORD_API_VERSION,
    kind: "PreloadedImages",
    recordedTime: timestamp(o.recordedTime, "recordedTime"),
    images: o.images.map((raw, i) => {
      const entry = object(raw, `images[${i}]`);
      exactKeys(entry, ["imageRef", "repositories"], `images[${i}]`);
      if (!Array.isArray(entry.repositories)) throw new RecordFormatError(`images[${i}].repositories must be a list`);
      return {
        imageRef: nonEmptyString(entry.imageRef, `images[${i}].imageRef`),
        repositories: entry.repositories.map((r, j) => nonEmptyString(r, `images[${i}].repositories[${j}]`)),
      };
    }),
  };
}

function credentialList(raw: unknown, at: string): RecordedCredential[] {
  if (!Array.isArray(raw)) throw new RecordFormatError(`${at} must be a list`);
  return raw.map((c, i) => {
    const entry = object(c, `${at}[${i}]`);
    exactKeys(entry, ["credentialHash", "presentedBy"], `${at}[${i}]`);
    const credentialHash = nonEmptyString(entry.credentialHash, `${at}[${i}].credentialHash`);
    if (!/^hmac-sha256:[0-9a-f]{64}$/.test(credentialHash)) throw new RecordFormatError(`${at}[${i}].credentialHash is not hmac-sha256:<64 hex>`);
    if (!Array.isArray(entry.presentedBy)) throw new RecordFormatError(`${at}[${i}].presentedBy must be a list`);
    const presentedBy = entry.presentedBy.map((p, j) => {
      const pod = object(p, `${at}[${i}].presentedBy[${j}]`);
      exactKeys(pod, ["namespace", "name", "uid"], `${at}[${i}].presentedBy[${j}]`);
      return { namespace: string(pod.namespace, "namespace"), name: string(pod.name, "name"), uid: string(pod.uid, "uid") };
    });
    return { credentialHash, presentedBy };
  });
}
