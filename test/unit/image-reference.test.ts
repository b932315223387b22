import { test } from "node:test";
import assert from "node:assert/strict";
import type { ImageReference } from "../../src/core/image-reference.ts";
import {
  canonicalRegistryHost,
  DOCKER_HUB,
  DOCKER_HUB_API_HOST,
  DOCKER_HUB_LEGACY_HOST,
  familiarName,
  fullName,
  parseImageReference,
  parseImageReferenceCached,
  registryApiHost,
  repositoryName,
} from "../../src/core/image-reference.ts";

const SHA256 = "sha256:" + "a".repeat(64);
const SHA512 = "sha512:" + "0123456789abcdef".repeat(8);

function parse(input: string): ImageReference {
  const result = parseImageReference(input);
  assert.ok(result.ok, `${input}: ${result.ok ? "" : result.error}`);
  return result.ref;
}

test("normalizes references like docker does", () => {
  const cases: [string, ImageReference][] = [
    ["nginx", { registry: "docker.io", repository: "library/nginx" }],
    ["library/nginx", { registry: "docker.io", repository: "library/nginx" }],
    ["docker.io/nginx", { registry: "docker.io", repository: "library/nginx" }],
    ["docker.io/library/nginx", { registry: "docker.io", repository: "library/nginx" }],
    ["index.docker.io/library/nginx", { registry: "docker.io", repository: "library/nginx" }],
    ["index.docker.io/nginx", { registry: "docker.io", repository: "library/nginx" }],
    // Only index.docker.io is an alias; registry-1.docker.io is an ordinary host (no "library/").
    ["registry-1.docker.io/nginx", { registry: "registry-1.docker.io", repository: "nginx" }],
    ["nginx:1.25", { registry: "docker.io", repository: "library/nginx", tag: "1.25" }],
    ["user/repo", { registry: "docker.io", repository: "user/repo" }],
    ["user/repo:v1", { registry: "docker.io", repository: "user/repo", tag: "v1" }],
    ["org/team/app", { registry: "docker.io", repository: "org/team/app" }],
    ["localhost/x", { registry: "localhost", repository: "x" }],
    ["localhost:5000/x", { registry: "localhost:5000", repository: "x" }],
    // No "/": never a registry, so the ":5000" is a tag, as in docker.
    ["localhost:5000", { registry: "docker.io", repository: "library/localhost", tag: "5000" }],
    ["localhost", { registry: "docker.io", repository: "library/localhost" }],
    ["host:5000/a/b:tag@" + SHA256, { registry: "host:5000", repository: "a/b", tag: "tag", digest: SHA256 }],
    ["[::1]:5000/x", { registry: "[::1]:5000", repository: "x" }],
    ["[2001:db8::1]/team/app:2", { registry: "[2001:db8::1]", repository: "team/app", tag: "2" }],
    ["127.0.0.1:5000/x", { registry: "127.0.0.1:5000", repository: "x" }],
    ["127.0.0.1/x", { registry: "127.0.0.1", repository: "x" }],
    ["quay.io/x/y@" + SHA256, { registry: "quay.io", repository: "x/y", digest: SHA256 }],
    ["nginx@" + SHA512, { registry: "docker.io", repository: "library/nginx", digest: SHA512 }],
    ["gcr.io/a/b:V1.0_rc-1", { registry: "gcr.io", repository: "a/b", tag: "V1.0_rc-1" }],
    // Host names are case-insensitive: normalized to lowercase so policies cannot be dodged.
    ["Registry.Example.COM:443/app", { registry: "registry.example.com:443", repository: "app" }],
    ["a.b-c.d/x", { registry: "a.b-c.d", repository: "x" }],
    // Path separators: ".", "_", "__", runs of "-".
    ["org/a.b_c__d---e", { registry: "docker.io", repository: "org/a.b_c__d---e" }],
    ["nginx:_x", { registry: "docker.io", repository: "library/nginx", tag: "_x" }],
  ];
  for (const [input, expected] of cases) {
    assert.deepEqual(parse(input), expected, input);
  }
});

