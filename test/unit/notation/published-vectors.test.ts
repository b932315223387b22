// The Notary Project's own published test envelopes (test/fixtures/notation-vectors/README.md says where each comes
// from), verified by src/notation/ as a user's `notary` entry would verify them: the trust store is the PEM a policy
// gives (read by the policy compiler's readStoreCertificates), the identities "*" unless the reference test names
// one, and the outcome asserted is the one the reference implementation's own tests expect (notation-go's
// verifier_test.go and timestamp_test.go, the notation CLI's e2e verification_level.go). The envelopes were made by
// notation-go / the notation CLI, not by this project's test signers (test/support/notation/), so these tests prove
// the reader and the verifier against the reference implementation's bytes.
import assert from "node:assert/strict";
import { createHash, X509Certificate } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { readStoreCertificates } from "../../../src/core/image-policy/compile-notary.ts";
import { parseTrustedIdentity } from "../../../src/core/image-policy/notary-identities.ts";
import { JWS_ENVELOPE_MEDIA_TYPE } from "../../../src/notation/notation-envelope.ts";
import type { TargetManifest } from "../../../src/notation/notation-payload.ts";
import { verifyNotationSignature, type NotationLevel, type NotationOutcome, type NotationTrust } from "../../../src/notation/notation-verification.ts";

const VECTORS = new URL("../../fixtures/notation-vectors/", import.meta.url);
const bytes = (path: string): Uint8Array => new Uint8Array(readFileSync(new URL(path, VECTORS)));
const text = (path: string): string => readFileSync(new URL(path, VECTORS), "utf8");

const LEVELS = ["strict", "permissive", "audit"] as const satisfies readonly NotationLevel[];

// Verification instants. The reference implementation's certificates are short-lived test certificates, most of them
// expired by now, and every check that judges the chain's validity (the authentic time: a countersignature's time,
// a signing authority's authentic signing time, or else the verification instant) depends on the instant chosen.
//
// MOCK_SIGNED_DAY: notation-go's internal/mock envelopes were signed on 2022-07-29 with a leaf valid for one day and
// a root for one month. verifier_test.go asserts the integrity, authenticity and expiry results of each, which do not
// depend on the time; a full verification also judges the chain at the verification instant (notation-go's
// authenticTimestamp step does the same), so they are verified as notation-go verified them when they were made:
// shortly after signing, within the chain's validity (the ca_* leaves: 22:55:10Z / 23:02:01Z on the 29th, one day).
const MOCK_SIGNED_DAY = new Date("2022-07-30T00:00:00Z");
// AFTER_ALL: a fixed "now" after every vector was made and after the short-lived certificates expired (the testTSA
// leaf on 2024-06-18, expired_e2e on 2023-06-27), within the long-lived ones (e2e.crt to 2122, alpine to 2033, the
// GlobalSign TSA chain to 2034): what `now` is for a cluster today, fixed so that no outcome moves with the clock.
const AFTER_ALL = new Date("2026-01-01T00:00:00Z");

/** A trust store as a policy gives it (PEM), read as the policy compiler reads it (a CA or self-signed; tsa: roots). */
function store(pem: string, purpose: "trust" | "tsa" = "trust"): Uint8Array[] {
  const read = readStoreCertificates(pem, purpose);
  if ("error" in read) throw new Error(read.error);
  return read.der;
}

interface JwsEnvelopeJson {
  payload: string;
  protected: string;
  signature: string;
  header: { x5c: string[]; [name: string]: unknown };
}

function jwsJson(path: string): JwsEnvelopeJson {
  return JSON.parse(text(path)) as JwsEnvelopeJson;
}

/** The root (last certificate) an envelope carries, as the PEM a user copies into the entry's certs. */
function rootPemOf(envelopePath: string): string {
  return new X509Certificate(Buffer.from(jwsJson(envelopePath).header.x5c.at(-1)!, "base64")).toString();
}

function trust(o: Partial<NotationTrust>): NotationTrust {
  return { ca: [], signingAuthority: [], tsa: [], storeName: "the vector's certs", identities: "*", level: "strict", verifyTimestamp: "always", ...o };
}

function accepted(outcome: NotationOutcome, logged?: RegExp): Extract<NotationOutcome, { ok: true }> {
  assert.equal(outcome.ok, true, outcome.ok ? "" : `expected acceptance, got: ${outcome.reason}`);
  const ok = outcome as Extract<NotationOutcome, { ok: true }>;
  if (logged) assert.ok(ok.logged.length === 1 && logged.test(ok.logged[0]!), `logged: ${JSON.stringify(ok.logged)}`);
  else assert.deepEqual(ok.logged, []);
  return ok;
}

