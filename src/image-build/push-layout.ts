// Pushes an image from an OCI image layout (what `npm run image` writes) to a registry with RegistryClient: every
// blob the registry does not hold yet, then each manifest (an index's platform manifests by digest first), the
// top one under the tag. What `skopeo copy --preserve-digests oci:DIR:TAG docker://…` does for this case, done
// here so that `imprimatur install` needs no other tool and reads credentials the way the rest of Imprimatur does.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { computeDigest, digestAlgorithm } from "../registry/content-digest.ts";
import { OCI_IMAGE_INDEX } from "../registry/media-types.ts";
import type { CallOptions, RegistryClient, RepositoryRef } from "../registry/registry-client.ts";
import { ImageBuildError } from "./image-build-error.ts";

const REF_NAME = "org.opencontainers.image.ref.name";
const DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json";

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

export interface PushedImage {
  /** The digest of the top manifest (an index's, for a multi-platform image): what a pod names. */
  digest: string;
  /** Blobs sent; those the registry held already are not counted. */
  uploadedBlobs: number;
  reusedBlobs: number;
}

/** Pushes the layout's image tagged `layoutTag` (its index.json's ref.name) to `target` as `tag`. */
export async function pushLayout(
  client: RegistryClient,
  layoutDir: string,
  layoutTag: string,
  target: RepositoryRef,
  tag: string,
  options: CallOptions = {},
): Promise<PushedImage> {
  const index = readJson(join(layoutDir, "index.json"), "index.json") as { manifests?: Descriptor[] };
  const top = (index.manifests ?? []).find((m) => m.annotations?.[REF_NAME] === layoutTag);
  if (!top) throw layoutError(layoutDir, `index.json has no image tagged ${JSON.stringify(layoutTag)}`);
  // Every blob is read and checked before the first byte is sent: a broken layout pushes nothing.
  const blobs = new Map<string, { descriptor: Descriptor; bytes: Buffer }>();
  const manifests: Array<{ descriptor: Descriptor; bytes: Buffer; reference: string }> = [];
  const collect = (descriptor: Descriptor, reference: string): void => {
    const bytes = readBlob(layoutDir, descriptor);
    let manifest: { config?: Descriptor; layers?: Descriptor[]; manifests?: Descriptor[] };
    try {
      manifest = JSON.parse(bytes.toString("utf8"));
    } catch (e) {
      throw layoutError(layoutDir, `manifest ${descriptor.digest} is not JSON: ${(e as Error).message}`);
    }
    if (descriptor.mediaType === OCI_IMAGE_INDEX || descriptor.mediaType === DOCKER_MANIFEST_LIST) {
      for (const child of manifest.manifests ?? []) collect(child, child.digest);
    } else {
      for (const blob of [manifest.config, ...(manifest.layers ?? [])]) {
        if (blob && !blobs.has(blob.digest)) blobs.set(blob.digest, { descriptor: blob, bytes: readBlob(layoutDir, blob) });
      }
    }
    manifests.push({ descriptor, bytes, reference }); // children before their index
  };
  collect(top, tag);

  let uploadedBlobs = 0;
  for (const { descriptor, bytes } of blobs.values()) {
    if ((await client.pushBlob(target, descriptor.digest, bytes, options)).uploaded) uploadedBlobs++;
  }
  let digest = "";
  for (const { descriptor, bytes, reference } of manifests) digest = await client.pushManifest(target, reference, descriptor.mediaType, bytes, options);
  return { digest, uploadedBlobs, reusedBlobs: blobs.size - uploadedBlobs };
}

/** A blob of the layout, checked against its descriptor: a layout edited by hand must not push other bytes. */
function readBlob(layoutDir: string, descriptor: Descriptor): Buffer {
  const algorithm = digestAlgorithm(descriptor.digest);
  if (algorithm === undefined) throw layoutError(layoutDir, `${JSON.stringify(descriptor.digest)} is not a sha256 or sha512 digest`);
  const [name, hex] = descriptor.digest.split(":") as [string, string];
  const bytes = readFileOf(join(layoutDir, "blobs", name, hex), `blob ${descriptor.digest}`);
  if (bytes.length !== descriptor.size || computeDigest(bytes, algorithm) !== descriptor.digest) {
    throw layoutError(layoutDir, `blob ${descriptor.digest} does not match its descriptor (size or digest)`);
  }
  return bytes;
}

function readJson(path: string, what: string): unknown {
  const bytes = readFileOf(path, what);
  try {
    return JSON.parse(bytes.toString("utf8"));
  } catch (e) {
    throw layoutError(path, `${what} is not JSON: ${(e as Error).message}`);
  }
}

function readFileOf(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw layoutError(path, `cannot read ${what}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

function layoutError(where: string, message: string): ImageBuildError {
  return new ImageBuildError("layout", `the OCI layout ${where}: ${message}`);
}
