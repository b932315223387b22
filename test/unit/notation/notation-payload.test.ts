// The Notary payload (src/notation/notation-payload.ts): a signature counts for the admitted image only when its
// descriptor is that manifest's, digest, media type and size alike.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";
import { checkTarget, readPayload } from "../../../src/notation/notation-payload.ts";

const MANIFEST = { digest: "sha256:" + "ab".repeat(32), mediaType: "application/vnd.oci.image.manifest.v1+json", size: 1234 };
const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

describe("the Notary payload", () => {
  test("a descriptor of the manifest is read and matches it", () => {
    const signed = readPayload(bytes({ targetArtifact: { ...MANIFEST, annotations: { "io.wabbit-networks.buildId": "123" } } }));
    assert.deepEqual(signed, { ...MANIFEST, annotations: { "io.wabbit-networks.buildId": "123" } });
    checkTarget(signed, MANIFEST);
    checkTarget(signed, MANIFEST, { "io.wabbit-networks.buildId": "123" });
  });
  for (const [what, change, reason] of [
    ["another digest", { digest: "sha256:" + "cd".repeat(32) }, /is of sha256:cdcd/],
    ["another media type", { mediaType: "application/vnd.oci.image.index.v1+json" }, /media type/],
    ["another size", { size: 1235 }, /1235 bytes/],
  ] as const)
    test(`a descriptor with ${what} is another artifact`, () =>
      assert.throws(
        () => checkTarget(readPayload(bytes({ targetArtifact: { ...MANIFEST, ...change } })), MANIFEST),
        (e: unknown) => hasErrorCode(e, "other-artifact") && reason.test((e as Error).message),
      ));
  test("a required annotation that is missing or different", () => {
    const signed = readPayload(bytes({ targetArtifact: { ...MANIFEST, annotations: { buildId: "1" } } }));
    assert.throws(
      () => checkTarget(signed, MANIFEST, { buildId: "2" }),
      (e: unknown) => hasErrorCode(e, "other-artifact") && /"1"/.test((e as Error).message),
    );
    assert.throws(
      () => checkTarget(signed, MANIFEST, { env: "prod" }),
      (e: unknown) => hasErrorCode(e, "other-artifact") && /missing/.test((e as Error).message),
    );
  });
  for (const [what, payload] of [
    ["not JSON", new TextEncoder().encode("{")],
    ["no targetArtifact", bytes({ subject: MANIFEST })],
    ["a digest that is not one", bytes({ targetArtifact: { ...MANIFEST, digest: "latest" } })],
    ["no media type", bytes({ targetArtifact: { digest: MANIFEST.digest, size: 1 } })],
    ["a size that is not one", bytes({ targetArtifact: { ...MANIFEST, size: "1234" } })],
    ["annotations that are not strings", bytes({ targetArtifact: { ...MANIFEST, annotations: { n: 1 } } })],
  ] as const)
    test(`a payload with ${what} is malformed`, () =>
      assert.throws(
        () => readPayload(payload),
        (e: unknown) => hasErrorCode(e, "malformed"),
      ));
});
