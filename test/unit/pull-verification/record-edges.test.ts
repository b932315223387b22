// The node proxy's pure decisions at their edges: every way a record file can differ from what the proxy writes
// (each refused with its own reason), which credentials count as none, how a credential is identified, which
// calls a pod fingerprint tells apart, and which allowlist entries name a registry rather than a repository.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { credentialHash, isAnonymous, type RegistryAuth } from "../../../src/core/pull-verification/credential-hash.ts";
import { podFingerprint } from "../../../src/core/pull-verification/pod-fingerprint.ts";
import {
  credentialLessRecord,
  credentialRecorded,
  decodePreloadedImages,
  decodePulledRecord,
  decodePullIntent,
  preloadedImages,
  preloadedUnder,
  recordPull,
  RecordFormatError,
  type ImagePulledRecord,
} from "../../../src/core/pull-verification/pull-records.ts";
import { DEFAULT_VERIFICATION_POLICY, parseAllowlistPattern } from "../../../src/core/pull-verification/verification-policy.ts";

const NOW = new Date("2026-11-24T12:00:00Z");
const HASH = `hmac-sha256:${"a".repeat(64)}`;
const ALPINE = "docker.io/library/alpine";
const BUSYBOX = "docker.io/library/busybox";

// Written out rather than built with the code under test: this is the file format.
const pulledRecord = () => ({
  apiVersion: "imprimatur.dev/v1alpha1",
  kind: "ImagePulledRecord",
  lastUpdatedTime: "2026-11-24T12:00:00.000Z",
  imageRef: "sha256:1111",
  credentialMapping: {
    [ALPINE]: { credentials: [{ credentialHash: HASH, presentedBy: [{ namespace: "team", name: "web", uid: "uid-web" }] }] } as Record<string, unknown>,
    [BUSYBOX]: { nodePodsAccessible: true } as Record<string, unknown>,
  },
});
type Raw = ReturnType<typeof pulledRecord>;
const alpine = (r: Raw) => r.credentialMapping[ALPINE]!;
const credential = (r: Raw) => (alpine(r).credentials as Array<Record<string, unknown>>)[0]!;
const presenter = (r: Raw) => (credential(r).presentedBy as Array<Record<string, unknown>>)[0]!;

function refusal(decode: (text: string) => unknown, text: string): string {
  try {
    decode(text);
  } catch (e) {
    assert.ok(e instanceof RecordFormatError, String(e));
    assert.equal(e.code, "corrupt-record");
    return e.message;
  }
  assert.fail(`accepted: ${text}`);
}

