// Property-based tests of what turns registry bytes into signatures and judges them: signed-item.ts (cosign
// `.sig` and `.att` layers, Sigstore bundles: a SignedItem or a SignatureFormatError, nothing else),
// verify-entry.ts (verifyItem always answers {ok:true} or {ok:false, reason}; a changed signed byte never
// verifies) and the trusted_root.json parser of core/trust-root (an error in words, never a throw). The inputs are
// real signatures from the offline test signer, mutated: fields deleted, replaced by any JSON, truncated, base64
// corrupted, huge, deeply nested, of the wrong type; and arbitrary bytes.
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import fc from "fast-check";
import type { LeafAttestor } from "../../src/core/image-policy/attestors.ts";
import { parseTrustedRoot, trustRootKind, type SigstoreTrust } from "../../src/core/trust-root/trust-root-kind.ts";
import { ImprimaturError } from "../../src/errors/imprimatur-error.ts";
import { bundleToItem, cosignAttestationToItem, cosignLayerToItem, SignatureFormatError, type SignedItem } from "../../src/verification/signed-item.ts";
import { attestationBinding, imageBinding, publicKeyFromPem, verifyItem, type EntryContext, type ItemOutcome } from "../../src/verification/verify-entry.ts";
import { checkProperty } from "../support/fuzz.ts";
import { byteMutation, jsonMutation, jsonText, mutateBytes, mutateJson } from "../support/json-mutations.ts";
import {
  cosignAttestationLayer,
  cosignSignatureLayer,
  inTotoStatement,
  signDsseEnvelope,
  simpleSigningPayload,
  type SignatureLayer,
} from "../support/signer/cosign-signatures.ts";
import { generateSigningKey, signBytes, type SigningKey } from "../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../support/signer/mock-sigstore.ts";
import { imageSignatureBundle, messageSignatureBundle } from "../support/signer/sigstore-bundles.ts";
import {
  leafAttestorsWith,
  mockTrustRoot,
  KEYLESS_ISSUER as ISSUER,
  KEYLESS_WORKFLOW as WORKFLOW,
  SIGNED_IMAGE_NAME as NAME,
  SIGNED_MANIFEST as MANIFEST,
  SIGNED_MANIFEST_DIGEST as DIGEST,
  SIGNED_MANIFEST_HEX as HEX,
} from "../support/verification-fixtures.ts";

const FILE = "test/fuzz/signatures.test.ts";
const LOC = "r.example/app:sha256-ab.sig layer 0";
const SLSA = "https://slsa.dev/provenance/v1";
const SIG = "dev.cosignproject.cosign/signature";

/** JSON bytes near `doc`: a JSON mutation, a byte mutation of its text, both, or (rarely) anything at all. */
function nearJson(doc: unknown): fc.Arbitrary<Buffer> {
  const text = Buffer.from(JSON.stringify(doc));
  return fc.oneof(
    { weight: 4, arbitrary: jsonMutation.map((m) => Buffer.from(jsonText(mutateJson(doc, m)))) },
    { weight: 2, arbitrary: byteMutation.map((m) => mutateBytes(text, m)) },
    { weight: 1, arbitrary: fc.tuple(jsonMutation, jsonMutation).map(([a, b]) => Buffer.from(jsonText(mutateJson(mutateJson(doc, a), b)))) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)) },
    { weight: 1, arbitrary: fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? "")) },
  );
}

/**
 * Layer annotations near `annotations`: as a document (a JSON mutation), with the JSON inside one annotation
 * mutated, or with the decoded bytes of a base64 one changed; filtered to string values as the manifest reader does.
 */
function nearAnnotations(annotations: Record<string, string>): fc.Arbitrary<Record<string, string>> {
  const keys = Object.keys(annotations);
  const inner = fc.tuple(fc.nat(), jsonMutation).map(([k, m]) => {
    const key = keys[k % keys.length]!;
    let parsed: unknown;
    try {
      parsed = JSON.parse(annotations[key]!);
    } catch {
      parsed = annotations[key];
    }
    return { ...annotations, [key]: jsonText(mutateJson(parsed, m), 300) };
  });
  const decoded = fc.tuple(fc.nat(), byteMutation).map(([k, m]) => {
    const key = keys[k % keys.length]!;
    return { ...annotations, [key]: mutateBytes(Buffer.from(annotations[key]!, "base64"), m).toString("base64") };
  });
  const whole = jsonMutation.map((m) => mutateJson(annotations, m));
  const any = fc.dictionary(fc.constantFrom(...keys, "other"), fc.string({ unit: "binary", maxLength: 64 }));
  return (keys.length === 0 ? fc.oneof(whole, any) : fc.oneof(whole, inner, decoded, any)).map((a) =>
    typeof a === "object" && a !== null && !Array.isArray(a)
      ? Object.fromEntries(Object.entries(a).filter((e): e is [string, string] => typeof e[1] === "string"))
      : {},
  );
}

