// Property-based tests of what the registry client reads from a registry and its token server, all pure: referrers
// indexes and their pagination (referrers.ts), manifests and Content-Types (media-types.ts), WWW-Authenticate
// challenges (auth-challenge.ts, registry-auth.ts challengeOf), token answers (readTokenResponse, cacheUntil) and
// digests (content-digest.ts). Every input, valid documents mutated or anything at all, gets an ok or an error
// result, never a throw; a next-page link never takes the client to another registry or repository.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, test } from "node:test";
import fc from "fast-check";
import { chooseEndpointAuth, parseAuthChallenges, type AuthChallenge } from "../../src/registry/auth-challenge.ts";
import { computeDigest, digestAlgorithm } from "../../src/registry/content-digest.ts";
import type { HttpResponse } from "../../src/registry/http-exchange.ts";
import { essence, isIndexMediaType, OCI_IMAGE_INDEX, readManifest } from "../../src/registry/media-types.ts";
import { nextPage, parseReferrersIndex, readReferrersAnswer, referrersTag } from "../../src/registry/referrers.ts";
import { challengeOf, readTokenResponse } from "../../src/registry/registry-auth.ts";
import { cacheUntil } from "../../src/registry/token-cache.ts";
import { checkProperty } from "../support/fuzz.ts";
import { byteMutation, jsonMutation, jsonText, mutateBytes, mutateJson } from "../support/json-mutations.ts";

