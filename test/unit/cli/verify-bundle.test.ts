// `imprimatur verify-bundle` as Sigstore's conformance suite drives it: bundles made by the test signer against
// a mock Sigstore, its trusted_root.json given with --trusted-root, the artifact as a file or a digest.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { imprimatur } from "../../support/cli-process.ts";
import { inTotoStatement } from "../../support/signer/cosign-signatures.ts";
import { generateSigningKey } from "../../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../../support/signer/mock-sigstore.ts";
import { dsseBundle, messageSignatureBundle } from "../../support/signer/sigstore-bundles.ts";

const IDENTITY = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
const ISSUER = "https://token.actions.githubusercontent.com";
const dir = mkdtempSync(join(tmpdir(), "imprimatur-verify-bundle-"));
const file = (name: string, content: string | Buffer) => {
  writeFileSync(join(dir, name), content);
  return join(dir, name);
};
const artifact = Buffer.from("release tarball bytes");
const digest = `sha256:${createHash("sha256").update(artifact).digest("hex")}`;
let sigstore: MockSigstore;
let root: string;
let artifactFile: string;

before(async () => {
  sigstore = await createMockSigstore({ name: "cli" });
  root = file("trusted_root.json", JSON.stringify(sigstore.trustedRoot));
  artifactFile = file("artifact.bin", artifact);
});
after(() => rmSync(dir, { recursive: true, force: true }));