test("fullName, familiarName and repositoryName", () => {
  const cases: { input: string; full: string; familiar: string; repository: string }[] = [
    { input: "nginx", full: "docker.io/library/nginx:latest", familiar: "nginx:latest", repository: "docker.io/library/nginx" },
    { input: "docker.io/library/nginx:1.25", full: "docker.io/library/nginx:1.25", familiar: "nginx:1.25", repository: "docker.io/library/nginx" },
    { input: "org/app:1", full: "docker.io/org/app:1", familiar: "org/app:1", repository: "docker.io/org/app" },
    // library/ stays when more than one component follows it, or it would re-parse as docker.io/a/b.
    { input: "library/a/b", full: "docker.io/library/a/b:latest", familiar: "library/a/b:latest", repository: "docker.io/library/a/b" },
    { input: "quay.io/x/y@" + SHA256, full: "quay.io/x/y@" + SHA256, familiar: "quay.io/x/y@" + SHA256, repository: "quay.io/x/y" },
    { input: "nginx@" + SHA256, full: "docker.io/library/nginx@" + SHA256, familiar: "nginx@" + SHA256, repository: "docker.io/library/nginx" },
    { input: "nginx:1@" + SHA256, full: "docker.io/library/nginx:1@" + SHA256, familiar: "nginx:1@" + SHA256, repository: "docker.io/library/nginx" },
    { input: "localhost:5000/x", full: "localhost:5000/x:latest", familiar: "localhost:5000/x:latest", repository: "localhost:5000/x" },
    { input: "localhost/x", full: "localhost/x:latest", familiar: "localhost/x:latest", repository: "localhost/x" },
    { input: "[::1]:5000/x:2", full: "[::1]:5000/x:2", familiar: "[::1]:5000/x:2", repository: "[::1]:5000/x" },
    {
      input: "registry-1.docker.io/nginx",
      full: "registry-1.docker.io/nginx:latest",
      familiar: "registry-1.docker.io/nginx:latest",
      repository: "registry-1.docker.io/nginx",
    },
  ];
  for (const c of cases) {
    const ref = parse(c.input);
    assert.equal(fullName(ref), c.full, c.input);
    assert.equal(familiarName(ref), c.familiar, c.input);
    assert.equal(repositoryName(ref), c.repository, c.input);
    // Both renderings parse back to the same image (with the implicit tag made explicit).
    const explicit = parse(c.full);
    assert.deepEqual(parse(c.familiar), explicit, `${c.input} familiar round trip`);
    assert.equal(fullName(explicit), c.full, `${c.input} full round trip`);
  }
});