describe("an ImagePulledRecord that is not exactly what the proxy writes is refused, saying where", () => {
  const at = `credentialMapping[${JSON.stringify(ALPINE)}]`;
  const cases: Array<[string, (r: Raw) => unknown]> = [
    ['record: unknown field "extra"', (r) => Object.assign(r, { extra: 1 })],
    ['record: missing field "imageRef"', (r) => ({ ...r, imageRef: undefined })],
    ['apiVersion must be imprimatur.dev/v1alpha1, got "v1"', (r) => ({ ...r, apiVersion: "v1" })],
    ['kind must be ImagePulledRecord, got "ImagePullIntent"', (r) => ({ ...r, kind: "ImagePullIntent" })],
    ["lastUpdatedTime must be a string", (r) => ({ ...r, lastUpdatedTime: 5 })],
    ["lastUpdatedTime must not be empty", (r) => ({ ...r, lastUpdatedTime: "" })],
    ["lastUpdatedTime is not an RFC 3339 time", (r) => ({ ...r, lastUpdatedTime: "yesterday" })],
    ["imageRef must not be empty", (r) => ({ ...r, imageRef: "" })],
    ["credentialMapping must be an object", (r) => ({ ...r, credentialMapping: [] })],
    [`${at} must be an object`, (r) => ((r.credentialMapping[ALPINE] = "x" as never), r)],
    [`${at}: unknown field "extra"`, (r) => ((alpine(r).extra = 1), r)],
    [`${at}.nodePodsAccessible must be true when present`, (r) => ((r.credentialMapping[ALPINE] = { nodePodsAccessible: false }), r)],
    [`${at} needs exactly one of nodePodsAccessible and credentials`, (r) => ((r.credentialMapping[ALPINE] = {}), r)],
    [`${at} needs exactly one of nodePodsAccessible and credentials`, (r) => ((alpine(r).nodePodsAccessible = true), r)],
    [`${at}.credentials must be a list`, (r) => ((alpine(r).credentials = {}), r)],
    [`${at}.credentials[0] must be an object`, (r) => ((alpine(r).credentials = [5]), r)],
    [`${at}.credentials[0]: missing field "presentedBy"`, (r) => (delete credential(r).presentedBy, r)],
    [`${at}.credentials[0].credentialHash must not be empty`, (r) => ((credential(r).credentialHash = ""), r)],
    [`${at}.credentials[0].credentialHash is not hmac-sha256:<64 hex>`, (r) => ((credential(r).credentialHash = `${HASH}0`), r)],
    [`${at}.credentials[0].credentialHash is not hmac-sha256:<64 hex>`, (r) => ((credential(r).credentialHash = `x${HASH}`), r)],
    [`${at}.credentials[0].presentedBy must be a list`, (r) => ((credential(r).presentedBy = {}), r)],
    [`${at}.credentials[0].presentedBy[0] must be an object`, (r) => ((credential(r).presentedBy = [[]]), r)],
    [`${at}.credentials[0].presentedBy[0]: missing field "uid"`, (r) => (delete presenter(r).uid, r)],
    ["namespace must be a string", (r) => ((presenter(r).namespace = null), r)],
    ["name must be a string", (r) => ((presenter(r).name = 5), r)],
    ["uid must be a string", (r) => ((presenter(r).uid = {}), r)],
  ];
  for (const [message, change] of cases) {
    test(message, () => assert.equal(refusal(decodePulledRecord, JSON.stringify(change(pulledRecord()))), message));
  }
  test("not JSON, or JSON that is not an object", () => {
    assert.match(refusal(decodePulledRecord, "{"), /^not JSON: /);
    for (const text of ["[]", "null", '"x"', "5"]) assert.equal(refusal(decodePulledRecord, text), "record must be an object", text);
  });
  test("what the proxy writes is read back as it was", () => {
    assert.deepEqual(decodePulledRecord(JSON.stringify(pulledRecord())), pulledRecord());
    const written = recordPull(undefined, "sha256:2222", ALPINE, { hash: HASH, pod: { namespace: "team", name: "web", uid: "uid-web" } }, NOW);
    assert.deepEqual(decodePulledRecord(JSON.stringify(written)), written);
    const unknown = credentialLessRecord("sha256:3333", NOW);
    assert.deepEqual(decodePulledRecord(JSON.stringify(unknown)), unknown);
    assert.deepEqual(unknown.credentialMapping, {});
  });
});

