// The verifier a server makes for each cluster loads the verification code on its first use
// (src/verification/deferred-verifier.ts). Until then it has nothing cached; once loaded it behaves as the
// verifier it stands for, and names its results with the policy generation it was told, including one it was
// told before the code loaded (serve --workers shares results by that name: claims are seen here). A reload
// while the code loads must not let a result asked under the old policies count under the new ones, and code that
// cannot be loaded denies (a server failing open must not admit for that reason). Whether a
// server loads the code at all is tested in test/unit/verification/verifier-loading.test.ts.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import type { CredentialLookup } from "../../../src/credentials/credential.ts";
import { DeferredImageVerifier } from "../../../src/verification/deferred-verifier.ts";
import type { Claim, SharedVerifications, VerificationRequest } from "../../../src/verification/image-verifier.ts";
import { cosignSignatureLayer, simpleSigningPayload } from "../../support/signer/cosign-signatures.ts";
import { generateSigningKey } from "../../support/signer/keys.ts";
import { attestorsWith, signatureRegistry } from "../../support/verification-fixtures.ts";

const digest = `sha256:${createHash("sha256").update("deferred").digest("hex")}`;
const release = generateSigningKey("ecdsa-p256");
const signature = await cosignSignatureLayer({ key: release, payload: simpleSigningPayload({ dockerReference: "r.example/app", digest }) });
const attestors = attestorsWith(`{staticKey: {name: release, ignoreTlog: true, key: ${JSON.stringify(release.publicKeyPem)}}}`);
const anonymous: CredentialLookup = () => [];
const request: VerificationRequest = { image: { registry: "r.example", repository: "app", digest }, policy: "p", rule: 0, attestors, lookup: anonymous };
const soon = () => Date.now() + 5_000;

/** Shared verifications that let this process verify every key it claims, and record the keys (generation first). */
function recordingShare(): SharedVerifications & { generations: string[] } {
  const generations: string[] = [];
  return {
    generations,
    async claim(key: string): Promise<Claim> {
      generations.push(key.split("\u0000")[0]!);
      return { verify: () => undefined };
    },
  };
}

function deferred(share?: SharedVerifications) {
  const registry = signatureRegistry(digest, { anyRepository: { sig: [signature] } });
  return new DeferredImageVerifier({ client: registry.client, trustRoots: () => new Map(), ...(share ? { shared: share } : {}) });
}

test("before its first verification it has nothing cached; after it, a repeat is answered from the loaded verifier's cache", async () => {
  const verifier = deferred();
  assert.equal(verifier.peekAll([request]), undefined);
  const first = await verifier.verify(request, soon());
  assert.equal(first.status, "verified", JSON.stringify(first));
  assert.deepEqual(verifier.peekAll([request]), [first]);
  const loaded = await verifier.loaded();
  assert.equal(loaded.verifications, 1);
  assert.equal(loaded.hits, 1);
});

test("the generation it was told before loading names the loaded verifier's results", async () => {
  const share = recordingShare();
  const verifier = deferred(share);
  verifier.clear(7); // a worker told its primary's generation
  verifier.clear(); // and one reload after it
  await verifier.verify(request, soon());
  assert.deepEqual(share.generations, ["8"]);
  verifier.clear();
  await verifier.verify(request, soon());
  assert.deepEqual(share.generations, ["8", "9"]);
});

test("a reload while the code loads: the verification is named with the generation it was asked under, and not kept", async () => {
  const share = recordingShare();
  const verifier = deferred(share);
  const asked = verifier.verify(request, soon());
  verifier.clear(); // the policies changed before the verifier existed
  assert.equal((await asked).status, "verified");
  assert.deepEqual(share.generations, ["0"]);
  assert.equal(verifier.peekAll([request]), undefined, "a result of the old policies is not an answer under the new ones");
  await verifier.verify(request, soon());
  assert.deepEqual(share.generations, ["0", "1"]);
  assert.equal(verifier.peekAll([request])?.[0]?.status, "verified");
});

test("verification code that cannot be loaded denies, naming why, even where the server fails open", async () => {
  const registry = signatureRegistry(digest, { anyRepository: { sig: [signature] } });
  const broken = new DeferredImageVerifier({ client: registry.client, trustRoots: () => new Map() }, () =>
    Promise.reject(new Error("Cannot find module '/app/src/verification/image-verifier.js'")),
  );
  const result = await broken.verify(request, soon());
  assert.equal(result.status, "denied");
  assert.match(result.status === "denied" ? result.reason : "", /verification code could not be loaded: Cannot find module/);
  assert.equal(broken.peekAll([request]), undefined);
});