// ---------------------------------------------------------------------------------------------
// The checks every answer must pass.

/** An item, or a SignatureFormatError naming the location; anything else fails the property. */
function readOrRefuse(read: () => SignedItem): SignedItem | undefined {
  try {
    const item = read();
    assert.ok(["cosign-signature", "cosign-attestation", "sigstore-bundle"].includes(item.format));
    assert.equal(item.location, LOC);
    return item;
  } catch (e) {
    if (!(e instanceof SignatureFormatError)) throw new Error(`an untyped error escaped: ${String(e)}`, { cause: e });
    assert.ok(e instanceof ImprimaturError);
    assert.equal(e.code, "malformed-signature");
    assert.ok(e.message.startsWith(LOC), e.message);
    return undefined;
  }
}

/** verifyItem's answer is well formed: ok with evidence, or refused with a reason in words. */
function wellFormed(outcome: ItemOutcome): ItemOutcome {
  assert.equal(typeof outcome, "object");
  if (outcome.ok) assert.equal(typeof outcome.evidence.signer, "string");
  else assert.ok(typeof outcome.reason === "string" && outcome.reason.length > 0, JSON.stringify(outcome));
  return outcome;
}

function verify(item: SignedItem, entry: LeafAttestor, cx: EntryContext): ItemOutcome {
  let outcome: ItemOutcome;
  try {
    outcome = verifyItem(item, entry, cx);
  } catch (e) {
    throw new Error(`verifyItem threw: ${String(e)}`, { cause: e });
  }
  return wellFormed(outcome);
}

const refusal = (o: ItemOutcome) => (o.ok ? `accepted (${o.evidence.signer})` : o.reason);

// ---------------------------------------------------------------------------------------------
// The signatures: real ones, keyless (logged, timestamped) and by key, in every format.

interface Fixture {
  name: string;
  kind: "layer" | "attestation" | "bundle";
  /** The layer's blob or the bundle's JSON. */
  blob: Buffer;
  annotations: Record<string, string>;
  manifest?: Buffer;
  entry: () => LeafAttestor;
  context: () => EntryContext;
}

let sigstore: MockSigstore;
let root: SigstoreTrust;
let key: SigningKey;
const fixtures: Fixture[] = [];

const keylessEntry = () => leafAttestorsWith(`{keyless: {subject: "https://github.com/acme/app/*", issuer: "${ISSUER}", trustRoot: mock}}`)[0]!;
const keyEntry = (k: SigningKey) => leafAttestorsWith(`{staticKey: {name: k, key: ${JSON.stringify(k.publicKeyPem)}, ignoreTlog: true}}`)[0]!;
const keyContext = (k: SigningKey, binding = imageBinding(DIGEST)): EntryContext => ({ binding, trustRoot: undefined, key: publicKeyFromPem(k.publicKeyPem) });

function itemOf(f: Fixture, blob = f.blob, annotations = f.annotations): SignedItem {
  if (f.kind === "layer") return cosignLayerToItem(blob, annotations, LOC);
  if (f.kind === "attestation") return cosignAttestationToItem(blob, annotations, LOC);
  return bundleToItem(blob, LOC, f.manifest);
}

/** One of these, shrinking towards the first; shown by name in a counterexample. */
const pick = <T extends { name: string }>(list: T[]): fc.Arbitrary<T> =>
  fc.nat({ max: list.length - 1 }).map(
    (i) => list[i]!,
    (f) => {
      const i = list.indexOf(f as T);
      if (i < 0) throw new Error("not one of these");
      return i;
    },
  );