test("a pull intent and the preloaded images are decoded as strictly, saying where", () => {
  const intent = { apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePullIntent", image: "alpine:3" };
  assert.deepEqual(decodePullIntent(JSON.stringify(intent)), intent);
  assert.equal(refusal(decodePullIntent, JSON.stringify({ ...intent, extra: 1 })), 'intent: unknown field "extra"');
  assert.equal(refusal(decodePullIntent, JSON.stringify({ ...intent, image: undefined })), 'intent: missing field "image"');
  assert.equal(refusal(decodePullIntent, JSON.stringify({ ...intent, image: "" })), "image must not be empty");
  assert.equal(refusal(decodePullIntent, "[]"), "intent must be an object");

  const preloaded = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "PreloadedImages",
    recordedTime: "2026-11-24T12:00:00.000Z",
    images: [{ imageRef: "sha256:1111", repositories: [ALPINE] }],
  };
  const image = (change: Record<string, unknown>) => JSON.stringify({ ...preloaded, images: [{ ...preloaded.images[0], ...change }] });
  assert.deepEqual(decodePreloadedImages(JSON.stringify(preloaded)), preloaded);
  assert.equal(refusal(decodePreloadedImages, "5"), "preloaded images must be an object");
  assert.equal(refusal(decodePreloadedImages, JSON.stringify({ ...preloaded, images: undefined })), 'preloaded images: missing field "images"');
  assert.equal(refusal(decodePreloadedImages, JSON.stringify({ ...preloaded, extra: 1 })), 'preloaded images: unknown field "extra"');
  assert.equal(
    refusal(decodePreloadedImages, JSON.stringify({ ...preloaded, kind: "ImagePulledRecord" })),
    'kind must be PreloadedImages, got "ImagePulledRecord"',
  );
  assert.equal(refusal(decodePreloadedImages, JSON.stringify({ ...preloaded, images: {} })), "images must be a list");
  assert.equal(refusal(decodePreloadedImages, JSON.stringify({ ...preloaded, recordedTime: "soon" })), "recordedTime is not an RFC 3339 time");
  assert.equal(refusal(decodePreloadedImages, JSON.stringify({ ...preloaded, images: ["x"] })), "images[0] must be an object");
  assert.equal(refusal(decodePreloadedImages, image({ extra: 1 })), 'images[0]: unknown field "extra"');
  assert.equal(refusal(decodePreloadedImages, image({ repositories: ALPINE })), "images[0].repositories must be a list");
  assert.equal(refusal(decodePreloadedImages, image({ imageRef: "" })), "images[0].imageRef must not be empty");
  assert.equal(refusal(decodePreloadedImages, image({ repositories: [ALPINE, ""] })), "images[0].repositories[1] must not be empty");
});

test("preloaded images are kept sorted by image, whatever order they were found in", () => {
  const found = [
    { imageRef: "sha256:3333", repositories: [BUSYBOX] },
    { imageRef: "sha256:1111", repositories: [ALPINE] },
    { imageRef: "sha256:2222", repositories: [ALPINE] },
  ];
  assert.deepEqual(
    preloadedImages(found, NOW).images.map((i) => i.imageRef),
    ["sha256:1111", "sha256:2222", "sha256:3333"],
  );
});

test("an image is preloaded under the names it had, until it is pulled under that name through the proxy", () => {
  const preloaded = new Map([["sha256:1111", new Set([ALPINE])]]);
  assert.equal(preloadedUnder(preloaded, undefined, "sha256:1111", ALPINE), true);
  assert.equal(preloadedUnder(preloaded, undefined, "sha256:1111", BUSYBOX), false, "another name");
  assert.equal(preloadedUnder(preloaded, undefined, "sha256:9999", ALPINE), false, "another image");
  const pulledElsewhere = recordPull(undefined, "sha256:1111", BUSYBOX, undefined, NOW);
  assert.equal(preloadedUnder(preloaded, pulledElsewhere, "sha256:1111", ALPINE), true, "a pull under another name changes nothing");
  const pulledSo = recordPull(undefined, "sha256:1111", ALPINE, { hash: HASH, pod: { namespace: "team", name: "web", uid: "u" } }, NOW);
  assert.equal(preloadedUnder(preloaded, pulledSo, "sha256:1111", ALPINE), false);
});

test("a repository open to every pod records no credential", () => {
  const open: ImagePulledRecord = recordPull(undefined, "sha256:1111", ALPINE, undefined, NOW);
  assert.equal(credentialRecorded(open, ALPINE, HASH), false);
});

