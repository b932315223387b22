import { test } from "node:test";
import assert from "node:assert/strict";
import {
  DOCKER_MANIFEST_LIST,
  DOCKER_MANIFEST_V2,
  MANIFEST_ACCEPT,
  OCI_IMAGE_INDEX,
  OCI_IMAGE_MANIFEST,
  readManifest,
} from "../../../src/registry/media-types.ts";

const d = (c: string): string => "sha256:" + c.repeat(64);
const body = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));

test("Accept covers OCI index and manifest, Docker manifest list and schema 2", () => {
  for (const type of [OCI_IMAGE_INDEX, OCI_IMAGE_MANIFEST, DOCKER_MANIFEST_LIST, DOCKER_MANIFEST_V2]) assert.ok(MANIFEST_ACCEPT.includes(type));
});

test("an index lists its platform manifests", () => {
  const index = {
    schemaVersion: 2,
    mediaType: OCI_IMAGE_INDEX,
    manifests: [
      { mediaType: OCI_IMAGE_MANIFEST, digest: d("a"), size: 100, platform: { os: "linux", architecture: "amd64" } },
      { mediaType: OCI_IMAGE_MANIFEST, digest: d("b"), size: 200, platform: { os: "linux", architecture: "arm", variant: "v7" } },
      { mediaType: OCI_IMAGE_MANIFEST, digest: d("c"), size: 300, annotations: { "vnd.docker.reference.type": "attestation-manifest" } },
    ],
  };
  assert.deepEqual(readManifest(body(index), `${OCI_IMAGE_INDEX}; charset=utf-8`), {
    ok: true,
    mediaType: OCI_IMAGE_INDEX,
    manifests: [
      { mediaType: OCI_IMAGE_MANIFEST, digest: d("a"), size: 100, platform: { os: "linux", architecture: "amd64" } },
      { mediaType: OCI_IMAGE_MANIFEST, digest: d("b"), size: 200, platform: { os: "linux", architecture: "arm", variant: "v7" } },
      { mediaType: OCI_IMAGE_MANIFEST, digest: d("c"), size: 300 },
    ],
  });
});

test("the media type comes from Content-Type, else from the body", () => {
  const manifest = { schemaVersion: 2, mediaType: DOCKER_MANIFEST_V2, config: {}, layers: [] };
  assert.deepEqual(readManifest(body(manifest), DOCKER_MANIFEST_V2), { ok: true, mediaType: DOCKER_MANIFEST_V2 });
  assert.deepEqual(readManifest(body(manifest), "application/json"), { ok: true, mediaType: DOCKER_MANIFEST_V2 });
  assert.deepEqual(readManifest(body({ schemaVersion: 2, manifests: [] }), undefined), { ok: true, mediaType: OCI_IMAGE_INDEX, manifests: [] });
  assert.deepEqual(readManifest(body({ schemaVersion: 2, config: {}, layers: [] }), undefined), { ok: true, mediaType: OCI_IMAGE_MANIFEST });
});

const bad: Array<[string, Buffer, string | undefined, RegExp]> = [
  ["not JSON", Buffer.from("<html>"), OCI_IMAGE_MANIFEST, /not valid JSON/],
  [
    "Content-Type and body disagree",
    body({ mediaType: OCI_IMAGE_MANIFEST, config: {} }),
    OCI_IMAGE_INDEX,
    /Content-Type is .*index.* but the manifest says .*manifest/,
  ],
  [
    "schema 1",
    body({ schemaVersion: 1, mediaType: "application/vnd.docker.distribution.manifest.v1+prettyjws" }),
    undefined,
    /unsupported manifest media type/,
  ],
  ["index without manifests", body({ mediaType: OCI_IMAGE_INDEX }), OCI_IMAGE_INDEX, /no "manifests" list/],
  [
    "index entry with a bad digest",
    body({ mediaType: OCI_IMAGE_INDEX, manifests: [{ mediaType: OCI_IMAGE_MANIFEST, digest: "md5:x", size: 1 }] }),
    undefined,
    /manifests\[0\]: digest/,
  ],
  [
    "index entry with half a platform",
    body({ mediaType: OCI_IMAGE_INDEX, manifests: [{ mediaType: OCI_IMAGE_MANIFEST, digest: d("a"), size: 1, platform: { os: "linux" } }] }),
    undefined,
    /platform must have os and architecture/,
  ],
];
for (const [name, bytes, contentType, error] of bad) {
  test(`rejects: ${name}`, () => {
    const result = readManifest(bytes, contentType);
    assert.equal(result.ok, false);
    assert.match((result as { error: string }).error, error);
  });
}
