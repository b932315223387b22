// Signs a release image that is already in a registry, as cosign v3 does, with Imprimatur's own registry client:
// three Sigstore bundles (v0.3, DSSE, key-signed, no transparency-log entry), each pushed as an OCI 1.1 referrer
// of the image's digest —
//   signature   cosign's image signature statement (https://sigstore.dev/cosign/sign/v1)
//   sbom        an SPDX 2.3 document of the image's npm packages (https://spdx.dev/Document)
//   provenance  SLSA v1 build provenance (https://slsa.dev/provenance/v1)
// Where the registry has the Referrers API (the image's referrers listed from it), a referrer is found through
// its `subject`; where it has none (docker-registry 2.8), the referrers tag schema's index at `sha256-<hex>` is
// rewritten with the referrers it listed and the new ones, as cosign does. Two signers writing that index at the
// same moment can lose one's entries (the tag schema has no lock); sign again to add them back.
import { PROJECT_DIR } from "../image-build/build-image.ts";
import { digestAlgorithm } from "../registry/content-digest.ts";
import { DOCKER_MANIFEST_V2, isIndexMediaType, OCI_IMAGE_MANIFEST } from "../registry/media-types.ts";
import { referrersTag, type ReferrerDescriptor as ListedDescriptor } from "../registry/referrers.ts";
import type { CallOptions, RegistryClient, RepositoryRef } from "../registry/registry-client.ts";
import { imageContents, type ImageContents } from "./image-contents.ts";
import { COSIGN_SIGN_PREDICATE, imageSignatureStatement, inTotoStatement } from "./in-toto.ts";
import { slsaProvenance, SLSA_PROVENANCE_PREDICATE_TYPE } from "./provenance.ts";
import { referrerManifest, referrersTagIndex, type Artifact, type BuiltReferrer } from "./referrer-manifests.ts";
import { ReleaseError } from "./release-error.ts";
import { spdxDocument, SPDX_PREDICATE_TYPE } from "./sbom.ts";
import { keySignedStatementBundle } from "./sigstore-bundle.ts";
import type { ReleaseKey } from "./signing-key.ts";

export type ReleasePart = "signature" | "sbom" | "provenance";
export const RELEASE_PARTS: readonly ReleasePart[] = ["signature", "sbom", "provenance"];

export type ReleaseClient = Pick<RegistryClient, "getManifest" | "listReferrers" | "pushBlob" | "pushManifest">;

export interface SignImageOptions {
  image: RepositoryRef & { digest: string };
  key: ReleaseKey;
  /** The source revision the image was built from: the provenance's sourceRevision. */
  sourceRevision?: string;
  /** The provenance's buildCommand (default "npm run image"). */
  buildCommand?: string;
  /** The provenance's runDetails.builder.id. */
  builderId?: string;
  /** When the build finished, if known: the provenance's runDetails.metadata.finishedOn. */
  builtAt?: Date;
  /** The checkout the image was built from (package.json, package-lock.json); default this one. */
  projectDir?: string;
  /** What to attach; default all three. */
  parts?: readonly ReleasePart[];
  /** The version that makes the statements (SPDX creator, provenance internalParameters). */
  imprimaturVersion: string;
  /** The clock of the referrers' creation time and the SBOM's; default now. */
  now?: () => Date;
  call?: CallOptions;
}

export interface PushedReferrer {
  part: ReleasePart;
  /** The referrer manifest's digest. */
  digest: string;
  artifactType: string;
  predicateType: string;
  /** The bundle's size, bytes. */
  size: number;
}

export interface SignedImage {
  /** REGISTRY/REPOSITORY@sha256:… */
  image: string;
  /** The signing key's fingerprint (sha256 of its SPKI), as decisions name a key signer. */
  key: string;
  referrers: PushedReferrer[];
  /** "api": the registry lists referrers itself; "tag-schema": the referrers tag's index was written. */
  referrersSource: "api" | "tag-schema";
  /** The index written at the referrers tag, when it was. */
  referrersIndex?: { tag: string; digest: string; entries: number };
  /** The npm packages the SBOM lists (dependencies and runtime). */
  sbomPackages?: number;
}

/** What can be signed: an image (OCI or Docker schema 2) or a multi-platform index of images. */
const SIGNABLE = new Set([OCI_IMAGE_MANIFEST, DOCKER_MANIFEST_V2]);