const FILE = "test/fuzz/registry-answers.test.ts";
const sha256 = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`;
const D1 = sha256("one");
const D2 = sha256("two");
const SHA512 = `sha512:${createHash("sha512").update("three").digest("hex")}`;
const MANIFEST_TYPES = [
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
  "application/vnd.docker.distribution.manifest.v2+json",
];

/** Calls `fn`; an exception escaping it fails the property with what it was. */
function noThrow<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw new Error(`${what} threw: ${String(e)}`, { cause: e });
  }
}

/** Bodies near `doc`: mutated once or twice, its text's bytes changed, or anything at all. */
function nearJson(doc: unknown): fc.Arbitrary<Buffer> {
  const text = Buffer.from(JSON.stringify(doc));
  return fc.oneof(
    { weight: 1, arbitrary: fc.constant(text) },
    { weight: 4, arbitrary: jsonMutation.map((m) => Buffer.from(jsonText(mutateJson(doc, m)))) },
    { weight: 2, arbitrary: fc.tuple(jsonMutation, jsonMutation).map(([a, b]) => Buffer.from(jsonText(mutateJson(mutateJson(doc, a), b)))) },
    { weight: 2, arbitrary: byteMutation.map((m) => mutateBytes(text, m)) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)) },
    { weight: 1, arbitrary: fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? "")) },
  );
}

/** Content-Types: the manifest types and their spellings (parameters, case, spaces), others, none. */
const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
  fc.constantFrom(...MANIFEST_TYPES, undefined, "", "application/json", "text/html; charset=utf-8", "application/octet-stream"),
  fc
    .tuple(fc.constantFrom(...MANIFEST_TYPES), fc.constantFrom("", "; charset=utf-8", ";", " ; x=y", ";;"), fc.boolean(), fc.constantFrom("", " ", "\t"))
    .map(([t, params, upper, pad]) => `${pad}${upper ? t.toUpperCase() : t}${params}${pad}`),
  fc.string({ maxLength: 80 }),
  fc.string({ unit: "binary", maxLength: 40 }),
);

// ---------------------------------------------------------------------------------------------

const descriptor = (digest: string, extra: Record<string, unknown> = {}) => ({
  mediaType: "application/vnd.oci.image.manifest.v1+json",
  digest,
  size: 1234,
  artifactType: "application/vnd.dev.sigstore.bundle.v0.3+json",
  annotations: { "dev.sigstore.bundle.predicateType": "https://sigstore.dev/cosign/sign/v1", "org.opencontainers.image.created": "2025-01-01T00:00:00Z" },
  ...extra,
});
const REFERRERS = {
  schemaVersion: 2,
  mediaType: OCI_IMAGE_INDEX,
  manifests: [descriptor(D1), descriptor(SHA512, { artifactType: undefined }), descriptor(D2)],
};

describe("referrers indexes", () => {
  test("the unmutated index reads, with its descriptors (pins the properties below)", () => {
    const answer = readReferrersAnswer(Buffer.from(JSON.stringify(REFERRERS)), OCI_IMAGE_INDEX);
    assert.ok("ok" in answer && answer.ok);
    assert.deepEqual(
      answer.descriptors.map((d) => d.digest),
      [D1, SHA512, D2],
    );
  });

  test("any body near a referrers index, with any Content-Type: descriptors that hold what they promise, an error or 'not an index'", async () => {
    const counts = { ok: 0, error: 0, notAnIndex: 0 };
    await checkProperty(
      fc.property(nearJson(REFERRERS), contentType, (body, type) => {
        const parsed = noThrow("parseReferrersIndex", () => parseReferrersIndex(body));
        const answer = noThrow("readReferrersAnswer", () => readReferrersAnswer(body, type));
        if ("notAnIndex" in answer) {
          assert.ok(typeof answer.notAnIndex === "string" && answer.notAnIndex.length > 0);
          counts.notAnIndex++;
          return;
        }
        // An answer taken as an index is read exactly as parseReferrersIndex reads it.
        assert.deepEqual(answer, parsed);
        if (!answer.ok) {
          assert.ok(typeof answer.error === "string" && answer.error.length > 0);
          counts.error++;
          return;
        }
        counts.ok++;
        for (const d of answer.descriptors) {
          assert.ok(typeof d.mediaType === "string" && d.mediaType !== "");
          assert.ok(digestAlgorithm(d.digest) !== undefined, d.digest);
          assert.ok(Number.isSafeInteger(d.size) && d.size >= 0);
          if (d.artifactType !== undefined) assert.equal(typeof d.artifactType, "string");
          for (const v of Object.values(d.annotations ?? {})) assert.equal(typeof v, "string");
        }
      }),
      { file: FILE },
    );
    assert.ok(counts.ok > 0 && counts.error > 0 && counts.notAnIndex > 0, JSON.stringify(counts));
  });

  test("the referrers tag of any string is at most 128 characters", async () => {
    await checkProperty(
      fc.property(fc.oneof(fc.constantFrom(D1, SHA512), fc.string({ maxLength: 300 })), (digest) => {
        const tag = noThrow("referrersTag", () => referrersTag(digest));
        assert.ok(tag.length <= 128);
      }),
      { file: FILE },
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe("next-page links", () => {
  const REPO = "acme/app";
  const ORIGIN = "https://registry.example.com:5000";
  const answeredAt = (query = "") => new URL(`/v2/${REPO}/referrers/${D1}${query}`, ORIGIN);

  /** Where a Link target can point: this repository, a neighbour, another host, scheme or port, with tricks. */
  const target = fc.oneof(
    fc.constantFrom(
      `/v2/${REPO}/referrers/${D1}?n=2&last=x`,
      `${ORIGIN}/v2/${REPO}/referrers/${D1}?last=a%2Fb`,
      `referrers/${D1}?last=2`,
      `?last=3`,
      `/v2/${REPO}/../other/referrers/${D1}`,
      `/v2/${REPO}/%2e%2e/other/referrers/${D1}`,
      `/v2/${REPO}/..%2fother/referrers/${D1}`,
      `/v2/${REPO}/..%2Fother/referrers/${D1}`,
      `/v2/${REPO}/%2E%2E%2Fother/referrers/${D1}`,
      `/v2/${REPO}/..%5cother/referrers/${D1}`,
      `/v2/${REPO}/.%2e/other/x`,
      `/v2/${REPO}%2fx/referrers`,
      `/v2/${REPO}-evil/referrers/${D1}`,
      `/v2/acme/referrers/${D1}`,
      `//evil.example/v2/${REPO}/referrers/${D1}`,
      `\\\\evil.example/v2/${REPO}/x`,
      `/\\evil.example/v2/${REPO}/x`,
      `https://evil.example/v2/${REPO}/referrers/${D1}`,
      `http://registry.example.com:5000/v2/${REPO}/referrers/${D1}`,
      `https://registry.example.com/v2/${REPO}/referrers/${D1}`,
      `https://registry.example.com:5000@evil.example/v2/${REPO}/x`,
      `https://user:pw@registry.example.com:5000/v2/${REPO}/x`,
      `HTTPS://REGISTRY.EXAMPLE.COM:5000/v2/${REPO}/x`,
      `https://registry.example.com.:5000/v2/${REPO}/x`,
      `javascript:alert(1)`,
      `data:text/plain,x`,
      `file:///etc/passwd`,
      `/v2/${REPO}/x#frag`,
      ``,
      ` `,
      `http://[::1`,
    ),
    fc
      .tuple(
        fc.constantFrom(`/v2/${REPO}/`, `${ORIGIN}/v2/${REPO}/`, "", "/", `/v2/`),
        fc.array(fc.constantFrom("..", ".", "%2e%2e", "%2E.", "..%2f", "%2f", "%5c", "x", "referrers", D1, "", "?q=1", "#f", "%00"), { maxLength: 6 }),
      )
      .map(([base, segments]) => base + segments.join("/")),
    fc.webUrl({ withQueryParameters: true, withFragments: true }),
    fc.string({ maxLength: 80 }),
  );

  const link = fc.oneof(
    {
      weight: 4,
      arbitrary: fc.tuple(target, fc.constantFrom('rel="next"', "rel=next", 'rel="next"; type=x', ' rel="next"')).map(([t, rel]) => `<${t}>;${rel}`),
    },
    { weight: 1, arbitrary: fc.tuple(target, target).map(([a, b]) => `<${a}>; rel="prev", <${b}>; rel="next"`) },
    { weight: 1, arbitrary: fc.string({ maxLength: 120 }) },
    { weight: 1, arbitrary: fc.constantFrom(undefined, "", 'rel="next"', "<>; rel=next", "<<a>>; rel=next") },
  );

  test("a followed link stays in the registry and repository that answered (its path, decoded, included)", async () => {
    const counts = { followed: 0, refused: 0, none: 0 };
    await checkProperty(
      fc.property(link, fc.constantFrom("", "?artifactType=application%2Fx", "?n=1"), (header, query) => {
        const answered = answeredAt(query);
        const next = noThrow("nextPage", () => nextPage(header, REPO, answered));
        if (next === undefined) return void counts.none++;
        if ("refused" in next) {
          assert.ok(typeof next.refused === "string" && next.refused.length > 0);
          return void counts.refused++;
        }
        counts.followed++;
        // What the client requests next (registry-client.ts resolves the path the same way).
        const url = new URL(`/v2/${REPO}/${next.path}`, answered.origin);
        assert.equal(url.origin, answered.origin, next.path);
        assert.equal(url.username + url.password, "");
        assert.ok(url.pathname.startsWith(`/v2/${REPO}/`), url.pathname);
        // Decoded as a registry's router may decode it, the path still has no dot segments and no backslash.
        const decoded = decodeURIComponent(url.pathname.replace(/%(?![0-9a-f]{2})/gi, "%25"));
        assert.ok(!decoded.split(/[/\\]/).some((s) => s === ".." || s === "."), `${url.pathname} decodes to ${decoded}`);
      }),
      { file: FILE },
    );
    assert.ok(counts.followed > 0 && counts.refused > 0 && counts.none > 0, JSON.stringify(counts));
  });

  test("links to this repository are followed, elsewhere refused (pinned)", () => {
    assert.deepEqual(nextPage(`</v2/${REPO}/referrers/${D1}?last=2>; rel="next"`, REPO, answeredAt()), { path: `referrers/${D1}?last=2` });
    assert.deepEqual(nextPage(`<?last=3>; rel="next"`, REPO, answeredAt()), { path: `referrers/${D1}?last=3` });
    // Regression (found by the property above): a slash, backslash or dot hidden in percent-encoding was followed,
    // though a registry that decodes the path reads it as another repository (/v2/acme/app/../other/...).
    const encoded = [`/v2/${REPO}/%2E%2E%2Fother/x`, `/v2/${REPO}/..%2fother/x`, `/v2/${REPO}/..%5Cother/x`, `/v2/${REPO}/%2e./x`];
    for (const elsewhere of [`https://evil.example/v2/${REPO}/x`, `/v2/other/x`, `/v2/${REPO}/../other/x`, `//evil.example/v2/${REPO}/x`, ...encoded]) {
      const next = nextPage(`<${elsewhere}>; rel="next"`, REPO, answeredAt());
      assert.ok(next && "refused" in next, `${elsewhere}: ${JSON.stringify(next)}`);
    }
  });
});

