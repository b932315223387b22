// The engine's signature step (src/engine/verify-images.ts): a verification the verifier serves from its cache
// comes back as the same result object on every admission, which is what lets the judgement of its statements be
// kept with it (src/core/image-policy/verified-judgements.ts). The verifier and credentials are stand-ins: this
// is the step's bookkeeping, not verification (test/e2e/signature-verification.test.ts verifies for real).
import assert from "node:assert/strict";
import { test } from "node:test";
import type { AdmissionSubject } from "../../../src/core/admission-subject.ts";
import { verificationKey } from "../../../src/core/verification-results.ts";
import type { OnlineTools } from "../../../src/engine/cluster-tools.ts";
import { signaturesToVerify, verifySignatures } from "../../../src/engine/verify-images.ts";
import type { VerificationResult } from "../../../src/verification/image-verifier.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";

const DIGEST = `sha256:${"d".repeat(64)}`;
const IMAGE = `registry.example.com/app@${DIGEST}`;
const POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: signed}
spec:
  rules:
    - action: allow
      images: ["registry.example.com/*"]
      attestors: [{entries: [{keyless: {subject: s, issuer: i}}]}]
`;

test("a result the verifier serves again is handed to the policies as the same object, with the digest it was verified at", async () => {
  let served: VerificationResult = { status: "verified", evidence: [] };
  const asked: string[] = [];
  const lookup = () => [];
  const tools = {
    online: true,
    credentials: { lookupPresented: () => ({ lookup, namespacedLookup: lookup }) },
    verifier: {
      verify: async (request: { image: { digest: string } }) => {
        asked.push(request.image.digest);
        return served;
      },
    },
  } as unknown as OnlineTools;
  const { policies } = parsePolicyText(POLICY, "p.yaml");
  const subject = { namespace: "shop", pods: [], images: [{ image: IMAGE, pod: 0, field: "spec.containers[0].image" }] } as unknown as AdmissionSubject;
  const admit = async () => {
    const work = signaturesToVerify(tools, policies.ImagePolicy, subject, undefined);
    assert.ok(work);
    const results = await verifySignatures(work, subject, new Map(), Date.now() + 10_000, () => []);
    return results.get(verificationKey("signed", 0, IMAGE));
  };
  const first = await admit();
  assert.deepEqual(first, { status: "verified", evidence: [], digest: DIGEST });
  assert.equal(await admit(), first, "the same object");
  served = { status: "verified", evidence: [] };
  const renewed = await admit();
  assert.notEqual(renewed, first, "a new verification is a new object");
  assert.deepEqual(renewed, first);
  assert.deepEqual(asked, [DIGEST, DIGEST, DIGEST]);
});