test("a keyless message-signature bundle verifies for its file and identity, and for nothing else", async () => {
  const cert = await sigstore.issueKeylessCertificate({ subjectAltName: IDENTITY, issuer: ISSUER });
  const bundle = file("msg.sigstore.json", (await messageSignatureBundle({ artifact, keyless: cert, rekor: sigstore, version: "0.3" })).bytes);
  const args = ["verify-bundle", "--bundle", bundle, "--certificate-identity", IDENTITY, "--certificate-oidc-issuer", ISSUER, "--trusted-root", root];
  const ok = await imprimatur([...args, artifactFile]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(
    ok.stdout,
    /^verified: subject https:\/\/github\.com\/acme\/app\/.* issuer https:\/\/token\.actions\.githubusercontent\.com \(log index \d+\)\n$/,
  );

  const otherFile = await imprimatur([...args, file("other.bin", "other bytes")]);
  assert.equal(otherFile.code, 1);
  assert.equal(otherFile.stderr, "imprimatur verify-bundle: the bundle's message digest is not the artifact's\n");
  const wrongIdentity = await imprimatur([...args.slice(0, 4), "https://github.com/evil/x", ...args.slice(5), artifactFile]);
  assert.equal(wrongIdentity.code, 1);
  assert.match(wrongIdentity.stderr, /certificate identity ".*acme.*" does not match "https:\/\/github\.com\/evil\/x"/);
  const byDigest = await imprimatur([...args, digest]);
  assert.equal(byDigest.code, 0, byDigest.stderr);
  assert.equal(byDigest.stdout, ok.stdout);
  const otherDigest = await imprimatur([...args, `sha256:${createHash("sha256").update("other bytes").digest("hex")}`]);
  assert.equal(otherDigest.code, 1);
  assert.equal(otherDigest.stderr, "imprimatur verify-bundle: the bundle's message digest is not the artifact's\n");
  const wrongIssuerByDigest = await imprimatur([...args.slice(0, 6), "https://accounts.example.org", ...args.slice(7), digest]);
  assert.equal(wrongIssuerByDigest.code, 1);
  assert.match(wrongIssuerByDigest.stderr, /certificate issuer ".*" does not match "https:\/\/accounts\.example\.org"/);
  const stranger = await createMockSigstore({ name: "stranger" });
  const foreignRoot = await imprimatur([...args.slice(0, -1), file("stranger.json", JSON.stringify(stranger.trustedRoot)), artifactFile]);
  assert.equal(foreignRoot.code, 1);
});

test("a DSSE bundle verifies for the digest its statement names, by file or by digest; a key bundle with --key", async () => {
  const key = generateSigningKey("ecdsa-p256");
  const statement = inTotoStatement({ subjectName: "artifact.bin", digest, predicateType: "https://slsa.dev/provenance/v1", predicate: {} });
  const bundle = file("dsse.sigstore.json", (await dsseBundle({ statement, key, rekor: sigstore, version: "0.3" })).bytes);
  const keyFile = file("key.pub", key.publicKeyPem);
  const args = ["verify-bundle", "--bundle", bundle, "--key", keyFile, "--trusted-root", root];
  assert.equal((await imprimatur([...args, artifactFile])).code, 0);
  assert.equal((await imprimatur([...args, digest])).code, 0);
  const other = await imprimatur([...args, `sha256:${"0".repeat(64)}`]);
  assert.equal(other.code, 1);
  assert.match(other.stderr, /no subject of the in-toto statement has the artifact's digest/);
  const otherKey = await imprimatur([...args.slice(0, 4), file("other.pub", generateSigningKey("ecdsa-p256").publicKeyPem), ...args.slice(5), artifactFile]);
  assert.equal(otherKey.code, 1);
  assert.match(otherKey.stderr, /the signature does not verify with this key/);
});

test("a message-signature bundle verifies by digest with a key: ECDSA and RSA; an Ed25519 one needs the file", async () => {
  for (const algorithm of ["ecdsa-p256", "ecdsa-p384", "rsa-2048"] as const) {
    const key = generateSigningKey(algorithm);
    const bundle = file(
      `msg-${algorithm}.sigstore.json`,
      (await messageSignatureBundle({ artifact, key, rekor: sigstore, version: "0.3", hash: "sha256" })).bytes,
    );
    const args = ["verify-bundle", "--bundle", bundle, "--key", file(`${algorithm}.pub`, key.publicKeyPem), "--trusted-root", root];
    const byDigest = await imprimatur([...args, digest]);
    assert.equal(byDigest.code, 0, `${algorithm}: ${byDigest.stderr}`);
    const tampered = file(
      `tampered-${algorithm}.sigstore.json`,
      (await messageSignatureBundle({ artifact, key, rekor: sigstore, version: "0.3", hash: "sha256", tamper: { signature: true } })).bytes,
    );
    const refused = await imprimatur([...args.slice(0, 2), tampered, ...args.slice(3), digest]);
    assert.equal(refused.code, 1, algorithm);
  }
  const ed = generateSigningKey("ed25519");
  const edBundle = file("msg-ed25519.sigstore.json", (await messageSignatureBundle({ artifact, key: ed, rekor: sigstore, version: "0.3" })).bytes);
  const edArgs = ["verify-bundle", "--bundle", edBundle, "--key", file("ed25519.pub", ed.publicKeyPem), "--trusted-root", root];
  assert.equal((await imprimatur([...edArgs, artifactFile])).code, 0);
  const edByDigest = await imprimatur([...edArgs, digest]);
  assert.equal(edByDigest.code, 1);
  assert.equal(edByDigest.stderr, "imprimatur verify-bundle: a ed25519 signature covers the artifact itself: give the file, not its digest\n");
});

test("input that cannot be read or is not a bundle, key, trusted root or artifact: one line naming the file and why, exit 2", async () => {
  const key = generateSigningKey();
  const keyFile = file("k.pub", key.publicKeyPem);
  const bundle = file("bundle.json", (await messageSignatureBundle({ artifact, key, rekor: sigstore, version: "0.3" })).bytes);
  const missing = join(dir, "missing.json");
  const cases: Array<[string[], string]> = [
    [["--bundle", missing, "--key", keyFile, artifactFile], `cannot read the bundle ${missing}: no such file or folder`],
    [["--bundle", dir, "--key", keyFile, artifactFile], `cannot read the bundle ${dir}: it is a folder, not a file`],
    [["--bundle", file("bad.json", "{"), "--key", keyFile, artifactFile], `${join(dir, "bad.json")} is not a Sigstore bundle: it is not JSON`],
    [
      ["--bundle", file("other.json", '{"kind":"not a bundle"}'), "--key", keyFile, artifactFile],
      `${join(dir, "other.json")} is not a Sigstore bundle: missing or invalid mediaType, content, verificationMaterial`,
    ],
    [["--bundle", bundle, "--key", missing, artifactFile], `cannot read the key ${missing}: no such file or folder`],
    [
      ["--bundle", bundle, "--key", artifactFile, artifactFile],
      `${artifactFile} is not a public key: not a PEM public key (-----BEGIN PUBLIC KEY----- … -----END PUBLIC KEY-----)`,
    ],
    [["--bundle", bundle, "--key", keyFile, join(dir, "no-artifact")], `cannot read the artifact ${join(dir, "no-artifact")}: no such file or folder`],
    [["--bundle", bundle, "--key", keyFile, "--trusted-root", missing, artifactFile], `cannot read the trusted root ${missing}: no such file or folder`],
    [
      ["--bundle", bundle, "--key", keyFile, "--trusted-root", artifactFile, artifactFile],
      `${artifactFile} is not a trusted root (trusted_root.json): it is not JSON`,
    ],
  ];
  for (const [args, message] of cases) {
    const r = await imprimatur(["verify-bundle", ...args]);
    assert.equal(r.code, 2, message);
    assert.equal(r.stderr, `imprimatur verify-bundle: ${message}\n`);
  }
  const badRoot = await imprimatur(["verify-bundle", "--bundle", bundle, "--key", keyFile, "--trusted-root", file("root.json", "{}"), artifactFile]);
  assert.equal(badRoot.code, 2);
  assert.match(badRoot.stderr, /^imprimatur verify-bundle: .*root\.json is not a usable trusted root: mediaType must be one of [^\n]*\n$/);
  const usage = await imprimatur(["verify-bundle", "--bundle", "x.json", artifactFile]);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /give either --certificate-identity with --certificate-oidc-issuer, or --key/);
});