before(async () => {
  sigstore = await createMockSigstore({ name: "mock" });
  root = mockTrustRoot(sigstore, "mock").sigstore!;
  key = generateSigningKey("ecdsa-p256");
  const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
  const payload = simpleSigningPayload({ dockerReference: NAME, digest: DIGEST });
  const statement = inTotoStatement({ subjectName: NAME, digest: DIGEST, predicateType: SLSA, predicate: { buildType: "x" } });
  const keyless = { entry: keylessEntry, context: (): EntryContext => ({ binding: imageBinding(DIGEST), trustRoot: root }) };
  const keyed = { entry: () => keyEntry(key), context: () => keyContext(key) };
  const layer = (l: SignatureLayer) => ({ blob: l.blob, annotations: l.annotations });
  fixtures.push(
    { name: "keyless .sig", kind: "layer", ...layer(await cosignSignatureLayer({ payload, keyless: cert, rekor: sigstore, timestamp: sigstore })), ...keyless },
    { name: "key .sig", kind: "layer", ...layer(await cosignSignatureLayer({ payload, key })), ...keyed },
    {
      name: "keyless .att",
      kind: "attestation",
      ...layer(await cosignAttestationLayer({ statement, keyless: cert, rekor: sigstore })),
      entry: keylessEntry,
      context: () => ({ binding: attestationBinding(DIGEST, SLSA), trustRoot: root }),
    },
    {
      name: "key .att",
      kind: "attestation",
      ...layer(await cosignAttestationLayer({ statement, key })),
      entry: () => keyEntry(key),
      context: () => keyContext(key, attestationBinding(DIGEST, SLSA)),
    },
    {
      name: "keyless DSSE bundle",
      kind: "bundle",
      blob: (await imageSignatureBundle({ name: NAME, digest: DIGEST, keyless: cert, rekor: sigstore, timestamp: sigstore })).bytes,
      annotations: {},
      ...keyless,
    },
    {
      name: "key message-signature bundle",
      kind: "bundle",
      blob: (await messageSignatureBundle({ artifact: MANIFEST, key, version: "0.3" })).bytes,
      annotations: {},
      manifest: MANIFEST,
      ...keyed,
    },
    {
      name: "keyless v0.1 bundle",
      kind: "bundle",
      blob: (await imageSignatureBundle({ name: NAME, digest: DIGEST, keyless: cert, rekor: sigstore, version: "0.1" })).bytes,
      annotations: {},
      ...keyless,
    },
  );
  // A counterexample names its fixture rather than printing its bytes.
  for (const f of fixtures) Object.defineProperty(f, fc.toStringMethod, { value: () => `<fixture ${JSON.stringify(f.name)}>` });
});

describe("signed items from registry bytes", () => {
  test("every unmutated signature reads and verifies (the properties below cannot pass vacuously)", () => {
    for (const f of fixtures) {
      const item = readOrRefuse(() => itemOf(f));
      assert.ok(item, `${f.name} did not read`);
      const outcome = verify(item, f.entry(), f.context());
      assert.ok(outcome.ok, `${f.name}: ${refusal(outcome)}`);
    }
  });

  test("regression: a Rekor bundle annotation that is JSON null (or any non-object) is malformed, not a TypeError", () => {
    // Found by the .att property: `JSON.parse("null")` then `.Payload` threw an untyped TypeError.
    for (const f of fixtures.filter((x) => x.kind !== "bundle")) {
      for (const raw of ["null", "7", '"text"', "[]", "true"]) {
        const annotations = { ...f.annotations, "dev.sigstore.cosign/bundle": raw };
        assert.throws(
          () => itemOf(f, f.blob, annotations),
          (e: unknown) => e instanceof SignatureFormatError && e.code === "malformed-signature" && e.message.startsWith(`${LOC}: dev.sigstore.cosign/bundle`),
          `${f.name}, ${raw}`,
        );
      }
    }
  });

  test("a .sig layer: any payload bytes and annotations near valid ones give an item or a SignatureFormatError", async () => {
    const counts = { read: 0, refused: 0 };
    const layers = fixtures.filter((f) => f.kind === "layer");
    await checkProperty(
      fc.property(
        pick(layers).chain((f) =>
          fc.tuple(
            fc.constant(f),
            fc.oneof(
              fc.constant(f.blob),
              byteMutation.map((m) => mutateBytes(f.blob, m)),
              fc.uint8Array({ maxLength: 256 }).map((b) => Buffer.from(b)),
            ),
            nearAnnotations(f.annotations),
          ),
        ),
        ([, payload, annotations]) => {
          if (readOrRefuse(() => cosignLayerToItem(payload, annotations, LOC))) counts.read++;
          else counts.refused++;
        },
      ),
      { file: FILE },
    );
    assert.ok(counts.read > 0 && counts.refused > 0, JSON.stringify(counts));
  });

  test("a .att layer: envelopes and annotations near valid ones give an item or a SignatureFormatError", async () => {
    const counts = { read: 0, refused: 0 };
    const atts = fixtures.filter((f) => f.kind === "attestation");
    await checkProperty(
      fc.property(
        pick(atts).chain((f) =>
          fc.tuple(fc.constant(f), nearJson(JSON.parse(f.blob.toString("utf8"))), fc.oneof(fc.constant(f.annotations), nearAnnotations(f.annotations))),
        ),
        ([, envelope, annotations]) => {
          if (readOrRefuse(() => cosignAttestationToItem(envelope, annotations, LOC))) counts.read++;
          else counts.refused++;
        },
      ),
      { file: FILE },
    );
    assert.ok(counts.read > 0 && counts.refused > 0, JSON.stringify(counts));
  });

  test("a bundle: JSON near valid bundles, and anything at all, gives an item or a SignatureFormatError", async () => {
    const counts = { read: 0, refused: 0 };
    const bundles = fixtures.filter((f) => f.kind === "bundle");
    await checkProperty(
      fc.property(
        pick(bundles).chain((f) =>
          fc.tuple(
            fc.constant(f),
            nearJson(JSON.parse(f.blob.toString("utf8"))),
            fc.oneof(
              fc.constant(f.manifest),
              fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
            ),
          ),
        ),
        ([, json, manifest]) => {
          if (readOrRefuse(() => bundleToItem(json, LOC, manifest))) counts.read++;
          else counts.refused++;
        },
      ),
      { file: FILE },
    );
    assert.ok(counts.read > 0 && counts.refused > 0, JSON.stringify(counts));
  });
});