test("rejects invalid references with a clear error that quotes the input", () => {
  const longName = "a".repeat(250); // docker.io/library/ + 250 > 255
  const cases: [string, string][] = [
    ["", "must not be empty"],
    [" ", "whitespace"],
    ["nginx ", "whitespace"],
    ["ng inx", "whitespace"],
    ["nginx\t", "whitespace"],
    ["nginx\n", "whitespace"],
    ["Nginx", "repository name must be lowercase"],
    ["org/App:1", "repository name must be lowercase"],
    ["Foo/bar", "repository name must be lowercase"],
    ["quay.io/Org/app", "repository name must be lowercase"],
    ["nginx@sha256:" + "a".repeat(63), "sha256 digest must have 64 hex characters, not 63"],
    ["nginx@sha256:" + "a".repeat(65), "sha256 digest must have 64 hex characters, not 65"],
    ["nginx@sha512:" + "a".repeat(64), "sha512 digest must have 128 hex characters, not 64"],
    ["nginx@sha256:" + "A".repeat(64), "lowercase hexadecimal"],
    ["nginx@sha256:" + "g".repeat(64), "lowercase hexadecimal"],
    ["nginx@md5:" + "a".repeat(32), 'unsupported digest algorithm "md5"'],
    ["nginx@SHA256:" + "a".repeat(64), 'unsupported digest algorithm "SHA256"'],
    ["nginx@constructor:" + "a".repeat(64), 'unsupported digest algorithm "constructor"'],
    ["nginx@" + "a".repeat(64), "algorithm:hex"],
    ["nginx@:" + "a".repeat(64), "algorithm:hex"],
    ["nginx@" + SHA256 + "@" + SHA256, 'more than one "@"'],
    ["@" + SHA256, 'no repository name before "@"'],
    ["nginx::latest", 'more than one ":"'],
    ["nginx:1:2", 'more than one ":"'],
    ["localhost:5000/a:b:c", 'more than one ":"'],
    ["nginx:", 'ends with ":" but has no tag'],
    ["localhost:5000/x:", 'ends with ":" but has no tag'],
    ["nginx@", 'ends with "@" but has no digest'],
    ["nginx:latest@", 'ends with "@" but has no digest'],
    ["nginx:@" + SHA256, 'empty tag before "@"'],
    [longName, "repository name (with registry) is 268 characters long; the limit is 255"],
    ["quay.io/" + "a".repeat(248), "is 256 characters long"],
    ["nginx:" + "a".repeat(129), "tag is 129 characters long; the limit is 128"],
    ["nginx:.hidden", 'tag ".hidden" must start with a letter, digit or "_"'],
    ["nginx:-x", "must start with a letter"],
    ["nginx:a+b", "may contain only letters"],
    ["a//b", "empty component"],
    ["/nginx", "empty component"],
    ["nginx/", "empty component"],
    ["quay.io//x", "empty component"],
    ["localhost/", "no repository path after the registry"],
    [":latest", "no repository name"],
    ["-nginx", 'component "-nginx" must start and end with a lowercase letter or digit'],
    ["nginx-", "must start and end"],
    ["org/_app", "must start and end"],
    ["a..b", "invalid separator"],
    ["a___b", "invalid separator"],
    ["a._b", "invalid separator"],
    ["a-.b", "invalid separator"],
    ["ngi%nx", 'contains "%"'],
    ["nginx!", 'contains "!"'],
    ["ngïnx", 'contains "ï"'],
    ["a".repeat(64).replace(/^a/, "f"), "image ID"],
    ["-bad.io/x", 'registry host "-bad.io" is not a valid host name'],
    ["bad_host.io/x", "not a valid host name"],
    ["a..b.io/x", "not a valid host name"],
    ["host.io:/x", 'registry port "" must be a number'],
    ["host.io:http/x", 'registry port "http" must be a number'],
    ["host.io:70000/x", 'registry port "70000" must be a number from 1 to 65535'],
    ["host.io:0/x", "from 1 to 65535"],
    ["[::1/x", "bracketed IPv6"],
    ["[zz]:5000/x", "bracketed IPv6"],
    ["[::1]5000/x", "not a port"],
  ];
  for (const [input, fragment] of cases) {
    const result = parseImageReference(input);
    assert.equal(result.ok, false, `${JSON.stringify(input)} should be rejected`);
    if (result.ok) continue;
    assert.ok(result.error.startsWith(`invalid image reference ${JSON.stringify(input)}: `), result.error);
    assert.ok(result.error.includes(fragment), `${JSON.stringify(input)}: ${result.error} should mention ${fragment}`);
  }
});

test("the exact wording of an error", () => {
  assert.deepEqual(parseImageReference("Nginx"), { ok: false, error: 'invalid image reference "Nginx": repository name must be lowercase' });
  assert.deepEqual(parseImageReference(""), { ok: false, error: 'invalid image reference "": must not be empty' });
});

test("accepts names and tags at the length limits", () => {
  // docker.io/library/ is 18 characters, leaving 237 for the name.
  assert.equal(parse("a".repeat(237)).repository, "library/" + "a".repeat(237));
  assert.equal(parse("nginx:" + "a".repeat(128)).tag, "a".repeat(128));
  assert.equal(parse("quay.io/" + "a".repeat(247)).repository, "a".repeat(247));
});

test("never throws, even on input that is not a string", () => {
  for (const input of [undefined, null, 42, {}, [], "\u0000", "a".repeat(100_000)]) {
    const result = parseImageReference(input as string);
    assert.equal(result.ok, false);
  }
});

test("familiarName keeps docker.io/ when the short form would read as another registry", () => {
  // The grammar reads a first component with "." or ":", or "localhost", as a registry: "a.b/c" is on host
  // a.b. Docker Hub images under such a namespace must stay on Docker Hub when their short form is parsed.
  for (const input of ["docker.io/a.b/c:1", "docker.io/localhost/x", "index.docker.io/my.org/app@" + SHA256]) {
    const ref = parse(input);
    assert.equal(ref.registry, DOCKER_HUB, input);
    // The short form names the same image, with the implicit tag made explicit as in the full name.
    assert.deepEqual(parse(familiarName(ref)), parse(fullName(ref)), `${input} familiar round trip`);
  }
});

