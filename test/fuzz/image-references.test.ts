// Property-based tests of the image-reference grammar (src/core/image-reference.ts): any string gets an answer
// (a reference or a reason, never an exception), the answer agrees with the distribution project's reference
// grammar (written below as regular expressions from its definition) plus the rules the project documents, and
// references built from the grammar's parts parse and survive fullName/familiarName. Seeded: a failure prints the
// seed and the command that replays it (test/support/fuzz.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { checkProperty, fuzzRuns } from "../support/fuzz.ts";
import type { ImageReference } from "../../src/core/image-reference.ts";
import { checkDigest, checkImageReference, familiarName, fullName, parseImageReference, repositoryName } from "../../src/core/image-reference.ts";

const FILE = "test/fuzz/image-references.test.ts";

// ---------------------------------------------------------------------------------------------
// The distribution project's reference grammar, from its definition:
//
//   reference        := name [ ":" tag ] [ "@" digest ]
//   name             := [domain '/'] remote-name
//   domain           := host [':' port-number]
//   host             := domain-name | IPv4address | '[' IPv6address ']'
//   domain-name      := domain-component ['.' domain-component]*
//   domain-component := /([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])/
//   port-number      := /[0-9]+/
//   remote-name      := path-component ['/' path-component]*
//   path-component   := alpha-numeric [separator alpha-numeric]*
//   alpha-numeric    := /[a-z0-9]+/
//   separator        := /[_.]|__|[-]+/
//   tag              := /[\w][\w.-]{0,127}/
//   digest           := digest-algorithm ":" digest-hex
//   digest-algorithm := digest-algorithm-component [ digest-algorithm-separator digest-algorithm-component ]*
//   digest-algorithm-separator := /[+.-_]/
//   digest-algorithm-component := /[A-Za-z][A-Za-z0-9]*/
//   digest-hex       := /[0-9a-fA-F]{32,}/
//
// and a name (with its domain, as normalized) of at most 255 characters. An IPv4 address is a domain-name here.