// ---------------------------------------------------------------------------------------------

const platform = (architecture: string) => ({ os: "linux", architecture, variant: "v8", "os.version": "1" });
const DOCS = {
  ociManifest: {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: D1, size: 10 },
    layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: D2, size: 20 }],
  },
  ociIndex: {
    schemaVersion: 2,
    mediaType: OCI_IMAGE_INDEX,
    manifests: [
      { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: D1, size: 10, platform: platform("amd64") },
      { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: SHA512, size: 11, platform: platform("arm64") },
      { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: D2, size: 12, annotations: { "vnd.docker.reference.type": "attestation-manifest" } },
    ],
  },
  dockerList: {
    schemaVersion: 2,
    mediaType: "application/vnd.docker.distribution.manifest.list.v2+json",
    manifests: [{ mediaType: "application/vnd.docker.distribution.manifest.v2+json", digest: D1, size: 10, platform: platform("amd64") }],
  },
  dockerV2: {
    schemaVersion: 2,
    mediaType: "application/vnd.docker.distribution.manifest.v2+json",
    config: { mediaType: "application/vnd.docker.container.image.v1+json", digest: D1, size: 10 },
    layers: [],
  },
  unlabelledIndex: { schemaVersion: 2, manifests: [{ mediaType: "application/vnd.oci.image.manifest.v1+json", digest: D1, size: 10 }] },
};