export async function signImage(client: ReleaseClient, opts: SignImageOptions): Promise<SignedImage> {
  const { image, key } = opts;
  const name = `${image.registry}/${image.repository}`;
  if (digestAlgorithm(image.digest) !== "sha256") throw new ReleaseError("image", `${name}@${image.digest}: sign an image by its sha256 digest`);
  const parts = opts.parts ?? RELEASE_PARTS;
  if (parts.length === 0) throw new ReleaseError("image", "nothing to attach: name at least one of signature, sbom, provenance");
  const now = (opts.now ?? (() => new Date()))();
  const created = now.toISOString().replace(/\.\d+Z$/, "Z");

  // The subject: the manifest as the registry holds it (verified against the digest by the client).
  const manifest = await client.getManifest({ registry: image.registry, repository: image.repository, digest: image.digest }, opts.call);
  if (!SIGNABLE.has(manifest.mediaType) && !isIndexMediaType(manifest.mediaType))
    throw new ReleaseError("image", `${name}@${image.digest} is a ${manifest.mediaType}, not an image manifest or index`);
  const subject = { mediaType: manifest.mediaType, digest: manifest.digest, size: manifest.size };

  let contents: ImageContents | undefined;
  const contentsOf = () => (contents ??= imageContents(opts.projectDir ?? PROJECT_DIR));
  const statementAbout = (predicateType: string, predicate: unknown) => inTotoStatement({ subjectName: name, digest: image.digest, predicateType, predicate });
  const built: Array<{ part: ReleasePart; predicateType: string; referrer: BuiltReferrer; size: number }> = [];
  for (const part of RELEASE_PARTS.filter((p) => parts.includes(p))) {
    let predicateType: string;
    let statement: Record<string, unknown>;
    if (part === "signature") {
      predicateType = COSIGN_SIGN_PREDICATE;
      statement = imageSignatureStatement({ name, digest: image.digest });
    } else if (part === "sbom") {
      predicateType = SPDX_PREDICATE_TYPE;
      statement = statementAbout(
        predicateType,
        spdxDocument({ name, digest: image.digest, contents: contentsOf(), created, toolVersion: opts.imprimaturVersion }),
      );
    } else {
      predicateType = SLSA_PROVENANCE_PREDICATE_TYPE;
      statement = statementAbout(
        predicateType,
        slsaProvenance({
          repository: name,
          contents: contentsOf(),
          imprimaturVersion: opts.imprimaturVersion,
          ...(opts.sourceRevision !== undefined ? { sourceRevision: opts.sourceRevision } : {}),
          ...(opts.buildCommand !== undefined ? { buildCommand: opts.buildCommand } : {}),
          ...(opts.builderId !== undefined ? { builderId: opts.builderId } : {}),
          ...(opts.builtAt !== undefined ? { finishedOn: opts.builtAt.toISOString().replace(/\.\d+Z$/, "Z") } : {}),
        }),
      );
    }
    const bundle = keySignedStatementBundle(key, statement);
    const referrer = referrerManifest({
      bundleBytes: bundle.bytes,
      bundleMediaType: bundle.mediaType,
      subject,
      predicateType,
      content: "dsse-envelope",
      created,
    });
    built.push({ part, predicateType, referrer, size: bundle.bytes.length });
  }

  // Whether the registry keeps the referrers list itself: asked before pushing, so the index written afterwards
  // holds what was there then.
  const listed = await client.listReferrers(image, image.digest, opts.call);
  for (const { referrer } of built) await pushArtifact(client, image, referrer, referrer.digest, opts.call);

  const result: SignedImage = {
    image: `${name}@${image.digest}`,
    key: key.fingerprint,
    referrers: built.map(({ part, predicateType, referrer, size }) => ({
      part,
      digest: referrer.digest,
      artifactType: referrer.descriptor.artifactType,
      predicateType,
      size,
    })),
    referrersSource: listed.source === "api" ? "api" : "tag-schema",
    ...(contents && parts.includes("sbom") ? { sbomPackages: contents.dependencies.length + (contents.runtime ? 1 : 0) } : {}),
  };
  if (listed.source !== "api") {
    const added = new Set(built.map((b) => b.referrer.digest));
    const kept = listed.descriptors.filter((d) => !added.has(d.digest));
    const entries: ListedDescriptor[] = [...kept, ...built.map((b) => b.referrer.descriptor)];
    const index = referrersTagIndex(entries);
    const tag = referrersTag(image.digest);
    await pushArtifact(client, image, index, tag, opts.call);
    result.referrersIndex = { tag, digest: index.digest, entries: entries.length };
  }
  return result;
}

/** Every blob the registry does not hold yet, then the manifest at `reference` (a tag or its digest). */
async function pushArtifact(client: ReleaseClient, repo: RepositoryRef, artifact: Artifact, reference: string, call: CallOptions | undefined): Promise<void> {
  for (const [digest, bytes] of artifact.blobs) await client.pushBlob(repo, digest, bytes, call);
  await client.pushManifest(repo, reference, artifact.mediaType, artifact.manifest, call);
}