// ---------------------------------------------------------------------------------------------

/** Every Buffer inside an item (signature, payload, certificates, log entry, timestamps), with a way to replace it. */
function buffersOf(value: unknown, out: Array<{ holder: Record<string, unknown>; key: string }> = [], seen = new Set<unknown>()) {
  if (typeof value !== "object" || value === null || seen.has(value)) return out;
  seen.add(value);
  for (const [k, v] of Object.entries(value)) {
    if (Buffer.isBuffer(v)) out.push({ holder: value as Record<string, unknown>, key: k });
    else buffersOf(v, out, seen);
  }
  return out;
}

describe("verifyItem on mutated signatures", () => {
  test("anything that reads from mutated registry bytes gets a well-formed answer, never a throw", async () => {
    const counts = { accepted: 0, refused: 0, unreadable: 0 };
    await checkProperty(
      fc.property(
        pick(fixtures).chain((f) =>
          fc.tuple(
            fc.constant(f),
            fc.oneof(
              { weight: 1, arbitrary: fc.constant({ blob: f.blob, annotations: f.annotations }) },
              {
                weight: 2,
                arbitrary: (f.kind === "layer" ? byteMutation.map((m) => mutateBytes(f.blob, m)) : nearJson(JSON.parse(f.blob.toString("utf8")))).map(
                  (blob) => ({
                    blob,
                    annotations: f.annotations,
                  }),
                ),
              },
              { weight: 2, arbitrary: nearAnnotations(f.annotations).map((annotations) => ({ blob: f.blob, annotations })) },
            ),
          ),
        ),
        ([f, { blob, annotations }]) => {
          const item = readOrRefuse(() => itemOf(f, blob, annotations));
          if (!item) return void counts.unreadable++;
          const outcome = verify(item, f.entry(), f.context());
          if (outcome.ok) counts.accepted++;
          else counts.refused++;
        },
      ),
      { file: FILE },
    );
    assert.ok(counts.accepted > 0 && counts.refused > 0 && counts.unreadable > 0, JSON.stringify(counts));
  });

  test("any byte of any buffer of a read item changed: a well-formed answer, never a throw", async () => {
    const counts = { accepted: 0, refused: 0 };
    await checkProperty(
      fc.property(fc.nat(), fc.nat(), byteMutation, (i, which, change) => {
        const f = fixtures[i % fixtures.length]!;
        const item = itemOf(f);
        const buffers = buffersOf(item);
        const target = buffers[which % buffers.length]!;
        target.holder[target.key] = mutateBytes(target.holder[target.key] as Buffer, change);
        const outcome = verify(item, f.entry(), f.context());
        if (outcome.ok) counts.accepted++;
        else counts.refused++;
      }),
      { file: FILE },
    );
    assert.ok(counts.refused > 0, JSON.stringify(counts));
  });

  test("a changed signed byte never verifies: payload, DSSE payload, signature, message digest, the signed manifest", async () => {
    await checkProperty(
      fc.property(fc.nat(), byteMutation, fc.constantFrom("signed", "signature"), (i, change, target) => {
        const f = fixtures[i % fixtures.length]!;
        const item = itemOf(f);
        const content = item.bundle.content;
        if (target === "signed") {
          if (item.artifact) item.artifact = mutateBytes(item.artifact, change);
          else if (content.$case === "dsseEnvelope") content.dsseEnvelope.payload = mutateBytes(content.dsseEnvelope.payload, change);
          else assert.fail(`${f.name}: nothing signed to change`);
        } else if (content.$case === "dsseEnvelope") {
          const sig = content.dsseEnvelope.signatures[0]!;
          sig.sig = mutateBytes(sig.sig, change);
        } else {
          content.messageSignature.signature = mutateBytes(content.messageSignature.signature, change);
        }
        const outcome = verify(item, f.entry(), f.context());
        assert.equal(outcome.ok, false, `${f.name}, ${target} changed: ${refusal(outcome)}`);
      }),
      { file: FILE },
    );
  });

  test("a changed signed byte in the registry's bytes never verifies (.sig payload, signature annotation, DSSE payload and sig)", async () => {
    const counts = { refused: 0, unreadable: 0 };
    await checkProperty(
      fc.property(fc.nat(), byteMutation, fc.boolean(), (i, change, inSignature) => {
        const f = fixtures[i % fixtures.length]!;
        let blob = f.blob;
        let annotations = f.annotations;
        if (f.kind === "layer") {
          if (inSignature) annotations = { ...annotations, [SIG]: mutateBytes(Buffer.from(annotations[SIG]!, "base64"), change).toString("base64") };
          else blob = mutateBytes(blob, change);
        } else {
          const doc = JSON.parse(blob.toString("utf8")) as { payload?: string; signatures?: Array<{ sig: string }>; dsseEnvelope?: unknown };
          const envelope = (f.kind === "attestation" ? doc : doc.dsseEnvelope) as { payload: string; signatures: Array<{ sig: string }> } | undefined;
          if (envelope) {
            if (inSignature) envelope.signatures[0]!.sig = mutateBytes(Buffer.from(envelope.signatures[0]!.sig, "base64"), change).toString("base64");
            else envelope.payload = mutateBytes(Buffer.from(envelope.payload, "base64"), change).toString("base64");
          } else {
            const message = (doc as { messageSignature: { signature: string; messageDigest: { digest: string } } }).messageSignature;
            if (inSignature) message.signature = mutateBytes(Buffer.from(message.signature, "base64"), change).toString("base64");
            else message.messageDigest.digest = mutateBytes(Buffer.from(message.messageDigest.digest, "base64"), change).toString("base64");
          }
          blob = Buffer.from(JSON.stringify(doc));
        }
        const item = readOrRefuse(() => itemOf(f, blob, annotations));
        if (!item) return void counts.unreadable++;
        const outcome = verify(item, f.entry(), f.context());
        assert.equal(outcome.ok, false, `${f.name}: ${refusal(outcome)}`);
        counts.refused++;
      }),
      { file: FILE },
    );
    assert.ok(counts.refused > 0, JSON.stringify(counts));
  });

  test("validly signed by the key, but for another digest (simple-signing critical.image, statement subject): refused", async () => {
    const hex = fc.stringMatching(/^[0-9a-f]{64}$/).filter((h) => h !== HEX);
    const otherDigest = fc.oneof(
      hex.map((h) => `sha256:${h}`),
      fc.constantFrom(DIGEST.toUpperCase(), `sha512:${HEX}`, `${DIGEST} `, HEX, "", `sha256:${HEX.slice(1)}`),
      fc.string(),
    );
    // A statement's subject list (or whatever stands there) that does not name sha256:HEX.
    const names = (subject: unknown) => Array.isArray(subject) && subject.some((s) => (s as { digest?: { sha256?: unknown } } | null)?.digest?.sha256 === HEX);
    const otherSubject = fc.oneof(
      fc.array(
        fc.record({
          name: fc.constantFrom(NAME, "", "other"),
          digest: fc.oneof(
            otherDigest.map((d) => ({ [d.split(":")[0]!]: d.split(":").slice(1).join(":") })),
            fc.constantFrom({ sha256: HEX.toUpperCase() }, { sha512: HEX }, { SHA256: HEX }, { sha256: `${HEX} ` }, { sha256: [HEX] }, HEX, null),
          ),
        }),
        { maxLength: 3 },
      ),
      fc.constant({ name: NAME, digest: { sha256: HEX } }),
      fc.jsonValue({ maxDepth: 3 }),
    );
    const counts = { signature: 0, attestation: 0 };
    await checkProperty(
      fc.property(otherDigest, otherSubject, fc.boolean(), (digest, subject, asAttestation) => {
        fc.pre(digest !== DIGEST && !names(subject));
        let item: SignedItem;
        let binding;
        if (!asAttestation) {
          const payload = simpleSigningPayload({ dockerReference: NAME, digest });
          item = cosignLayerToItem(payload, { [SIG]: signBytes(key, payload).toString("base64") }, LOC);
          binding = imageBinding(DIGEST);
          counts.signature++;
        } else {
          const statement = { _type: "https://in-toto.io/Statement/v1", subject, predicateType: SLSA, predicate: {} };
          const { envelope } = signDsseEnvelope(key, Buffer.from(JSON.stringify(statement)));
          item = cosignAttestationToItem(Buffer.from(JSON.stringify(envelope)), {}, LOC);
          binding = attestationBinding(DIGEST, SLSA);
          counts.attestation++;
        }
        const outcome = verify(item, keyEntry(key), keyContext(key, binding));
        assert.equal(outcome.ok, false, `signed for ${JSON.stringify(asAttestation ? subject : digest)}: ${refusal(outcome)}`);
      }),
      { file: FILE },
    );
    assert.ok(counts.signature > 0 && counts.attestation > 0, JSON.stringify(counts));
    // The same construction for the admitted digest verifies: the refusals above are the digest's doing.
    const payload = simpleSigningPayload({ dockerReference: NAME, digest: DIGEST });
    const own = cosignLayerToItem(payload, { [SIG]: signBytes(key, payload).toString("base64") }, LOC);
    assert.ok(verify(own, keyEntry(key), keyContext(key)).ok);
    const { envelope } = signDsseEnvelope(key, Buffer.from(JSON.stringify(inTotoStatement({ subjectName: NAME, digest: DIGEST, predicateType: SLSA }))));
    const att = cosignAttestationToItem(Buffer.from(JSON.stringify(envelope)), {}, LOC);
    assert.ok(verify(att, keyEntry(key), keyContext(key, attestationBinding(DIGEST, SLSA))).ok);
  });
});

