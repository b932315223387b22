// Finds an image's signatures in the registry, in every layout users sign with (see the image-verification
// design and cosign's specs): cosign's `sha256-<hex>.sig` tag, whose layers are signatures, and Sigstore
// bundles and Notary Project signatures attached as OCI 1.1 referrers (the Referrers API, or the referrers tag
// schema where a registry has no API, e.g. docker-registry 2.8). Reads go through the registry client with the pod's credentials, bounded
// in count and size; a malformed artifact is reported and skipped, never fatal to the others.
//
// What is fetched is chosen before it is fetched: referrers by artifact type and predicate-type annotation,
// cosign layers by media type and predicateType annotation, each kind (signatures, attestations) capped on its
// own so one cannot crowd out the other, and no artifact or layer whose declared size passes its limit or the
// call's download budget is requested.
import type { RegistryClient, CallOptions } from "../registry/registry-client.ts";
import { hasErrorCode } from "../errors/imprimatur-error.ts";
import { COSE_ENVELOPE_MEDIA_TYPE, JWS_ENVELOPE_MEDIA_TYPE, NOTATION_SIGNATURE_ARTIFACT_TYPE } from "../notation/notation-envelope.ts";
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

/**
 * Per image, by default: at most this many signatures and, separately, attestations are read from each layout
 * (cosign tag, referrers), so a registry cannot make us fetch more.
 */
export const MAX_SIGNATURES = 32;
/** The annotation cosign writes on each `.att` layer with its statement's predicate type. */
const COSIGN_PREDICATE_TYPE_ANNOTATION = "predicateType";
export const MAX_SIGNATURE_BLOB_BYTES = 256 * 1024;
/** Attestations carry predicates (provenance, scans, SBOMs): larger, still bounded. */
export const MAX_ATTESTATION_BLOB_BYTES = 4 * 1024 * 1024;

export interface SignatureLocation {
  registry: string;
  repository: string;
  /** "sha256:<hex>" */
  digest: string;
}

/** A Notary Project signature envelope as found: read by src/notation/ once an entry asks for it. */
export interface NotationEnvelope {
  /** application/jose+json or application/cose: the signature manifest's layer's media type. */
  mediaType: string;
  envelope: Buffer;
  /** "referrer registry/repo@sha256:…", for messages. */
  location: string;
}

export interface Discovery {
  /** Image signatures. */
  items: SignedItem[];
  /** Notary Project signatures, when asked for. */
  notation: NotationEnvelope[];
  /** In-toto attestations (cosign `.att` layers, bundles of other predicate types), when asked for. */
  attestations: SignedItem[];
  /** Artifacts that could not be read or parsed, one line each. */
  problems: string[];
  /** Lookups the registry did not answer (unreachable, timeout, 5xx): the failure policy decides. */
  unanswered: RegistryError[];
  /** The first read refused because the call's download budget would pass its limit (code "download-limit"). */
  limitHit?: RegistryError;
  /** What was looked at, for "no signatures found" messages. */
  looked: string[];
}

type DiscoveryClient = Pick<RegistryClient, "getManifest" | "getBlob" | "listReferrers">;

export interface Wanted {
  /** Predicate types of the attestations to read; none: attestations are not read. */
  predicateTypes?: readonly string[];
  /** Read Notary Project signatures too (a rule has a notary entry). */
  notation?: boolean;
  /** Read cosign signatures and Sigstore signature bundles (a rule has a key or keyless entry); default true. */
  sigstore?: boolean;
  /** Signatures, and separately attestations, read per layout; default MAX_SIGNATURES. */
  maxArtifacts?: number;
}

/**
 * `image` is where the image lives (its manifest signs message bundles); `at` where its signatures live. With
 * `predicateTypes`, cosign's `.att` tag and attestation bundles of those types are read too (an extra round
 * trip or more). `options.budget` bounds the bytes read across all of it.
 */
export async function discoverSignatures(
  client: DiscoveryClient,
  image: SignatureLocation,
  at: SignatureLocation,
  options: CallOptions,
  wanted: Wanted = {},
): Promise<Discovery> {
  const found: Discovery = { items: [], notation: [], attestations: [], problems: [], unanswered: [], looked: [] };
  const predicateTypes = new Set(wanted.predicateTypes ?? []);
  const max = wanted.maxArtifacts ?? MAX_SIGNATURES;
  const picking: Picking = { max, predicateTypes, notation: wanted.notation ?? false, sigstore: wanted.sigstore ?? true };
  await Promise.all([
    // A rule whose entries are all notary entries looks for no cosign signature: a round trip less per image.
    ...(picking.sigstore ? [cosignLayers(client, at, options, found, COSIGN_SIGNATURES, picking)] : []),
    ...(predicateTypes.size > 0 ? [cosignLayers(client, at, options, found, COSIGN_ATTESTATIONS, picking)] : []),
    referrerArtifacts(client, image, at, options, found, picking),
  ]);
  return found;
}

