// N of M counts distinct signers, end to end through the verifier: keyless signatures made offline by the
// project's test signer (mock Fulcio and Rekor) in an in-memory registry, judged against attestor sets whose
// entries can accept the same identity. One signer never counts twice, however many entries accept it.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { before, describe, test } from "node:test";
import type { TrustRoot } from "../../../src/core/trust-root/trust-root-kind.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { ImageVerifier, type VerificationRequest } from "../../../src/verification/image-verifier.ts";
import { evaluateImagePolicies } from "../../../src/core/image-policy/image-policy.ts";
import { verificationKey } from "../../../src/core/verification-results.ts";
import {
  cosignAttestationLayer,
  cosignSignatureLayer,
  inTotoStatement,
  simpleSigningPayload,
  type SignatureLayer,
} from "../../support/signer/cosign-signatures.ts";
import { createMockSigstore, type MockSigstore } from "../../support/signer/mock-sigstore.ts";
import { allowRule, mockTrustRoot, signatureRegistry } from "../../support/verification-fixtures.ts";

const ISSUER = "https://token.actions.githubusercontent.com";
const APP = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
const OPS = "https://github.com/acme/ops/.github/workflows/sign.yml@refs/heads/main";
const NAME = "registry.example.com/acme/app";
const DIGEST = `sha256:${createHash("sha256").update("image").digest("hex")}`;

let sigstore: MockSigstore;
let root: TrustRoot;

before(async () => {
  sigstore = await createMockSigstore({ name: "mock" });
  root = mockTrustRoot(sigstore, "mock");
});

async function imageSignature(subject: string): Promise<SignatureLayer> {
  const cert = await sigstore.issueKeylessCertificate({ subjectAltName: subject, issuer: ISSUER });
  return cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, rekor: sigstore });
}

const SLSA = "https://slsa.dev/provenance/v1";
async function attestation(subject: string): Promise<SignatureLayer> {
  const cert = await sigstore.issueKeylessCertificate({ subjectAltName: subject, issuer: ISSUER });
  const statement = inTotoStatement({ subjectName: NAME, digest: DIGEST, predicateType: SLSA, predicate: { builder: subject } });
  return cosignAttestationLayer({ statement, keyless: cert, rekor: sigstore });
}

/** A registry in memory that holds the image's `.sig` and `.att` manifests (those with layers) and nothing else. */
function registry(signatures: SignatureLayer[], attestations: SignatureLayer[] = []) {
  const manifests = { ...(signatures.length > 0 ? { sig: signatures } : {}), ...(attestations.length > 0 ? { att: attestations } : {}) };
  return signatureRegistry(DIGEST, { anyRepository: manifests }).client;
}

async function verify(signatures: SignatureLayer[], attestors: string) {
  const verifier = new ImageVerifier({ client: registry(signatures) as never, trustRoots: () => new Map([["mock", root]]) });
  const request: VerificationRequest = {
    image: { registry: "registry.example.com", repository: "acme/app", digest: DIGEST } as VerificationRequest["image"],
    policy: "p",
    rule: 0,
    attestors: allowRule(attestors).attestors!,
    lookup: () => [],
  };
  return verifier.verify(request, Date.now() + 30_000);
}

describe("image signatures", () => {
  const TWO_OF_ACME = `[{count: 2, entries: [
        {keyless: {subject: "https://github.com/acme/*", issuer: "${ISSUER}", trustRoot: mock}},
        {keyless: {subject: "https://github.com/acme/app/*", issuer: "${ISSUER}", trustRoot: mock}}]}]`;

  test("one signer that both entries accept does not meet count 2", async () => {
    const result = await verify([await imageSignature(APP)], TWO_OF_ACME);
    assert.equal(result.status, "denied");
    assert.match(result.status === "denied" ? result.reason : "", /one signer counts for one entry only, and these entries have 1 distinct signer/);
  });

  test("two signers meet it, even when the signature found first is the only one the second entry accepts", async () => {
    const result = await verify([await imageSignature(APP), await imageSignature(OPS)], TWO_OF_ACME);
    assert.equal(result.status, "verified", result.status === "verified" ? "" : result.reason);
    assert.deepEqual(result.status === "verified" ? result.evidence.map((e) => [e.entry, e.signer]) : [], [
      ["attestors[0].entries[0]", `subject ${OPS} issuer ${ISSUER}`],
      ["attestors[0].entries[1]", `subject ${APP} issuer ${ISSUER}`],
    ]);
  });

  test("two signatures by the same identity are one signer", async () => {
    const result = await verify([await imageSignature(APP), await imageSignature(APP)], TWO_OF_ACME);
    assert.equal(result.status, "denied");
  });
});

describe("attestations", () => {
  const POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: p}
spec:
  rules:
    - action: allow
      images: ["*"]
      attestations:
        - predicateType: ${SLSA}
          attestors:
            - count: 2
              entries:
                - {keyless: {subject: "https://github.com/acme/*", issuer: "${ISSUER}", trustRoot: mock}}
                - {keyless: {subject: "https://github.com/acme/app/*", issuer: "${ISSUER}", trustRoot: mock}}
          conditions: [{all: [{key: "{{ builder }}", operator: NotEquals, value: "https://github.com/acme/evil"}]}]
`;
  const policies = parsePolicyText(POLICY, "p.yaml").policies.ImagePolicy;
  const check = policies[0]!.rules[0]!.attestations![0]!;

  async function admit(attestations: SignatureLayer[]) {
    const verifier = new ImageVerifier({ client: registry([], attestations) as never, trustRoots: () => new Map([["mock", root]]) });
    const result = await verifier.verify(
      {
        image: { registry: "registry.example.com", repository: "acme/app", digest: DIGEST } as VerificationRequest["image"],
        policy: "p",
        rule: 0,
        attestors: [],
        attestations: [{ index: 0, predicateType: SLSA, attestors: check.attestors }],
        lookup: () => [],
      },
      Date.now() + 30_000,
    );
    assert.equal(result.status, "verified", result.status === "verified" ? "" : result.reason);
    const image = `${NAME}@${DIGEST}`;
    return evaluateImagePolicies(
      policies,
      { namespace: "shop", annotations: {}, images: [{ image }] },
      { verifications: new Map([[verificationKey("p", 0, image), { ...result, digest: DIGEST } as never]]), now: Date.parse("2025-06-01T12:00:00Z") },
    );
  }

  test("count 2 is not met by one signer's two statements", async () => {
    const d = await admit([await attestation(APP), await attestation(APP)]);
    assert.equal(d.allowed, false);
    assert.match(d.violations[0]!.message, /one signer counts for one entry only, and these entries have 1 distinct signer$/);
  });

  test("count 2 is met by two signers' statements, each signed by one of them (no statement carries both)", async () => {
    const d = await admit([await attestation(OPS), await attestation(APP)]);
    assert.equal(d.allowed, true, d.auditAnnotations.reason);
  });
});
