// Finds an image's signatures in the registry, in every layout users sign with (see the image-verification
// design and cosign's specs): cosign's `sha256-<hex>.sig` tag, whose layers are signatures, and Sigstore
// bundles attached as OCI 1.1 referrers (the Referrers API, or the referrers tag schema where a registry has
// no API, e.g. docker-registry 2.8). Reads go through the registry client with the pod's credentials, bounded
// in count and size; a malformed artifact is reported and skipped, never fatal to the others.
import type { RegistryClient, CallOptions } from "../registry/registry-client.ts";
import { hasErrorCode } from "../errors/imprimatur-error.ts";
import { RegistryError } from "../registry/registry-error.ts";
import {
  BUNDLE_MEDIA_TYPES,
  COSIGN_SIGN_PREDICATE,
  COSIGN_SIMPLE_SIGNING,
  DSSE_ENVELOPE,
  bundleToItem,
  cosignAttestationToItem,
  cosignLayerToItem,
  type SignedItem,
} from "./signed-item.ts";

/** The referrer annotation cosign v3 writes with a bundle's in-toto predicate type. */
const PREDICATE_TYPE_ANNOTATION = "dev.sigstore.bundle.predicateType";

/** Per image: at most this many signature layers and referrers are read (a registry cannot make us fetch more). */
export const MAX_SIGNATURES = 32;
export const MAX_SIGNATURE_BLOB_BYTES = 256 * 1024;
/** Attestations carry predicates (provenance, scans, SBOMs): larger, still bounded. */
export const MAX_ATTESTATION_BLOB_BYTES = 4 * 1024 * 1024;

export interface SignatureLocation {
  registry: string;
  repository: string;
  /** "sha256:<hex>" */
  digest: string;
}

export interface Discovery {
  /** Image signatures. */
  items: SignedItem[];
  /** In-toto attestations (cosign `.att` layers, bundles of other predicate types), when asked for. */
  attestations: SignedItem[];
  /** Artifacts that could not be read or parsed, one line each. */
  problems: string[];
  /** Lookups the registry did not answer (unreachable, timeout, 5xx): the failure policy decides. */
  unanswered: RegistryError[];
  /** What was looked at, for "no signatures found" messages. */
  looked: string[];
}

type DiscoveryClient = Pick<RegistryClient, "getManifest" | "getBlob" | "listReferrers">;

/**
 * `image` is where the image lives (its manifest signs message bundles); `at` where its signatures live. With
 * `attestations`, cosign's `.att` tag and attestation bundles are read too (an extra round trip or more).
 */
export async function discoverSignatures(
  client: DiscoveryClient,
  image: SignatureLocation,
  at: SignatureLocation,
  options: CallOptions,
  wanted: { attestations?: boolean } = {},
): Promise<Discovery> {
  const found: Discovery = { items: [], attestations: [], problems: [], unanswered: [], looked: [] };
  await Promise.all([
    cosignLayers(client, at, options, found, COSIGN_SIGNATURES),
    ...(wanted.attestations ? [cosignLayers(client, at, options, found, COSIGN_ATTESTATIONS)] : []),
    referrerBundles(client, image, at, options, found, wanted.attestations ?? false),
  ]);
  return found;
}

/** cosign's tag layouts: one tag per digest, one signature or attestation per layer. */
interface CosignLayout {
  suffix: ".sig" | ".att";
  what: string;
  mediaType: string;
  maxBytes: number;
  toItem: (blob: Buffer, annotations: Record<string, string>, location: string) => SignedItem;
  into: "items" | "attestations";
}

const COSIGN_SIGNATURES: CosignLayout = {
  suffix: ".sig",
  what: "signatures",
  mediaType: COSIGN_SIMPLE_SIGNING,
  maxBytes: MAX_SIGNATURE_BLOB_BYTES,
  toItem: cosignLayerToItem,
  into: "items",
};
const COSIGN_ATTESTATIONS: CosignLayout = {
  suffix: ".att",
  what: "attestations",
  mediaType: DSSE_ENVELOPE,
  maxBytes: MAX_ATTESTATION_BLOB_BYTES,
  toItem: cosignAttestationToItem,
  into: "attestations",
};

