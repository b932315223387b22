// Credential hashes (src/core/pull-verification/credential-hash.ts) and pod fingerprints (pod-fingerprint.ts).
import { createHmac } from "node:crypto";
import { it } from "node:test";
import assert from "node:assert/strict";
import { credentialHash, isAnonymous, type RegistryAuth } from "../../../src/core/pull-verification/credential-hash.ts";
import { podFingerprint } from "../../../src/core/pull-verification/pod-fingerprint.ts";

const auth = (a: Partial<RegistryAuth>): RegistryAuth => ({
  username: "",
  password: "",
  auth: "",
  serverAddress: "",
  identityToken: "",
  registryToken: "",
  ...a,
});
const KEY = Buffer.alloc(32, 7);

it("the same credentials hash alike however they are spelled; other credentials or another node key do not", () => {
  const plain = credentialHash(KEY, auth({ username: "puller", password: "s3cret", serverAddress: "127.0.0.1:5000" }));
  const encoded = credentialHash(KEY, auth({ auth: Buffer.from("puller:s3cret").toString("base64"), serverAddress: "https://127.0.0.1:5000" }));
  assert.equal(plain, encoded);
  assert.match(plain, /^hmac-sha256:[0-9a-f]{64}$/);
  assert.notEqual(credentialHash(KEY, auth({ username: "puller", password: "wrong" })), plain);
  assert.notEqual(credentialHash(Buffer.alloc(32, 8), auth({ username: "puller", password: "s3cret" })), plain);
  assert.ok(!plain.includes("s3cret"));
});

it("the hash is HMAC-SHA256 under the node key of the canonical credentials, so records written earlier still match", () => {
  const expected = `hmac-sha256:${createHmac("sha256", KEY)
    .update(JSON.stringify(["puller", "s3cret", "", ""]))
    .digest("hex")}`;
  // Twice: the second call uses the key object made by the first.
  assert.equal(credentialHash(KEY, auth({ username: "puller", password: "s3cret" })), expected);
  assert.equal(credentialHash(KEY, auth({ username: "puller", password: "s3cret" })), expected);
});

it("no credential at all is anonymous; a token alone is a credential", () => {
  assert.equal(isAnonymous(undefined), true);
  assert.equal(isAnonymous(auth({ serverAddress: "r.example" })), true);
  assert.equal(isAnonymous(auth({ registryToken: "t" })), false);
});

it("a pod fingerprint needs the kubelet's annotations and tells pods apart by all of them", () => {
  const a = { "kubernetes.io/config.source": "api", "kubernetes.io/config.seen": "2026-11-24T12:00:00.000000001Z", team: "x" };
  assert.equal(podFingerprint({ team: "x" }), undefined);
  assert.equal(podFingerprint(undefined), undefined);
  assert.equal(
    podFingerprint(a),
    podFingerprint({ team: "x", "kubernetes.io/config.seen": a["kubernetes.io/config.seen"], "kubernetes.io/config.source": "api" }),
  );
  assert.notEqual(podFingerprint(a), podFingerprint({ ...a, "kubernetes.io/config.seen": "2026-11-24T12:00:00.000000002Z" }));
});