// ---------------------------------------------------------------------------------------------

describe("trust roots from mutated trusted_root.json", () => {
  test("parseTrustedRoot and the TrustRoot kind answer material or an error in words, never a throw; what parses verifies without throwing", async () => {
    const counts = { parsed: 0, refused: 0, verified: 0 };
    const item = () => itemOf(fixtures[0]!);
    assert.ok(!("error" in parseTrustedRoot(sigstore.trustedRoot)));
    await checkProperty(
      fc.property(
        fc.oneof(
          { weight: 1, arbitrary: fc.constant(undefined) },
          { weight: 6, arbitrary: jsonMutation },
          { weight: 2, arbitrary: fc.tuple(jsonMutation, jsonMutation) },
          { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((value) => ({ value })) },
        ),
        fc.boolean(),
        (change, asText) => {
          let doc: unknown = sigstore.trustedRoot;
          if (Array.isArray(change)) doc = mutateJson(mutateJson(doc, change[0]), change[1]);
          else if (change && "value" in change) doc = change.value;
          else if (change) doc = mutateJson(doc, change);
          const text = jsonText(doc, 2000);
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = text;
          }
          const parsed = parseTrustedRoot(json);
          const compiled = trustRootKind.compile(
            { apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", metadata: { name: "mock" }, spec: { trustedRoot: asText ? text : json } },
            { source: { origin: "fuzz" } },
          );
          if ("error" in parsed) {
            assert.ok(typeof parsed.error === "string" && parsed.error.length > 0);
            assert.equal(compiled.policy, undefined);
            assert.ok(compiled.issues.length > 0);
            counts.refused++;
            return;
          }
          counts.parsed++;
          assert.equal(typeof parsed.hasCtLogs, "boolean");
          if (compiled.policy === undefined) assert.ok(compiled.issues.length > 0);
          verify(item(), keylessEntry(), { binding: imageBinding(DIGEST), trustRoot: parsed });
          counts.verified++;
        },
      ),
      { file: FILE },
    );
    assert.ok(counts.parsed > 0 && counts.refused > 0, JSON.stringify(counts));
  });
});