async function cosignLayers(client: DiscoveryClient, at: SignatureLocation, options: CallOptions, found: Discovery, layout: CosignLayout): Promise<void> {
  const tag = `${at.digest.replace(":", "-")}${layout.suffix}`;
  const where = `${at.registry}/${at.repository}:${tag}`;
  found.looked.push(`cosign tag ${where}`);
  let manifest;
  try {
    manifest = await client.getManifest({ registry: at.registry, repository: at.repository, tag }, options);
  } catch (e) {
    if (hasErrorCode(e, "not-found")) return;
    return noteFailure(e, where, found);
  }
  const layers = layersOf(manifest.body);
  if (!layers) {
    found.problems.push(`${where}: not an image manifest with layers`);
    return;
  }
  const signatures = layers.filter((l) => l.mediaType === layout.mediaType);
  if (signatures.length > MAX_SIGNATURES) found.problems.push(`${where}: ${signatures.length} ${layout.what}; only the first ${MAX_SIGNATURES} are read`);
  await Promise.all(
    signatures.slice(0, MAX_SIGNATURES).map(async (layer, i) => {
      const location = `${where} layer ${i}`;
      try {
        const blob = await client.getBlob(at, layer.digest, { ...options, maxBytes: layout.maxBytes });
        found[layout.into].push(layout.toItem(blob.body, layer.annotations, location));
      } catch (e) {
        noteFailure(e, location, found);
      }
    }),
  );
}

async function referrerBundles(
  client: DiscoveryClient,
  image: SignatureLocation,
  at: SignatureLocation,
  options: CallOptions,
  found: Discovery,
  attestations: boolean,
): Promise<void> {
  const where = `${at.registry}/${at.repository}`;
  found.looked.push(`Sigstore bundles referring to ${at.digest} in ${where}`);
  let referrers;
  try {
    referrers = await client.listReferrers(at, at.digest, options);
  } catch (e) {
    return noteFailure(e, `referrers of ${at.digest} in ${where}`, found);
  }
  // Attestations (other predicate types, announced in the descriptor's annotations) are fetched only when asked for.
  const isAttestation = (d: { annotations?: Record<string, string> }) => {
    const predicateType = d.annotations?.[PREDICATE_TYPE_ANNOTATION];
    return predicateType !== undefined && predicateType !== COSIGN_SIGN_PREDICATE;
  };
  const bundles = referrers.descriptors.filter(
    (d) => d.artifactType !== undefined && BUNDLE_MEDIA_TYPES.has(d.artifactType) && (attestations || !isAttestation(d)),
  );
  if (bundles.length === 0) return;
  if (bundles.length > MAX_SIGNATURES)
    found.problems.push(`${where}: ${bundles.length} bundles refer to ${at.digest}; only the first ${MAX_SIGNATURES} are read`);
  // A message-signature bundle signs the image manifest: fetched once, only if some bundle needs it.
  let manifest: Promise<Buffer | undefined> | undefined;
  const imageManifest = () =>
    (manifest ??= client.getManifest({ registry: image.registry, repository: image.repository, digest: image.digest }, options).then(
      (m) => m.body,
      () => undefined,
    ));
  await Promise.all(
    bundles.slice(0, MAX_SIGNATURES).map(async (d) => {
      const location = `referrer ${where}@${d.digest}`;
      try {
        const artifact = await client.getManifest({ registry: at.registry, repository: at.repository, digest: d.digest }, options);
        const layer = layersOf(artifact.body)?.find((l) => BUNDLE_MEDIA_TYPES.has(l.mediaType));
        if (!layer) {
          found.problems.push(`${location}: no Sigstore bundle layer`);
          return;
        }
        const attestation = isAttestation(d);
        const blob = await client.getBlob(at, layer.digest, { ...options, maxBytes: attestation ? MAX_ATTESTATION_BLOB_BYTES : MAX_SIGNATURE_BLOB_BYTES });
        const messageSigned = d.annotations?.["dev.sigstore.bundle.content"] === "message-signature" || /"messageSignature"/.test(blob.body.toString("utf8"));
        found[attestation ? "attestations" : "items"].push(bundleToItem(blob.body, location, messageSigned ? await imageManifest() : undefined));
      } catch (e) {
        noteFailure(e, location, found);
      }
    }),
  );
}

interface Layer {
  mediaType: string;
  digest: string;
  annotations: Record<string, string>;
}

function layersOf(body: Buffer): Layer[] | undefined {
  let doc: { layers?: unknown };
  try {
    doc = JSON.parse(body.toString("utf8")) as typeof doc;
  } catch {
    return undefined;
  }
  if (!Array.isArray(doc.layers)) return undefined;
  return doc.layers.flatMap((l: { mediaType?: unknown; digest?: unknown; annotations?: unknown }) => {
    if (typeof l?.mediaType !== "string" || typeof l.digest !== "string" || !/^sha(256|512):[0-9a-f]+$/.test(l.digest)) return [];
    const annotations =
      typeof l.annotations === "object" && l.annotations !== null
        ? Object.fromEntries(Object.entries(l.annotations).filter((e): e is [string, string] => typeof e[1] === "string"))
        : {};
    return [{ mediaType: l.mediaType, digest: l.digest, annotations }];
  });
}

/** "No answer" goes to the failure policy; anything else the registry said is a problem with this artifact. */
function noteFailure(e: unknown, where: string, found: Discovery): void {
  if (hasErrorCode(e, "unreachable", "timeout", "unavailable")) found.unanswered.push(e as RegistryError);
  else found.problems.push(`${where}: ${(e as Error).message}`);
}
