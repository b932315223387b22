// The release image's build provenance: a SLSA v1 provenance predicate (https://slsa.dev/provenance/v1), the
// predicate of an in-toto statement whose subject is the image's name and digest. SLSA v1 requires
// buildDefinition.buildType, buildDefinition.externalParameters and runDetails.builder.id; the rest is optional.
//
//   buildType             BUILD_TYPE: Imprimatur's reproducible image build (src/image-build/build-image.ts)
//   externalParameters    what the person or script building chose: the source revision (when known), the build
//                         command, and the repository the image was pushed to
//   internalParameters    the Imprimatur version that made the statement
//   resolvedDependencies  the source revision (a gitCommit digest, when it is a commit id), package-lock.json
//                         (sha256), and every npm package in the image with its purl and tarball digests
//   runDetails            builder.id (BUILDER_ID unless the caller names its own build platform), and when the
//                         build finished, when the caller knows it
import type { ImageContents } from "./image-contents.ts";

export const SLSA_PROVENANCE_PREDICATE_TYPE = "https://slsa.dev/provenance/v1";
/** How Imprimatur's image is built: a reproducible OCI layout from a checkout and its node_modules, no Docker. */
export const BUILD_TYPE = "https://imprimatur.dev/buildtypes/oci-image/v1";
/** The builder when none is named: the project's own scripts, run where the release is made. */
export const BUILDER_ID = "https://imprimatur.dev/builders/release-scripts/v1";
/** The build command, unless the caller says otherwise. */
export const BUILD_COMMAND = "npm run image";

export interface ResourceDescriptor {
  uri?: string;
  name?: string;
  digest?: Record<string, string>;
}

export interface SlsaProvenance {
  buildDefinition: {
    buildType: string;
    externalParameters: { buildCommand: string; repository: string; sourceRevision?: string };
    internalParameters: { imprimaturVersion: string };
    resolvedDependencies: ResourceDescriptor[];
  };
  runDetails: {
    builder: { id: string };
    metadata?: { finishedOn?: string; invocationId?: string };
  };
}

export interface ProvenanceInput {
  /** REGISTRY/REPOSITORY the image was pushed to. */
  repository: string;
  contents: ImageContents;
  /** The source revision the image was built from (a git commit id, "…-dirty" for a changed checkout). */
  sourceRevision?: string;
  buildCommand?: string;
  builderId?: string;
  /** RFC 3339: when the build finished, when the caller knows it (install does; sign-image, given an image, does not). */
  finishedOn?: string;
  imprimaturVersion: string;
  invocationId?: string;
}

export function slsaProvenance(input: ProvenanceInput): SlsaProvenance {
  const { contents } = input;
  const metadata = {
    ...(input.finishedOn !== undefined ? { finishedOn: input.finishedOn } : {}),
    ...(input.invocationId !== undefined ? { invocationId: input.invocationId } : {}),
  };
  const source: ResourceDescriptor[] =
    input.sourceRevision !== undefined && /^([0-9a-f]{40}|[0-9a-f]{64})$/.test(input.sourceRevision)
      ? [{ name: "source", digest: { gitCommit: input.sourceRevision } }]
      : [];
  const packages = [...(contents.runtime ? [contents.runtime] : []), ...contents.dependencies].map((p): ResourceDescriptor => ({
    uri: p.purl,
    ...(Object.keys(p.digests).length > 0 ? { digest: p.digests } : {}),
  }));
  return {
    buildDefinition: {
      buildType: BUILD_TYPE,
      externalParameters: {
        buildCommand: input.buildCommand ?? BUILD_COMMAND,
        repository: input.repository,
        ...(input.sourceRevision !== undefined ? { sourceRevision: input.sourceRevision } : {}),
      },
      internalParameters: { imprimaturVersion: input.imprimaturVersion },
      resolvedDependencies: [...source, { name: "package-lock.json", digest: { sha256: contents.lockfileDigest.slice("sha256:".length) } }, ...packages],
    },
    runDetails: {
      builder: { id: input.builderId ?? BUILDER_ID },
      ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
    },
  };
}