describe("credentials", () => {
  const none: RegistryAuth = { username: "", password: "", auth: "", serverAddress: "", identityToken: "", registryToken: "" };
  const KEY = Buffer.alloc(32, 7);
  const b64 = (s: string) => Buffer.from(s).toString("base64");

  test("any one secret part makes a pull authenticated; a server address alone does not", () => {
    assert.equal(isAnonymous(undefined), true);
    assert.equal(isAnonymous(none), true);
    assert.equal(isAnonymous({ ...none, serverAddress: "registry.example.com" }), true);
    for (const part of ["username", "password", "auth", "identityToken", "registryToken"] as const) {
      assert.equal(isAnonymous({ ...none, [part]: "x" }), false, part);
    }
  });

  test("auth is read only when neither username nor password is given, and split at its first colon", () => {
    const hash = (a: Partial<RegistryAuth>) => credentialHash(KEY, { ...none, ...a });
    assert.equal(hash({ auth: b64("user:pa:ss") }), hash({ username: "user", password: "pa:ss" }));
    assert.equal(hash({ auth: b64("token") }), hash({ username: "token" }), "no colon: all of it is the user name");
    assert.equal(hash({ auth: b64(":secret") }), hash({ password: "secret" }), "an empty user name");
    assert.equal(hash({ username: "user", password: "pw", auth: b64("other:creds") }), hash({ username: "user", password: "pw" }));
    assert.equal(hash({ username: "user", auth: b64("other:creds") }), hash({ username: "user" }));
    assert.equal(hash({ password: "pw", auth: b64("other:creds") }), hash({ password: "pw" }));
    assert.equal(hash({ username: "user", password: "pw", auth: "" }), hash({ auth: b64("user:pw") }));
    assert.notEqual(hash({ identityToken: "t" }), hash({ registryToken: "t" }));
  });
});

test("a pod's fingerprint does not depend on the order its annotations arrive in", () => {
  const entries: Array<[string, string]> = [
    ["kubernetes.io/config.source", "api"],
    ["kubernetes.io/config.seen", "2026-11-24T12:00:00.000000000Z"],
    ["b", "2"],
    ["a", "1"],
    ["c", "3"],
  ];
  const orders = [entries, [...entries].reverse(), [entries[2]!, entries[0]!, entries[4]!, entries[1]!, entries[3]!]];
  const prints = orders.map((o) => podFingerprint(Object.fromEntries(o)));
  assert.ok(prints[0]);
  assert.deepEqual(new Set(prints).size, 1);
  assert.notEqual(podFingerprint(Object.fromEntries([...entries, ["d", "4"]])), prints[0]);
});

test("allowlist: a bare registry host with /* names a registry; any other name is a repository under Docker Hub's rules", () => {
  assert.deepEqual(parseAllowlistPattern("registry.example.com:5000/*"), { prefix: "registry.example.com:5000/" });
  assert.deepEqual(parseAllowlistPattern("localhost/*"), { prefix: "localhost/" });
  assert.deepEqual(parseAllowlistPattern("alpine/*"), { prefix: "docker.io/library/alpine/" });
  assert.deepEqual(parseAllowlistPattern("mylocalhost/*"), { prefix: "docker.io/library/mylocalhost/" });
  assert.deepEqual(parseAllowlistPattern("localhostname/*"), { prefix: "docker.io/library/localhostname/" });
});

test("allowlist: an entry with a digest, or that is not an image name, is refused with the entry quoted", () => {
  const digest = `alpine@sha256:${"b".repeat(64)}`;
  assert.deepEqual(parseAllowlistPattern(digest), { error: `${JSON.stringify(digest)}: name a repository, without tag or digest` });
  const invalid = parseAllowlistPattern("Not Valid");
  assert.ok("error" in invalid && invalid.error.startsWith('"Not Valid": ') && invalid.error.length > '"Not Valid": '.length);
});

test("the default verification policy is the kubelet's", () => {
  assert.equal(DEFAULT_VERIFICATION_POLICY, "NeverVerifyPreloadedImages");
});