describe("manifests", () => {
  test("every unmutated manifest reads as its type (pins the property below)", () => {
    for (const [name, doc] of Object.entries(DOCS)) {
      const read = readManifest(Buffer.from(JSON.stringify(doc)), undefined);
      assert.ok(read.ok, name);
      assert.equal(read.mediaType, (doc as { mediaType?: string }).mediaType ?? OCI_IMAGE_INDEX);
    }
  });

  test("any body near a manifest or index, with any Content-Type: a manifest type with well-formed entries, or an error", async () => {
    const counts = { ok: 0, index: 0, error: 0 };
    const body = fc.constantFrom(...Object.values(DOCS)).chain((doc) => nearJson(doc));
    await checkProperty(
      fc.property(body, contentType, (bytes, type) => {
        const read = noThrow("readManifest", () => readManifest(bytes, type));
        if (!read.ok) {
          assert.ok(typeof read.error === "string" && read.error.length > 0);
          return void counts.error++;
        }
        counts.ok++;
        assert.ok(MANIFEST_TYPES.includes(read.mediaType), read.mediaType);
        // Served as one kind, never read as another: a manifest Content-Type and the body's mediaType agree.
        const header = essence(type);
        const declared = (JSON.parse(bytes.toString("utf8")) as { mediaType?: unknown }).mediaType;
        if (header !== undefined && MANIFEST_TYPES.includes(header)) {
          assert.equal(read.mediaType, header);
          if (typeof declared === "string") assert.equal(declared, header);
        } else if (typeof declared === "string") assert.equal(read.mediaType, declared);
        assert.equal(read.manifests !== undefined, isIndexMediaType(read.mediaType));
        if (read.manifests) counts.index++;
        for (const m of read.manifests ?? []) {
          assert.match(m.digest, /^sha(256:[0-9a-f]{64}|512:[0-9a-f]{128})$/);
          assert.ok(typeof m.mediaType === "string" && Number.isSafeInteger(m.size) && m.size >= 0);
          if (m.platform) assert.ok(typeof m.platform.os === "string" && typeof m.platform.architecture === "string");
        }
      }),
      { file: FILE },
    );
    assert.ok(counts.ok > 0 && counts.index > 0 && counts.error > 0, JSON.stringify(counts));
  });

  test("essence of any Content-Type is undefined or a trimmed, lowercased type without parameters", async () => {
    await checkProperty(
      fc.property(fc.oneof(contentType, fc.string({ unit: "grapheme", maxLength: 40 })), (type) => {
        const e = noThrow("essence", () => essence(type));
        if (e === undefined) return;
        assert.ok(e.length > 0 && !e.includes(";") && e === e.trim() && e === e.toLowerCase(), JSON.stringify(e));
      }),
      { file: FILE },
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe("WWW-Authenticate challenges", () => {
  const VALID = [
    'Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:acme/app:pull,push"',
    "Bearer realm=https://auth.example.com/token,service=registry.example.com",
    'Basic realm="Registry Realm"',
    'Negotiate abc==, Bearer realm="https://a.example/t", Basic realm=x',
    'Bearer realm="a\\"b\\\\c", error="insufficient_scope"',
  ];

  test("the valid challenges parse (pins the properties below)", () => {
    for (const header of VALID) assert.ok(parseAuthChallenges(header).ok, header);
    const first = parseAuthChallenges(VALID[0]!);
    assert.ok(first.ok);
    assert.deepEqual(first.challenges[0]!.params.scope, "repository:acme/app:pull,push");
  });

  /** Headers near valid ones: characters replaced, inserted or cut, joined, repeated; and any text. */
  const header: fc.Arbitrary<string | string[]> = fc.oneof(
    fc.constantFrom(...VALID),
    fc
      .tuple(
        fc.constantFrom(...VALID),
        fc.nat(),
        fc.constantFrom('"', "\\", ",", "=", " ", "\t", "\n", "", "==", '\\"', "é", "\u0000", "Bearer "),
        fc.nat({ max: 3 }),
      )
      .map(([h, at, insert, cut]) => h.slice(0, at % (h.length + 1)) + insert + h.slice((at % (h.length + 1)) + cut)),
    fc.array(fc.constantFrom(...VALID, "", ",", "  "), { maxLength: 4 }),
    fc.tuple(fc.constantFrom(...VALID), fc.integer({ min: 1, max: 2000 })).map(([h, n]) => Array.from({ length: n }, () => h).join(", ")),
    fc.constantFrom(`Bearer realm="${"x".repeat(100_000)}`, `Bearer ${"=".repeat(50_000)}`, `${",".repeat(100_000)}`, `Bearer ${"a=b,".repeat(20_000)}`),
    fc.string({ maxLength: 200 }),
    fc.string({ unit: "binary", maxLength: 100 }),
    fc.array(fc.string({ maxLength: 30 }), { maxLength: 3 }),
  );

  test("any header: challenges or an error naming a position; the chosen auth follows from the challenges", async () => {
    const counts = { ok: 0, error: 0, bearer: 0 };
    await checkProperty(
      fc.property(header, (value) => {
        const parsed = noThrow("parseAuthChallenges", () => parseAuthChallenges(value));
        const viaResponse = noThrow("challengeOf", () => challengeOf({ headers: { "www-authenticate": value } } as unknown as HttpResponse));
        if (!parsed.ok) {
          assert.match(parsed.error, / at position \d+$/);
          assert.equal(viaResponse.ok, false);
          return void counts.error++;
        }
        counts.ok++;
        for (const c of parsed.challenges) {
          assert.ok(c.scheme.length > 0 && c.scheme === c.scheme.toLowerCase());
          for (const [name, v] of Object.entries(c.params)) assert.ok(name === name.toLowerCase() && typeof v === "string");
        }
        const chosen = noThrow("chooseEndpointAuth", () => chooseEndpointAuth(parsed.challenges));
        assert.deepEqual(viaResponse, chosen);
        if (chosen.ok && chosen.auth.scheme === "bearer") {
          counts.bearer++;
          assert.ok(chosen.auth.realm.length > 0);
        }
      }),
      { file: FILE },
    );
    assert.ok(counts.ok > 0 && counts.error > 0 && counts.bearer > 0, JSON.stringify(counts));
  });

  test("challenges written out with quoted parameters parse back to themselves", async () => {
    const token = fc.stringMatching(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,12}$/);
    const challenge = fc.record({
      scheme: token,
      // Not "__proto__": parseAuthChallenges stores it by assignment, which a string value cannot change, so such a
      // parameter is dropped. Harmless (values are strings, nothing is polluted, and no one reads that name) and left
      // as is; every other name round-trips.
      params: fc.uniqueArray(
        fc.tuple(
          token.filter((n) => n.toLowerCase() !== "__proto__"),
          fc.string({ maxLength: 30 }),
        ),
        { selector: ([name]) => name.toLowerCase(), maxLength: 4 },
      ),
    });
    await checkProperty(
      fc.property(fc.array(challenge, { minLength: 1, maxLength: 3 }), fc.constantFrom(",", ", ", " ,\t"), (challenges, sep) => {
        const text = challenges
          .map((c) => [c.scheme, c.params.map(([n, v]) => `${n}="${v.replace(/[\\"]/g, "\\$&")}"`).join(sep)].filter((s) => s !== "").join(" "))
          .join(sep);
        const parsed = noThrow("parseAuthChallenges", () => parseAuthChallenges(text));
        assert.ok(parsed.ok, `${text}: ${parsed.ok ? "" : parsed.error}`);
        const expected: AuthChallenge[] = challenges.map((c) => ({
          scheme: c.scheme.toLowerCase(),
          params: Object.fromEntries(c.params.map(([n, v]) => [n.toLowerCase(), v])),
        }));
        assert.deepEqual(parsed.challenges, expected, text);
      }),
      { file: FILE },
    );
  });

  test("challengeOf without the header says so", () => {
    assert.deepEqual(challengeOf({ headers: {} } as unknown as HttpResponse), { ok: false, error: "no WWW-Authenticate header" });
  });
});

// ---------------------------------------------------------------------------------------------

describe("token answers", () => {
  const ANSWER = { token: "abc.def.ghi", access_token: "abc.def.ghi", expires_in: 300, issued_at: "2025-01-01T00:00:00Z" };

  test("the unmutated answer is a grant (pins the property below)", () => {
    assert.deepEqual(readTokenResponse(Buffer.from(JSON.stringify(ANSWER))), {
      token: "abc.def.ghi",
      expiresInS: 300,
      issuedAtMs: Date.parse(ANSWER.issued_at),
    });
  });

  test("any body near a token answer: a grant with a token and sane times, or what is wrong", async () => {
    const counts = { grant: 0, refused: 0 };
    await checkProperty(
      fc.property(nearJson(ANSWER), fc.integer({ min: 0, max: 4_000_000_000_000 }), (body, now) => {
        const grant = noThrow("readTokenResponse", () => readTokenResponse(body));
        if (typeof grant === "string") {
          assert.ok(grant.length > 0);
          return void counts.refused++;
        }
        counts.grant++;
        assert.ok(typeof grant.token === "string" && grant.token.length > 0);
        if (grant.expiresInS !== undefined) assert.ok(Number.isFinite(grant.expiresInS) && grant.expiresInS > 0);
        if (grant.issuedAtMs !== undefined) assert.ok(Number.isFinite(grant.issuedAtMs));
        const until = noThrow("cacheUntil", () => cacheUntil(grant, now));
        // Never NaN, and never earlier than issue (or receipt) — a token server cannot make a cached token stale-dated.
        assert.ok(!Number.isNaN(until), String(until));
        assert.ok(until <= now + (grant.expiresInS ?? Infinity) * 1000, `${until} for ${JSON.stringify(grant)} at ${now}`);
      }),
      { file: FILE },
    );
    assert.ok(counts.grant > 0 && counts.refused > 0, JSON.stringify(counts));
  });
});

// ---------------------------------------------------------------------------------------------

describe("content digests", () => {
  test("digestAlgorithm of any string is sha256, sha512 or undefined, and agrees with computeDigest", async () => {
    const near = fc.oneof(
      fc
        .tuple(fc.constantFrom(D1, SHA512), fc.nat(), fc.constantFrom("", "g", "A", ":", " ", "0", "\u0000", "é"))
        .map(([d, at, c]) => d.slice(0, at % d.length) + c + d.slice((at % d.length) + 1)),
      fc.constantFrom(D1, SHA512, "sha256:", "sha512:", ":", "", D1.toUpperCase(), `sha384:${"0".repeat(96)}`, `${D1}0`),
      fc.string({ maxLength: 140 }),
    );
    const counts = { valid: 0, invalid: 0 };
    await checkProperty(
      fc.property(near, fc.uint8Array({ maxLength: 64 }), (digest, bytes) => {
        const algorithm = noThrow("digestAlgorithm", () => digestAlgorithm(digest));
        if (algorithm === undefined) return void counts.invalid++;
        counts.valid++;
        assert.ok(digest.startsWith(`${algorithm}:`));
        const computed = computeDigest(bytes, algorithm);
        assert.equal(digestAlgorithm(computed), algorithm);
        assert.equal(computed.length, digest.length);
      }),
      { file: FILE },
    );
    assert.ok(counts.valid > 0 && counts.invalid > 0, JSON.stringify(counts));
  });
});