function rejected(outcome: NotationOutcome, reason: RegExp): void {
  assert.equal(outcome.ok, false, `expected a rejection matching ${reason}`);
  if (!outcome.ok) assert.match(outcome.reason, reason);
}

// ---------------------------------------------------------------------------------------------------------------
// The notation CLI's e2e OCI layouts, read as a registry client reads them: a blob only when its bytes have the
// digest (and size) its descriptor names.

const LAYOUTS = "notation/test/e2e/testdata/registry/oci_layout/";
const blobPaths = new Map<string, string>();
for (const layout of readdirSync(new URL(LAYOUTS, VECTORS)))
  for (const hex of readdirSync(new URL(`${LAYOUTS}${layout}/blobs/sha256/`, VECTORS)))
    blobPaths.set(`sha256:${hex}`, `${LAYOUTS}${layout}/blobs/sha256/${hex}`);

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

function blob(digest: string, size?: number): Uint8Array {
  const path = blobPaths.get(digest);
  assert.ok(path, `no stored blob ${digest}`);
  const b = bytes(path);
  assert.equal(`sha256:${createHash("sha256").update(b).digest("hex")}`, digest, `${path} is not the blob its name says`);
  if (size !== undefined) assert.equal(b.length, size, `${digest} is not of the size its descriptor says`);
  return b;
}

interface SignatureManifest {
  envelope: Uint8Array;
  mediaType: string;
  /** The manifest the signature is attached to: what the admission server verifies it against. */
  subject: TargetManifest;
  /** notation's io.cncf.notary.x509chain.thumbprint#S256 annotation: the chain's SHA-256 fingerprints. */
  thumbprints?: string[];
}

/** A signature manifest (an OCI image manifest with one layer, or the older OCI artifact manifest with one blob). */
function signatureManifest(digest: string): SignatureManifest {
  const manifest = JSON.parse(new TextDecoder().decode(blob(digest))) as { layers?: Descriptor[]; blobs?: Descriptor[]; subject: Descriptor } & Descriptor;
  const layers = manifest.layers ?? manifest.blobs ?? [];
  assert.equal(layers.length, 1);
  const layer = layers[0]!;
  const { subject } = manifest;
  // The subject's own bytes, where stored, are the manifest the signature names (digest, size and media type).
  if (blobPaths.has(subject.digest)) {
    const served = JSON.parse(new TextDecoder().decode(blob(subject.digest, subject.size))) as { mediaType?: string };
    assert.equal(served.mediaType, subject.mediaType);
  }
  const thumbprints = manifest.annotations?.["io.cncf.notary.x509chain.thumbprint#S256"];
  return {
    envelope: blob(layer.digest, layer.size),
    mediaType: layer.mediaType,
    subject: { digest: subject.digest, mediaType: subject.mediaType, size: subject.size },
    ...(thumbprints ? { thumbprints: JSON.parse(thumbprints) as string[] } : {}),
  };
}

// ---------------------------------------------------------------------------------------------------------------

