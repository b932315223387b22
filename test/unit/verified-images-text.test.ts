// The verified-images record as text (the audit annotation, and the annotation /mutate writes): for the same cached
// results the same text, made once, whether one image was verified or several; a new result (verified again, at
// another digest) makes a new text; the text is always the record's JSON.
import assert from "node:assert/strict";
import { test } from "node:test";
import { verificationKey, verifiedImagesRecord, verifiedImagesText, type ImageVerification } from "../../src/core/verification-results.ts";

const signer = { entry: "attestors[0].entries[0]", attestor: "key", signer: "key sha256:ab", format: "cosign-signature" };
const verified = (digest: string): ImageVerification => ({ status: "verified", digest, evidence: [signer] });
const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;
const D3 = `sha256:${"3".repeat(64)}`;

test("several verified images: the record's JSON, the very same text while the results are the same objects", () => {
  const app = verified(D1);
  const sidecar = verified(D2);
  const results = new Map([
    [verificationKey("signed", 0, "r.example/app:1"), app],
    [verificationKey("signed", 0, "r.example/proxy:2"), sidecar],
    [verificationKey("signed", 1, "r.example/other:3"), { status: "denied", reason: "no signature" } as ImageVerification],
  ]);
  const text = verifiedImagesText(results);
  assert.equal(text, JSON.stringify(verifiedImagesRecord(results)));
  assert.deepEqual(Object.keys(JSON.parse(text!)), ["r.example/app:1", "r.example/proxy:2"]);
  // The next admission: a new map of the same cached result objects.
  const again = new Map(results);
  assert.equal(verifiedImagesText(again), text);

  // The sidecar verified again (its cached result expired), now at another digest: a new text.
  const changed = new Map(results).set(verificationKey("signed", 0, "r.example/proxy:2"), verified(D3));
  const newer = verifiedImagesText(changed);
  assert.equal(newer, JSON.stringify(verifiedImagesRecord(changed)));
  assert.equal((JSON.parse(newer!) as Record<string, { digest: string }>)["r.example/proxy:2"]!.digest, D3);
  // The same images under other names are other records.
  const renamed = new Map([
    [verificationKey("signed", 0, "r.example/app:latest"), app],
    [verificationKey("signed", 0, "r.example/proxy:2"), sidecar],
  ]);
  assert.deepEqual(Object.keys(JSON.parse(verifiedImagesText(renamed)!)), ["r.example/app:latest", "r.example/proxy:2"]);
});

test("one image two policies verified: one entry with both policies' signers", () => {
  const other = { ...signer, signer: "key sha256:cd" };
  const results = new Map<string, ImageVerification>([
    [verificationKey("a", 0, "r.example/app:1"), verified(D1)],
    [verificationKey("b", 0, "r.example/app:1"), { status: "verified", digest: D1, evidence: [other] }],
  ]);
  assert.deepEqual(JSON.parse(verifiedImagesText(results)!), { "r.example/app:1": { digest: D1, signers: ["key sha256:ab", "key sha256:cd"] } });
  assert.equal(verifiedImagesText(new Map(results)), verifiedImagesText(results));
});