interface Picking {
  max: number;
  predicateTypes: ReadonlySet<string>;
  notation: boolean;
  sigstore: boolean;
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

async function cosignLayers(
  client: DiscoveryClient,
  at: SignatureLocation,
  options: CallOptions,
  found: Discovery,
  layout: CosignLayout,
  picking: Picking,
): Promise<void> {
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
  // An attestation layer that names another predicate type than those asked for is not fetched.
  const signatures = layers.filter((l) => {
    if (l.mediaType !== layout.mediaType) return false;
    const predicateType = l.annotations[COSIGN_PREDICATE_TYPE_ANNOTATION];
    return layout.into === "items" || predicateType === undefined || picking.predicateTypes.has(predicateType);
  });
  if (signatures.length > picking.max) found.problems.push(`${where}: ${signatures.length} ${layout.what}; only the first ${picking.max} are read`);
  await Promise.all(
    signatures.slice(0, picking.max).map(async (layer, i) => {
      const location = `${where} layer ${i}`;
      try {
        checkDeclaredSize(layer.size, layout.maxBytes, location, options, at);
        const blob = await client.getBlob(at, layer.digest, { ...options, maxBytes: layout.maxBytes });
        found[layout.into].push(layout.toItem(blob.body, layer.annotations, location));
      } catch (e) {
        noteFailure(e, location, found);
      }
    }),
  );
}

/** The image's referrers, listed once: Sigstore bundles, and Notary Project signatures when asked for. */
async function referrerArtifacts(
  client: DiscoveryClient,
  image: SignatureLocation,
  at: SignatureLocation,
  options: CallOptions,
  found: Discovery,
  picking: Picking,
): Promise<void> {
  const where = `${at.registry}/${at.repository}`;
  if (picking.sigstore || picking.predicateTypes.size > 0) found.looked.push(`Sigstore bundles referring to ${at.digest} in ${where}`);
  if (picking.notation) found.looked.push(`Notary Project signatures referring to ${at.digest} in ${where}`);
  let referrers;
  try {
    referrers = await client.listReferrers(at, at.digest, options);
  } catch (e) {
    return noteFailure(e, `referrers of ${at.digest} in ${where}`, found);
  }
  await Promise.all([
    referrerBundles(client, image, at, options, found, picking, referrers.descriptors),
    ...(picking.notation ? [notationSignatures(client, at, options, found, picking, referrers.descriptors)] : []),
  ]);
}

type Referrer = Awaited<ReturnType<DiscoveryClient["listReferrers"]>>["descriptors"][number];

async function referrerBundles(
  client: DiscoveryClient,
  image: SignatureLocation,
  at: SignatureLocation,
  options: CallOptions,
  found: Discovery,
  picking: Picking,
  descriptors: readonly Referrer[],
): Promise<void> {
  const where = `${at.registry}/${at.repository}`;
  // Signatures and attestations are told apart by the predicate type the descriptor announces, and capped each
  // on their own; attestations are fetched only for the predicate types asked for.
  const predicateTypeOf = (d: { annotations?: Record<string, string> }) => d.annotations?.[PREDICATE_TYPE_ANNOTATION];
  const isAttestation = (d: { annotations?: Record<string, string> }) => {
    const predicateType = predicateTypeOf(d);
    return predicateType !== undefined && predicateType !== COSIGN_SIGN_PREDICATE;
  };
  const bundles = descriptors.filter((d) => d.artifactType !== undefined && BUNDLE_MEDIA_TYPES.has(d.artifactType));
  const signatures = picking.sigstore ? bundles.filter((d) => !isAttestation(d)) : [];
  const attestations = bundles.filter((d) => isAttestation(d) && picking.predicateTypes.has(predicateTypeOf(d)!));
  for (const [list, what] of [
    [signatures, "signature bundles"],
    [attestations, "attestation bundles of the types asked for"],
  ] as const) {
    if (list.length > picking.max) found.problems.push(`${where}: ${list.length} ${what} refer to ${at.digest}; only the first ${picking.max} are read`);
  }
  const chosen = [...signatures.slice(0, picking.max), ...attestations.slice(0, picking.max)];
  if (chosen.length === 0) return;
  // A message-signature bundle signs the image manifest: fetched once, only if some bundle needs it.
  let manifest: Promise<Buffer | undefined> | undefined;
  const imageManifest = () =>
    (manifest ??= client.getManifest({ registry: image.registry, repository: image.repository, digest: image.digest }, options).then(
      (m) => m.body,
      () => undefined,
    ));
  await Promise.all(
    chosen.map(async (d) => {
      const location = `referrer ${where}@${d.digest}`;
      try {
        checkDeclaredSize(d.size, Number.MAX_SAFE_INTEGER, location, options, at);
        const artifact = await client.getManifest({ registry: at.registry, repository: at.repository, digest: d.digest }, options);
        const layer = layersOf(artifact.body)?.find((l) => BUNDLE_MEDIA_TYPES.has(l.mediaType));
        if (!layer) {
          found.problems.push(`${location}: no Sigstore bundle layer`);
          return;
        }
        const attestation = isAttestation(d);
        const maxBytes = attestation ? MAX_ATTESTATION_BLOB_BYTES : MAX_SIGNATURE_BLOB_BYTES;
        checkDeclaredSize(layer.size, maxBytes, `${location} layer`, options, at);
        const blob = await client.getBlob(at, layer.digest, { ...options, maxBytes });
        const messageSigned = d.annotations?.["dev.sigstore.bundle.content"] === "message-signature" || /"messageSignature"/.test(blob.body.toString("utf8"));
        found[attestation ? "attestations" : "items"].push(bundleToItem(blob.body, location, messageSigned ? await imageManifest() : undefined));
      } catch (e) {
        noteFailure(e, location, found);
      }
    }),
  );
}

/** Envelopes of Notary Project signatures: as small as cosign's signatures, a certificate chain and a timestamp more. */
export const MAX_NOTATION_ENVELOPE_BYTES = MAX_SIGNATURE_BLOB_BYTES;
const NOTATION_ENVELOPES = new Set([JWS_ENVELOPE_MEDIA_TYPE, COSE_ENVELOPE_MEDIA_TYPE]);

/**
 * Notary Project signatures: referrers of artifact type application/vnd.cncf.notary.signature (a manifest that
 * declares none has it from its config's media type, as notation 1.x pushes it), each a manifest with exactly one
 * layer, the JWS or COSE envelope. Capped as bundles are, each envelope read within its size limit.
 */
async function notationSignatures(
  client: DiscoveryClient,
  at: SignatureLocation,
  options: CallOptions,
  found: Discovery,
  picking: Picking,
  descriptors: readonly Referrer[],
): Promise<void> {
  const where = `${at.registry}/${at.repository}`;
  const signatures = descriptors.filter((d) => d.artifactType === NOTATION_SIGNATURE_ARTIFACT_TYPE);
  if (signatures.length > picking.max)
    found.problems.push(`${where}: ${signatures.length} Notary Project signatures refer to ${at.digest}; only the first ${picking.max} are read`);
  await Promise.all(
    signatures.slice(0, picking.max).map(async (d) => {
      const location = `referrer ${where}@${d.digest}`;
      try {
        checkDeclaredSize(d.size, Number.MAX_SAFE_INTEGER, location, options, at);
        const artifact = await client.getManifest({ registry: at.registry, repository: at.repository, digest: d.digest }, options);
        const layers = layersOf(artifact.body);
        if (!layers || layers.length !== 1 || !NOTATION_ENVELOPES.has(layers[0]!.mediaType)) {
          found.problems.push(`${location}: not a Notary Project signature (one layer, a JWS or COSE envelope)`);
          return;
        }
        const layer = layers[0]!;
        checkDeclaredSize(layer.size, MAX_NOTATION_ENVELOPE_BYTES, `${location} layer`, options, at);
        const blob = await client.getBlob(at, layer.digest, { ...options, maxBytes: MAX_NOTATION_ENVELOPE_BYTES });
        found.notation.push({ mediaType: layer.mediaType, envelope: blob.body, location });
      } catch (e) {
        noteFailure(e, location, found);
      }
    }),
  );
}

/**
 * Refuses, before any request, an artifact whose declared size passes its own limit ("too-large") or what is
 * left of the call's download budget ("download-limit"). Sizes are checked again while reading.
 */
function checkDeclaredSize(size: number | undefined, maxBytes: number, what: string, options: CallOptions, at: SignatureLocation): void {
  if (size === undefined) return;
  const details = { registry: at.registry, repository: at.repository };
  if (size > maxBytes) throw new RegistryError("too-large", `${what} declares ${size} bytes; the limit is ${maxBytes} bytes`, details);
  if (options.budget && !options.budget.fits(size)) throw options.budget.exceeded(`${what} (declares ${size} bytes)`, details);
}

interface Layer {
  mediaType: string;
  digest: string;
  /** As declared in the manifest; undefined when it is missing or not a byte count. */
  size: number | undefined;
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
  return doc.layers.flatMap((l: { mediaType?: unknown; digest?: unknown; size?: unknown; annotations?: unknown }) => {
    if (typeof l?.mediaType !== "string" || typeof l.digest !== "string" || !/^sha(256|512):[0-9a-f]+$/.test(l.digest)) return [];
    const annotations =
      typeof l.annotations === "object" && l.annotations !== null
        ? Object.fromEntries(Object.entries(l.annotations).filter((e): e is [string, string] => typeof e[1] === "string"))
        : {};
    const size = Number.isSafeInteger(l.size) && (l.size as number) >= 0 ? (l.size as number) : undefined;
    return [{ mediaType: l.mediaType, digest: l.digest, size, annotations }];
  });
}

/**
 * "No answer" goes to the failure policy; a spent download budget is kept apart (it denies, whatever the
 * failure policy); anything else the registry said is a problem with this artifact.
 */
function noteFailure(e: unknown, where: string, found: Discovery): void {
  if (hasErrorCode(e, "unreachable", "timeout", "unavailable")) found.unanswered.push(e as RegistryError);
  else {
    if (hasErrorCode(e, "download-limit")) found.limitHit ??= e as RegistryError;
    // Errors raised while reading an artifact already name it; others get its location here.
    const message = (e as Error).message;
    found.problems.push(message.startsWith(where) ? message : `${where}: ${message}`);
  }
}