test("a value that is not a string is quoted by its type, not by its string form", () => {
  const refused = (shown: string) => ({ ok: false, error: `invalid image reference ${JSON.stringify(shown)}: must be a string` });
  assert.deepEqual(parseImageReference(null as unknown as string), refused("null"));
  assert.deepEqual(parseImageReference(undefined as unknown as string), refused("undefined"));
  // String() of an array would show "nginx", which reads like a valid reference.
  assert.deepEqual(parseImageReference(["nginx"] as unknown as string), refused("[object Array]"));
  // An object without a prototype has no string form: String() of it throws.
  assert.deepEqual(parseImageReference(Object.create(null) as string), refused("[object Object]"));
  // String() of a deeply nested array recurses through every level and overflows the stack.
  let deep: unknown[] = [];
  for (let i = 0; i < 100_000; i++) deep = [deep];
  assert.deepEqual(parseImageReference(deep as unknown as string), refused("[object Array]"));
});

test("Docker Hub's three names: docker.io in references, index.docker.io as its legacy alias, registry-1.docker.io for its API", () => {
  assert.equal(canonicalRegistryHost("Index.Docker.IO"), DOCKER_HUB);
  assert.equal(canonicalRegistryHost("Registry.Example.com:5000"), "registry.example.com:5000");
  assert.equal(canonicalRegistryHost(DOCKER_HUB_API_HOST), DOCKER_HUB_API_HOST); // a host of its own, not an alias
  assert.equal(registryApiHost(DOCKER_HUB), DOCKER_HUB_API_HOST);
  assert.equal(registryApiHost("quay.io"), "quay.io");
  assert.equal(DOCKER_HUB_LEGACY_HOST, "index.docker.io");
});

test("registry hosts and ports are read as containerd reads them: bracketed IPv6, ports 1 to 65535 in decimal", () => {
  assert.equal(parse("[2001:db8::1234]:5000/app").registry, "[2001:db8::1234]:5000");
  assert.equal(parse("[fe80::12]:5000/app").registry, "[fe80::12]:5000");
  assert.equal(parse("host.io:65535/x").registry, "host.io:65535");
  assert.equal(parse("host.io:1/x").registry, "host.io:1");
  for (const [input, error] of [
    ["[::1/x", 'registry host "[::1" is not a bracketed IPv6 address like [::1]'],
    ["[x[::1]:5000/x", 'registry host "[x[::1]" is not a bracketed IPv6 address like [::1]'],
    [":5000/x", 'registry host "" is not a valid host name or IP address'],
    ["host.io:1e3/x", 'registry port "1e3" must be a number from 1 to 65535'],
    ["host.io:0x50/x", 'registry port "0x50" must be a number from 1 to 65535'],
    ["host.io:80.5/x", 'registry port "80.5" must be a number from 1 to 65535'],
    ["host.io:65536/x", 'registry port "65536" must be a number from 1 to 65535'],
  ]) {
    assert.deepEqual(parseImageReference(input!), { ok: false, error: `invalid image reference ${JSON.stringify(input)}: ${error}` });
  }
  assert.deepEqual(parseImageReference(42 as unknown as string), { ok: false, error: 'invalid image reference "42": must be a string' });
  assert.equal(DOCKER_HUB_API_HOST, "registry-1.docker.io");
});

test("parseImageReferenceCached gives parseImageReference's result, parsing a reference again only after the cache is cleared", () => {
  const nginx = parseImageReferenceCached("nginx:1");
  assert.deepEqual(nginx, parseImageReference("nginx:1"));
  assert.deepEqual(parseImageReferenceCached("Nginx"), parseImageReference("Nginx"));
  assert.equal(parseImageReferenceCached("nginx:1"), nginx, "the second look-up is the cached result");
  // A stream of distinct references clears the bounded cache; what is parsed afterwards is still right.
  for (let i = 0; i < 5_000; i++) assert.ok(parseImageReferenceCached(`app-${i}:1`).ok);
  assert.deepEqual(parseImageReferenceCached("nginx:1"), nginx);
});