describe("the published vectors are intact", () => {
  test("every JWS fixture is flattened JWS JSON whose certificates parse", () => {
    const envelopes = [
      "notation-go/internal/testdata/jws_signature.sig",
      ...["ca_valid", "ca_invalid", "ca_expired", "ca_plugin", "sa_valid", "sa_invalid", "sa_expired"].map(
        (n) => `notation-go/internal/mock/testdata/${n}_sig_env.json`,
      ),
      ...["jwsWithTimestamp", "jwsExpiredWithTimestamp", "withoutTimestamp", "timestampBeforeNotBefore"].map(
        (n) => `notation-go/verifier/testdata/timestamp/sigEnv/${n}.sig`,
      ),
    ];
    for (const path of envelopes) {
      const jws = jwsJson(path);
      for (const member of ["payload", "protected", "signature"] as const) assert.equal(typeof jws[member], "string", `${path}: ${member}`);
      assert.ok(jws.header.x5c.length > 0, path);
      for (const c of jws.header.x5c) new X509Certificate(Buffer.from(c, "base64"));
    }
  });

  test("every certificate fixture parses, and the e2e certificates are the ones notation's manifests name", () => {
    const e2e = new X509Certificate(text("notation/test/e2e/testdata/config/localkeys/e2e.crt"));
    const expiredE2e = new X509Certificate(text("notation/test/e2e/testdata/config/localkeys/expired_e2e.crt"));
    new X509Certificate(text("notation/test/e2e/testdata/config/localkeys/new_e2e.crt"));
    new X509Certificate(text("notation-go/verifier/testdata/truststore/x509/ca/valid-trust-store/TestTimestampNotYetValid.crt"));
    const fingerprint = (c: X509Certificate) => createHash("sha256").update(c.raw).digest("hex");
    assert.deepEqual(signatureManifest("sha256:90ceaff260d657d797c408ac73564a9c7bb9d86055877c2a811f0e63b8c6524f").thumbprints, [fingerprint(e2e)]);
    assert.deepEqual(signatureManifest("sha256:b06e392c2d88206b492dbaf5381800578611eb24f86587bc7717cd3b736e5da7").thumbprints, [fingerprint(expiredE2e)]);
  });

  test("the TSA root is GlobalSign Root CA - R6, as the vectors' timestamp tokens carry it", () => {
    const root = new X509Certificate(text("tsa/GlobalSign_Root_CA_-_R6.pem"));
    assert.equal(root.fingerprint256, "2C:AB:EA:FE:37:D0:6C:A2:2A:BA:73:91:C0:03:3D:25:98:29:52:C4:53:64:73:49:76:3A:3A:B5:AD:6C:CF:69");
    const token = Buffer.from(
      jwsJson("notation-go/verifier/testdata/timestamp/sigEnv/jwsWithTimestamp.sig").header["io.cncf.notary.timestampSignature"] as string,
      "base64",
    );
    assert.ok(token.includes(Buffer.from(root.raw)), "the token carries the root");
  });
});

describe("notation-go internal/testdata/jws_signature.sig (a notation.Sign output, the signature blob of notation_test.go)", () => {
  test("verifies against the manifest of internal/testdata/oci-layout it names, its self-signed certificate trusted", async () => {
    const manifestBytes = bytes("notation-go/internal/testdata/oci-layout/blobs/sha256/19dbd2e48e921426ee8ace4dc892edfb2ecdc1d1a72d5416c83670c30acecef0");
    const manifest: TargetManifest = {
      digest: `sha256:${createHash("sha256").update(manifestBytes).digest("hex")}`,
      mediaType: (JSON.parse(new TextDecoder().decode(manifestBytes)) as { mediaType: string }).mediaType,
      size: manifestBytes.length,
    };
    assert.equal(manifest.digest, "sha256:19dbd2e48e921426ee8ace4dc892edfb2ecdc1d1a72d5416c83670c30acecef0");
    const path = "notation-go/internal/testdata/jws_signature.sig";
    const ok = accepted(await verifyNotationSignature(bytes(path), JWS_ENVELOPE_MEDIA_TYPE, manifest, trust({ ca: store(rootPemOf(path)) }), AFTER_ALL));
    assert.match(ok.signer, /^x509 C=US, ST=WA, L=Seattle, O=Notary, CN=alpine \(sha256:[0-9a-f]{64}\)$/);
    assert.equal(ok.envelope.signingAgent, "Notation/1.0.0");
  });
});

// notation-go internal/mock/mocks.go: the artifact every mock envelope signs (mock.ImageDescriptor / SampleDigest).
const MOCK_ARTIFACT: TargetManifest = {
  digest: "sha256:60043cf45eaebc4c0867fea485a039b598f52fd09fd5b07b0b2d2f88fad9d74e",
  mediaType: "application/vnd.docker.distribution.manifest.v2+json",
  size: 528,
};
const MOCK = "notation-go/internal/mock/testdata/";