const ALPHA_NUMERIC = "[a-z0-9]+";
const SEPARATOR = "(?:[_.]|__|-+)";
const PATH_COMPONENT = `${ALPHA_NUMERIC}(?:${SEPARATOR}${ALPHA_NUMERIC})*`;
const REMOTE_NAME = `${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const DOMAIN_NAME = `${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*`;
const IPV6_HOST = "\\[[a-fA-F0-9:]+\\]";
const DOMAIN = `(?:${DOMAIN_NAME}|${IPV6_HOST})(?::[0-9]+)?`;
const TAG = "[\\w][\\w.-]{0,127}";
const DIGEST = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";

const REFERENCE_GRAMMAR = new RegExp(`^(?:${DOMAIN}/)?${REMOTE_NAME}(?::${TAG})?(?:@${DIGEST})?$`);
const DOMAIN_GRAMMAR = new RegExp(`^${DOMAIN}$`);
const DIGEST_GRAMMAR = new RegExp(`^${DIGEST}$`);
const REMOTE_NAME_AND_TAG = new RegExp(`^(?<path>${REMOTE_NAME})(?::(?<tag>${TAG}))?$`);
const NAME_TOTAL_LENGTH_MAX = 255;

/**
 * What the project accepts, from the grammar above and the rules src/core/image-reference.ts documents where it
 * narrows the grammar:
 * - the registry split is Docker's: the first component is the domain only when the name has a "/" after it and it
 *   contains "." or ":" or is "localhost"; otherwise it is a path component (so "Foo/bar" is refused as not
 *   lowercase, where Docker itself would take the uppercase "Foo" for a registry: a documented difference);
 * - digests are the registered algorithms only, lowercase: sha256 (64 hex) and sha512 (128 hex);
 * - a port is decimal, 1 to 65535 (as containerd reads it), and a bracketed IPv6 host contains a ":";
 * - a bare 64-hex string is an image ID, refused (Docker refuses it too);
 * - the length limit applies to the normalized name: lowercased registry, docker.io for index.docker.io and for
 *   names without one, "library/" before a single-component Docker Hub path.
 * The expected reference when accepted, else undefined.
 */
function expectedReference(input: string): ImageReference | undefined {
  if (/^[a-f0-9]{64}$/.test(input)) return undefined;
  const at = input.indexOf("@");
  const nameAndTag = at < 0 ? input : input.slice(0, at);
  const digest = at < 0 ? undefined : input.slice(at + 1);
  if (digest !== undefined && !(DIGEST_GRAMMAR.test(digest) && /^(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/.test(digest))) return undefined;
  const slash = nameAndTag.indexOf("/");
  const first = slash < 0 ? "" : nameAndTag.slice(0, slash);
  const explicit = slash >= 0 && (first.includes(".") || first.includes(":") || first === "localhost");
  let registry = "docker.io";
  if (explicit) {
    if (!DOMAIN_GRAMMAR.test(first)) return undefined;
    const port = /:([0-9]+)$/.exec(first.startsWith("[") ? first.slice(first.indexOf("]")) : first)?.[1];
    if (port !== undefined && !(port.length <= 5 && Number(port) >= 1 && Number(port) <= 65535)) return undefined;
    if (first.startsWith("[") && !first.slice(0, first.indexOf("]")).includes(":")) return undefined;
    registry = first.toLowerCase() === "index.docker.io" ? "docker.io" : first.toLowerCase();
  }
  const m = REMOTE_NAME_AND_TAG.exec(explicit ? nameAndTag.slice(slash + 1) : nameAndTag);
  if (!m) return undefined;
  const path = m.groups!.path!;
  const repository = registry === "docker.io" && !path.includes("/") ? `library/${path}` : path;
  if (registry.length + 1 + repository.length > NAME_TOTAL_LENGTH_MAX) return undefined;
  const ref: ImageReference = { registry, repository };
  if (m.groups!.tag !== undefined) ref.tag = m.groups!.tag;
  if (digest !== undefined) ref.digest = digest;
  return ref;
}

// ---------------------------------------------------------------------------------------------
// Arbitraries

const lower = fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789");
const alphaNumeric = fc.string({ unit: lower, minLength: 1, maxLength: 8 });
const separator = fc.constantFrom(".", "_", "__", "-", "--", "---");
/** A path component from the grammar: alpha-numeric runs joined by separators. */
const pathComponent = fc
  .tuple(alphaNumeric, fc.array(fc.tuple(separator, alphaNumeric), { maxLength: 3 }))
  .map(([head, rest]) => head + rest.map(([s, a]) => s + a).join(""));
const domainComponent = fc
  .tuple(fc.constantFrom(..."abcxyzABCXYZ0129"), fc.string({ unit: fc.constantFrom(..."abcxyzAZ09-"), maxLength: 10 }), fc.constantFrom(..."abczAZ09"))
  .map(([a, mid, z]) => (mid === "" ? a : a + mid + z));
const port = fc.integer({ min: 1, max: 65535 }).map(String);
/** A registry as Docker's split reads one: it contains "." or ":", or is "localhost". */
const registry = fc.oneof(
  fc
    .tuple(domainComponent, fc.array(domainComponent, { minLength: 1, maxLength: 3 }), fc.option(port))
    .map(([head, rest, p]) => [head, ...rest].join(".") + (p === null ? "" : `:${p}`)),
  fc.tuple(domainComponent, port).map(([host, p]) => `${host}:${p}`),
  fc.option(port).map((p) => "localhost" + (p === null ? "" : `:${p}`)),
  fc.tuple(fc.ipV4(), fc.option(port)).map(([ip, p]) => ip + (p === null ? "" : `:${p}`)),
  fc
    .tuple(
      fc.ipV6().filter((ip) => !ip.includes(".")),
      fc.option(port),
    )
    .map(([ip, p]) => `[${ip}]` + (p === null ? "" : `:${p}`)),
  fc.constantFrom("docker.io", "index.docker.io", "Index.Docker.IO", "registry-1.docker.io", "quay.io", "gcr.io"),
);
const tag = fc.tuple(fc.constantFrom(..."aZ09_"), fc.string({ unit: fc.constantFrom(..."abzAZ09_.-"), maxLength: 127 })).map(([a, rest]) => a + rest);
const hex = (length: number) => fc.string({ unit: fc.constantFrom(..."0123456789abcdef"), minLength: length, maxLength: length });
const digest = fc.oneof({ weight: 3, arbitrary: hex(64).map((h) => `sha256:${h}`) }, { weight: 1, arbitrary: hex(128).map((h) => `sha512:${h}`) });

interface Parts {
  registry: string | null;
  path: string[];
  tag: string | null;
  digest: string | null;
}

/** A reference from the grammar's parts (1 to 4 path components), kept within the name length limit. */
const referenceParts: fc.Arbitrary<Parts> = fc
  .record({
    registry: fc.option(registry),
    path: fc.array(pathComponent, { minLength: 1, maxLength: 4 }),
    tag: fc.option(tag),
    digest: fc.option(digest),
  })
  // Without a registry, a first component of several that Docker's split would take for one ("a.b/c",
  // "localhost/x") is written with "_" instead of "." (and another name for "localhost").
  .map((p) =>
    p.registry === null && p.path.length > 1 ? { ...p, path: [p.path[0]!.replaceAll(".", "_").replace(/^localhost$/, "localhost0"), ...p.path.slice(1)] } : p,
  );
const written = (p: Parts): string =>
  (p.registry === null ? "" : `${p.registry}/`) + p.path.join("/") + (p.tag === null ? "" : `:${p.tag}`) + (p.digest === null ? "" : `@${p.digest}`);

/** Edits that take a valid reference to the edge of the grammar: one character inserted, deleted or replaced, a part doubled, case flipped. */
const nearChar = fc.constantFrom(..."aZ0_.-/:@[]%! \t\n\u0000\u00e9\u{1f600}A");
const edited = fc
  .tuple(
    referenceParts.map(written),
    fc.array(fc.tuple(fc.nat(), nearChar, fc.constantFrom("insert", "delete", "replace", "double", "upper")), { minLength: 1, maxLength: 3 }),
  )
  .map(([text, edits]) => {
    let s = text;
    for (const [n, c, how] of edits) {
      const i = s.length === 0 ? 0 : n % s.length;
      if (how === "insert") s = s.slice(0, i) + c + s.slice(i);
      else if (how === "delete") s = s.slice(0, i) + s.slice(i + 1);
      else if (how === "replace") s = s.slice(0, i) + c + s.slice(i + 1);
      else if (how === "double") s = s.slice(0, i) + s.slice(i, i + 1 + (n % 7)) + s.slice(i);
      else s = s.slice(0, i) + s.slice(i, i + 1 + (n % 5)).toUpperCase() + s.slice(i + 1 + (n % 5));
    }
    return s;
  });
/** Names around the 255-character limit, on Docker Hub (where "library/" counts) and elsewhere. */
const nearTheLengthLimit = fc.tuple(fc.option(registry), fc.integer({ min: 200, max: 270 }), fc.boolean(), fc.option(tag)).map(([r, n, twoComponents, t]) => {
  const path = twoComponents ? `a/${"b".repeat(n - 2)}` : "c".repeat(n);
  return (r === null ? "" : `${r}/`) + path + (t === null ? "" : `:${t}`);
});
/** Strings over the grammar's alphabet (and a few characters outside it), so that many are near the valid space. */
const grammarAlphabet = fc.string({ unit: fc.constantFrom(..."abz09AZ._-__/:@[]:sha256"), maxLength: 60 });
const arbitraryInput = fc.oneof(
  { weight: 3, arbitrary: edited },
  { weight: 2, arbitrary: grammarAlphabet },
  { weight: 2, arbitrary: referenceParts.map(written) },
  { weight: 1, arbitrary: nearTheLengthLimit },
  { weight: 1, arbitrary: fc.string() },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 200 }) },
  { weight: 1, arbitrary: fc.string({ unit: fc.integer({ min: 0, max: 0x9f }).map((c) => String.fromCharCode(c)), maxLength: 40 }) },
  { weight: 1, arbitrary: fc.tuple(fc.string({ maxLength: 3 }), fc.integer({ min: 300, max: 4000 })).map(([s, n]) => (s || "a").repeat(n).slice(0, n)) },
  { weight: 1, arbitrary: hex(64) },
);

// ---------------------------------------------------------------------------------------------
// Properties

test("any string gets a reference or a reason, never an exception, and the answer is the grammar's", async () => {
  const seen = { accepted: 0, refused: 0 };
  await checkProperty(
    fc.property(arbitraryInput, (input) => {
      const result = parseImageReference(input);
      const checked = checkImageReference(input);
      assert.equal(result.ok, checked.ok, "parseImageReference and checkImageReference agree");
      const expected = expectedReference(input);
      if (result.ok) {
        seen.accepted++;
        // Every reference the project accepts is in the distribution grammar, as written.
        assert.ok(REFERENCE_GRAMMAR.test(input), `accepted outside the grammar: ${JSON.stringify(input)}`);
        assert.deepEqual(result.ref, expected, `${JSON.stringify(input)} accepted; the grammar ${expected ? "reads it otherwise" : "refuses it"}`);
        assert.deepEqual(parseImageReference(fullName(result.ref)).ok, true);
      } else {
        seen.refused++;
        assert.equal(expected, undefined, `${JSON.stringify(input)} refused (${result.error}), but the grammar accepts it`);
        assert.ok(result.error.startsWith(`invalid image reference ${JSON.stringify(input)}: `), result.error);
        assert.ok(!checked.ok && checked.reason.length > 0);
      }
    }),
    { file: FILE },
  );
  // Not vacuous: the inputs reached both sides of the grammar.
  if (fuzzRuns() >= 50) assert.ok(seen.accepted > 0 && seen.refused > 0, JSON.stringify(seen));
});

/** An array nested `depth` deep around `inner`: String() of it recurses once per level. */
const nested = (inner: unknown, depth: number): unknown => {
  let value = inner;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
};

test("values that are not strings are refused, not thrown on", async () => {
  // Regressions: the error message was built with String(input), which throws on an object without a prototype
  // (TypeError) and overflows the stack on a deeply nested array (RangeError), though the function never throws.
  for (const value of [Object.create(null), nested("x", 20_000), { toString: null }]) {
    assert.equal(parseImageReference(value as string).ok, false);
  }
  await checkProperty(
    fc.property(
      fc.oneof(
        fc.anything({
          withNullPrototype: true,
          withBigInt: true,
          withBoxedValues: true,
          withMap: true,
          withSet: true,
          withTypedArray: true,
          withSparseArray: true,
        }),
        fc.tuple(fc.anything(), fc.integer({ min: 1, max: 30_000 })).map(([inner, depth]) => nested(inner, depth)),
      ),
      (value) => {
        fc.pre(typeof value !== "string");
        const result = parseImageReference(value as string);
        assert.equal(result.ok, false);
        assert.ok(
          !result.ok && result.error.startsWith("invalid image reference ") && result.error.endsWith(": must be a string"),
          result.ok ? "" : result.error,
        );
        assert.equal(checkImageReference(value as string).ok, false);
      },
    ),
    { file: FILE },
  );
});

test("references built from the grammar's parts parse as written, and fullName and familiarName parse back to them", async () => {
  // Regressions: a Docker Hub repository whose first component Docker's split reads as a registry ("a.a/a",
  // "localhost/x") lost its "docker.io/" in familiarName, and the short form named another registry's image.
  for (const [input, familiar] of [
    ["docker.io/a.a/a", "docker.io/a.a/a:latest"],
    ["docker.io/localhost/x:1", "docker.io/localhost/x:1"],
    ["index.docker.io/example.com/app@" + "sha256:" + "0".repeat(64), "docker.io/example.com/app@sha256:" + "0".repeat(64)],
    ["docker.io/library/a.b", "a.b:latest"],
    ["docker.io/library/a.b/c", "library/a.b/c:latest"],
  ] as const) {
    const ref = (parseImageReference(input) as { ref: ImageReference }).ref;
    assert.equal(familiarName(ref), familiar, input);
    assert.equal(fullName((parseImageReference(familiarName(ref)) as { ref: ImageReference }).ref), fullName(ref), input);
  }
  await checkProperty(
    fc.property(referenceParts, (parts) => {
      const input = written(parts);
      const result = parseImageReference(input);
      assert.ok(result.ok, result.ok ? "" : result.error);
      const ref = result.ref;
      const host = parts.registry?.toLowerCase();
      const expectedRegistry = host === undefined || host === "index.docker.io" ? "docker.io" : host;
      assert.equal(ref.registry, expectedRegistry);
      const path = parts.path.join("/");
      assert.equal(ref.repository, expectedRegistry === "docker.io" && parts.path.length === 1 ? `library/${path}` : path);
      assert.equal(ref.tag, parts.tag ?? undefined);
      assert.equal(ref.digest, parts.digest ?? undefined);
      assert.equal(repositoryName(ref), `${ref.registry}/${ref.repository}`);

      // The canonical and the short form name the same image: the implicit "latest" made explicit, nothing else.
      const explicit: ImageReference = { ...ref };
      if (ref.tag === undefined && ref.digest === undefined) explicit.tag = "latest";
      for (const rendered of [fullName(ref), familiarName(ref)]) {
        const back = parseImageReference(rendered);
        assert.ok(back.ok, `${rendered}: ${back.ok ? "" : back.error}`);
        assert.deepEqual(back.ref, explicit, rendered);
        assert.equal(fullName(back.ref), fullName(ref));
      }
      assert.ok(fullName(ref).startsWith(`${ref.registry}/`));
    }),
    { file: FILE },
  );
});

const SUPPORTED_DIGEST = /^(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;
const digestInput = fc.oneof(
  { weight: 2, arbitrary: digest },
  // One edit away: a character changed or case flipped, a length off by one, another algorithm's name.
  {
    weight: 3,
    arbitrary: fc
      .tuple(digest, fc.nat(), fc.constantFrom(..."0aAfgG:-@ \u0000\u00e9"), fc.constantFrom("replace", "insert", "delete", "upper"))
      .map(([d, n, c, how]) => {
        const i = n % d.length;
        if (how === "replace") return d.slice(0, i) + c + d.slice(i + 1);
        if (how === "insert") return d.slice(0, i) + c + d.slice(i);
        if (how === "delete") return d.slice(0, i) + d.slice(i + 1);
        return d.toUpperCase();
      }),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom("sha256", "sha512", "sha384", "md5", "SHA256", "sha256+b64u", "constructor", "__proto__", "toString", "hasOwnProperty", ""),
        fc.constantFrom(32, 63, 64, 65, 96, 127, 128, 129),
        fc.boolean(),
      )
      .chain(([algorithm, length, upper]) => hex(length).map((h) => `${algorithm}:${upper ? h.toUpperCase() : h}`)),
  },
  { weight: 1, arbitrary: fc.string() },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 300 }) },
);

test("checkDigest accepts exactly sha256 with 64 and sha512 with 128 lowercase hex digits, and never throws", async () => {
  const seen = { accepted: 0, refused: 0 };
  await checkProperty(
    fc.property(digestInput, (input) => {
      const problem = checkDigest(input);
      if (SUPPORTED_DIGEST.test(input)) {
        seen.accepted++;
        assert.equal(problem, undefined, input);
      } else {
        seen.refused++;
        assert.equal(typeof problem, "string", `${JSON.stringify(input)} accepted`);
        assert.ok(problem!.length > 0);
      }
      // A digest is a reference's digest exactly when checkDigest accepts it.
      assert.equal(parseImageReference(`nginx@${input}`).ok, problem === undefined && !input.includes("@") && input !== "", JSON.stringify(input));
    }),
    { file: FILE },
  );
  if (fuzzRuns() >= 50) assert.ok(seen.accepted > 0 && seen.refused > 0, JSON.stringify(seen));
});

test("the grammar and its oracle agree on the unit tests' landmarks", () => {
  // Pins for the oracle itself, so that a property above cannot pass because expectedReference is wrong.
  for (const input of [
    "nginx",
    "localhost:5000",
    "localhost:5000/x",
    "[::1]:5000/x:2",
    "Registry.Example.COM:443/app",
    "a".repeat(237),
    "quay.io/" + "a".repeat(247),
  ]) {
    assert.deepEqual(expectedReference(input), (parseImageReference(input) as { ref: ImageReference }).ref, input);
  }
  for (const input of [
    "Foo/bar",
    "a".repeat(238),
    "host.io:0/x",
    "host.io:65536/x",
    "[abc]/x",
    "a_b.c/x",
    "f".repeat(64),
    "nginx@md5:" + "a".repeat(32),
    "nginx@sha256:" + "A".repeat(64),
  ]) {
    assert.equal(expectedReference(input), undefined, input);
    assert.equal(parseImageReference(input).ok, false, input);
  }
  // Where the grammar alone accepts what the project refuses (documented narrowings).
  for (const input of ["Foo/bar", "host.io:0/x", "[abc]/x", "nginx@md5:" + "a".repeat(32), "a_b.c/x"]) assert.ok(REFERENCE_GRAMMAR.test(input), input);
});