describe("notation-go internal/mock envelopes, with verifier_test.go's expectations at every level", () => {
  const verifyMock = (name: string, t: Partial<NotationTrust>, at = MOCK_SIGNED_DAY) =>
    verifyNotationSignature(bytes(`${MOCK}${name}_sig_env.json`), JWS_ENVELOPE_MEDIA_TYPE, MOCK_ARTIFACT, trust(t), at);
  const caRoot = () => store(rootPemOf(`${MOCK}ca_valid_sig_env.json`));
  const saRoot = () => store(rootPemOf(`${MOCK}sa_valid_sig_env.json`));

  test("ca_valid (notary.x509, PS384, a leaf under a root): integrity, authenticity and expiry pass at every level", async () => {
    for (const level of LEVELS) {
      const ok = accepted(await verifyMock("ca_valid", { ca: caRoot(), level }));
      assert.equal(ok.envelope.signingScheme, "notary.x509");
      assert.equal(ok.envelope.algorithm, "PS384");
      assert.equal(ok.envelope.expiry?.toISOString(), "2122-01-01T12:00:00.000Z");
    }
  });

  test("sa_valid (notary.x509.signingAuthority): passes at every level, judged at its authentic signing time", async () => {
    // Its leaf's notBefore is its authentic signing time to the second (22:56:51Z): valid then, so valid today too,
    // the signing authority's time standing for the signature's (no verification instant is involved).
    for (const at of [MOCK_SIGNED_DAY, AFTER_ALL])
      for (const level of LEVELS) {
        const ok = accepted(await verifyMock("sa_valid", { signingAuthority: saRoot(), level }, at));
        assert.equal(ok.envelope.signingScheme, "notary.x509.signingAuthority");
        assert.equal(ok.signedAt?.toISOString(), "2022-07-29T22:56:51.000Z");
      }
  });

  test("ca_invalid and sa_invalid (a padded payload, a garbled signature): integrity fails at every level", async () => {
    // notation-go: "signature is invalid. Error: illegal base64 data at input byte 242" (the payload's '=' padding).
    for (const level of LEVELS) {
      rejected(await verifyMock("ca_invalid", { ca: caRoot(), level }), /^payload must be a base64url string$/);
      rejected(await verifyMock("sa_invalid", { signingAuthority: saRoot(), level }), /^payload must be a base64url string$/);
    }
  });

  test("ca_valid against a trust store without its root: authenticity enforced (strict, permissive), logged (audit)", async () => {
    // notation-go: "signature is not produced by a trusted signer". The store used here holds sa_valid's root, a
    // certificate with the very subject of ca_valid's root (CN=Notation Test Root) but another key.
    const other = saRoot();
    for (const level of ["strict", "permissive"] as const)
      rejected(await verifyMock("ca_valid", { ca: other, level }), /no certificate of the chain is in the vector's certs \(ca\)/);
    accepted(await verifyMock("ca_valid", { ca: other, level: "audit" }), /^authenticity: no certificate of the chain is in/);
  });

  test("ca_valid against another trusted identity: enforced (strict, permissive), logged (audit)", async () => {
    // verifier_test.go's identity: x509.subject:CN=LOL,O=DummyOrg,L=Hyderabad,ST=TG,C=IN. notation-go: "signing
    // certificate from the digital signature does not match the X.509 trusted identities […]".
    const parsed = parseTrustedIdentity("x509.subject:CN=LOL,O=DummyOrg,L=Hyderabad,ST=TG,C=IN");
    assert.ok("identity" in parsed);
    const identities = [parsed.identity];
    for (const level of ["strict", "permissive"] as const)
      rejected(await verifyMock("ca_valid", { ca: caRoot(), identities, level }), /CN=Notation Test Root is none of the trusted identities/);
    accepted(await verifyMock("ca_valid", { ca: caRoot(), identities, level: "audit" }), /^authenticity: .*none of the trusted identities/);
  });

  test("ca_expired and sa_expired (expiry 2022-07-29T23:59:00Z): enforced (strict), logged (permissive, audit)", async () => {
    // notation-go: `digital signature has expired on "Fri, 29 Jul 2022 23:59:00 +0000"`.
    const cases = [
      ["ca_expired", { ca: store(rootPemOf(`${MOCK}ca_expired_sig_env.json`)) }],
      ["sa_expired", { signingAuthority: store(rootPemOf(`${MOCK}sa_expired_sig_env.json`)) }],
    ] as const;
    for (const [name, stores] of cases) {
      rejected(await verifyMock(name, { ...stores, level: "strict" }), /^the signature expired at 2022-07-29T23:59:00\.000Z$/);
      for (const level of ["permissive", "audit"] as const)
        accepted(await verifyMock(name, { ...stores, level }), /^expiry: the signature expired at 2022-07-29T23:59:00\.000Z$/);
    }
  });

  test("ca_plugin (io.cncf.notary.verificationPlugin, marked critical): refused at every level", async () => {
    // notation-go fails it when the plugin is not installed ("error while locating the verification plugin
    // \"plugin-name\" […]"); an admission server runs no plugins, so it is never installed here.
    const ca = store(rootPemOf(`${MOCK}ca_plugin_sig_env.json`));
    for (const level of LEVELS) rejected(await verifyMock("ca_plugin", { ca, level }, AFTER_ALL), /requires a verification plugin/);
  });
});

// The artifact the timestamp envelopes sign (their payload's descriptor). timestamp_test.go calls notation-go's
// verifyAuthenticTimestamp alone, which does not look at the payload; the full verification here needs a manifest,
// and the one the envelopes name is the one they are verified against.
const TIMESTAMP_ARTIFACT: TargetManifest = {
  digest: "sha256:c0669ef34cdc14332c0f1ab0c2c01acb91d96014b172f1a76f3a39e63d1f0bda",
  mediaType: "application/vnd.docker.distribution.manifest.v2+json",
  size: 528,
};
const SIG_ENV = "notation-go/verifier/testdata/timestamp/sigEnv/";

describe("notation-go verifier/testdata/timestamp envelopes, with timestamp_test.go's expectations", () => {
  // The reference policy: strict, verifyTimestamp "always", ca:valid-trust-store (which holds each envelope's
  // self-signed certificate), tsa:test-timestamp (GlobalSign's root of the TSA that stamped them), identities "*".
  const gsRoot = () => store(text("tsa/GlobalSign_Root_CA_-_R6.pem"), "tsa");
  const verifyStamped = (name: string, t: Partial<NotationTrust>) =>
    verifyNotationSignature(bytes(`${SIG_ENV}${name}.sig`), JWS_ENVELOPE_MEDIA_TYPE, TIMESTAMP_ARTIFACT, trust(t), AFTER_ALL);

  test("jwsWithTimestamp: the GlobalSign countersignature verifies, and the chain was valid at its time", async () => {
    const ok = accepted(await verifyStamped("jwsWithTimestamp", { ca: store(rootPemOf(`${SIG_ENV}jwsWithTimestamp.sig`)), tsa: gsRoot() }));
    assert.equal(ok.signedAt?.toISOString(), "2024-06-18T06:29:37.000Z");
  });

  test("jwsExpiredWithTimestamp: a leaf that expired (2024-06-18T07:30:31Z) is accepted, stamped within its validity", async () => {
    const ok = accepted(await verifyStamped("jwsExpiredWithTimestamp", { ca: store(rootPemOf(`${SIG_ENV}jwsExpiredWithTimestamp.sig`)), tsa: gsRoot() }));
    assert.equal(ok.signedAt?.toISOString(), "2024-06-18T07:21:42.000Z");
  });

  test("withoutTimestamp: refused, the policy verifies timestamps and the envelope carries none", async () => {
    // notation-go: "no timestamp countersignature was found in the signature envelope".
    rejected(
      await verifyStamped("withoutTimestamp", { ca: store(rootPemOf(`${SIG_ENV}withoutTimestamp.sig`)), tsa: gsRoot() }),
      /^the signature has no RFC 3161 timestamp, and the entry verifies timestamps/,
    );
  });

  test("timestampBeforeNotBefore: refused, the leaf (valid from 2099) was not valid at the timestamp's lower limit", async () => {
    // notation-go: `timestamp lower limit "Wed, 19 Jun 2024 09:30:13 +0000" is before certificate
    // "CN=testTSA,O=Notary,L=Seattle,ST=WA,C=US" validity period, it will be valid from "Fri, 18 Sep 2099 11:54:34 +0000"`.
    // The trust store is the reference's own file for it (valid-trust-store/TestTimestampNotYetValid.crt).
    const ca = store(text("notation-go/verifier/testdata/truststore/x509/ca/valid-trust-store/TestTimestampNotYetValid.crt"));
    assert.deepEqual(ca, store(rootPemOf(`${SIG_ENV}timestampBeforeNotBefore.sig`)));
    rejected(
      await verifyStamped("timestampBeforeNotBefore", { ca, tsa: gsRoot() }),
      /^certificate 0 \(C=US, ST=WA, L=Seattle, O=Notary, CN=testTSA\) is valid from 2099-09-18T11:54:34\.000Z .* not at the timestamp's 2024-06-19T09:30:14\.000Z$/,
    );
  });

  test("jwsExpiredWithTimestamp without a tsa store: refused, its leaf expired (the JWS twin of a COSE case)", async () => {
    // timestamp_test.go asserts this for coseExpiredWithTimestamp.sig, signed by the same testTSA leaf (COSE: not
    // fetched, see the README): `verification time is after certificate "CN=testTSA,O=Notary,L=Seattle,ST=WA,C=US"
    // validity period, it was expired at "Tue, 18 Jun 2024 07:30:31 +0000"`.
    rejected(
      await verifyStamped("jwsExpiredWithTimestamp", { ca: store(rootPemOf(`${SIG_ENV}jwsExpiredWithTimestamp.sig`)) }),
      /^certificate 0 \(C=US, ST=WA, L=Seattle, O=Notary, CN=testTSA\) is valid from .* to 2024-06-18T07:30:31\.000Z, not at the present/,
    );
  });
});

describe("the notation CLI's e2e OCI layouts, with verification_level.go's expectations at every level", () => {
  // BaseOptions: trust store ca:e2e holding localkeys/e2e.crt, trusted identities "*".
  const e2eCert = () => store(text("notation/test/e2e/testdata/config/localkeys/e2e.crt"));
  const verifySigned = (manifestDigest: string, t: Partial<NotationTrust>) => {
    const signature = signatureManifest(manifestDigest);
    return verifyNotationSignature(signature.envelope, signature.mediaType, signature.subject, trust(t), AFTER_ALL);
  };
  // e2e-valid-signature/index.json names this signature manifest (stored under e2e-valid-multiple-signatures).
  const VALID = "sha256:90ceaff260d657d797c408ac73564a9c7bb9d86055877c2a811f0e63b8c6524f";

  test("e2e-valid-signature: verifies at every level with e2e.crt trusted", async () => {
    for (const level of LEVELS) {
      const ok = accepted(await verifySigned(VALID, { ca: e2eCert(), level }));
      assert.match(ok.signer, /^x509 C=US, ST=WA, L=Seattle, O=Notary, CN=e2e /);
    }
  });

  test("e2e-valid-signature, its 2022 form (an OCI artifact manifest signed): verifies with e2e.crt trusted", async () => {
    accepted(await verifySigned("sha256:273243a7a64e9312761ca0aa8f43b6ba805e677a561558143b6e92981c487339", { ca: e2eCert() }));
  });

  test("e2e-valid-signature with new_e2e.crt trusted (same key, another certificate): enforced (strict, permissive), logged (audit)", async () => {
    // notation: "authenticity validation failed"; under audit "authenticity was set to \"log\"" and success.
    const ca = store(text("notation/test/e2e/testdata/config/localkeys/new_e2e.crt"));
    for (const level of ["strict", "permissive"] as const) rejected(await verifySigned(VALID, { ca, level }), /no certificate of the chain is in/);
    accepted(await verifySigned(VALID, { ca, level: "audit" }), /^authenticity: no certificate of the chain is in/);
  });

  test("e2e-expired-signature: expiry enforced (strict), logged (permissive, audit)", async () => {
    // notation: "expiry validation failed."; "expiry was set to \"log\" and failed with error: digital signature has expired".
    const expired = "sha256:3829708badae8e4b14e1adbc2fac7182bc0c27c5b6f54153e8b68a12eab10a1e";
    rejected(await verifySigned(expired, { ca: e2eCert() }), /^the signature expired at 2023-06-27T05:21:21\.000Z$/);
    for (const level of ["permissive", "audit"] as const) accepted(await verifySigned(expired, { ca: e2eCert(), level }), /^expiry: the signature expired/);
  });

  test("e2e-with-expired-cert (expired_e2e.crt trusted): the authentic time enforced (strict), logged (permissive, audit)", async () => {
    // notation: "authenticTimestamp validation failed"; under permissive and audit `certificate
    // "O=Internet Widgits Pty Ltd,ST=Some-State,C=AU" is not valid anymore, it was expired` logged, and success.
    const withExpiredCert = "sha256:b06e392c2d88206b492dbaf5381800578611eb24f86587bc7717cd3b736e5da7";
    const ca = store(text("notation/test/e2e/testdata/config/localkeys/expired_e2e.crt"));
    rejected(await verifySigned(withExpiredCert, { ca }), /^certificate 0 \(O=Internet Widgits Pty Ltd, ST=Some-State, C=AU\) .* not at the present/);
    for (const level of ["permissive", "audit"] as const)
      accepted(await verifySigned(withExpiredCert, { ca, level }), /^authenticTimestamp: certificate 0 .* not at the present/);
  });

  test("e2e-invalid-signature (a text layer where the envelope should be): integrity fails at every level", async () => {
    // notation: "integrity validation failed" at strict, permissive and audit alike.
    const invalid = "sha256:321fcc674d6771dd0e5bd21e599f2df3a482de99a400fd3a3fe371221b97a9c9";
    for (const level of LEVELS) rejected(await verifySigned(invalid, { ca: e2eCert(), level }), /neither JWS nor COSE/);
  });
});
