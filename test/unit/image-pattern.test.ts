import { test } from "node:test";
import assert from "node:assert/strict";
import type { ImagePattern } from "../../src/core/image-pattern.ts";
import { compileImagePattern } from "../../src/core/image-pattern.ts";
import { parseImageReference } from "../../src/core/image-reference.ts";

const D1 = "sha256:" + "1".repeat(64);
const D2 = "sha256:" + "2".repeat(64);
const D512 = "sha512:" + "f".repeat(128);

function compile(source: string): ImagePattern {
  const result = compileImagePattern(source);
  assert.ok(result.ok, `${source}: ${result.ok ? "" : result.error}`);
  return result.pattern;
}

function matches(pattern: string, image: string): boolean {
  const parsed = parseImageReference(image);
  assert.ok(parsed.ok, `${image}: ${parsed.ok ? "" : parsed.error}`);
  return compile(pattern).test(parsed.ref);
}

/** pattern → images it must match, images it must not. */
const cases: { pattern: string; yes: string[]; no: string[] }[] = [
  // "*": everything.
  { pattern: "*", yes: ["nginx", "quay.io/x/y@" + D1, "[::1]:5000/a:b", "localhost/x"], no: [] },

  // Reference, no tag or digest: any tag or digest of that repository, after normalization.
  {
    pattern: "nginx",
    yes: ["nginx", "docker.io/library/nginx:1.25", "nginx@" + D1, "index.docker.io/nginx:1@" + D2, "library/nginx:latest"],
    no: ["nginx-unprivileged", "org/nginx", "quay.io/library/nginx", "registry-1.docker.io/nginx", "library/nginx/sub"],
  },
  { pattern: "docker.io/library/nginx", yes: ["nginx:1"], no: ["nginxx"] },
  { pattern: "myorg/app", yes: ["docker.io/myorg/app:3"], no: ["myorg/app2", "myorg/app/sub", "quay.io/myorg/app"] },
  { pattern: "Registry.Example.com:5000/app", yes: ["registry.example.com:5000/app:1", "REGISTRY.example.com:5000/app"], no: ["registry.example.com/app"] },
  { pattern: "[::1]:5000/x", yes: ["[::1]:5000/x:1"], no: ["[::2]:5000/x"] },

  // Reference with a tag: the image's effective tag (explicit, or "latest" without tag and digest).
  { pattern: "nginx:1.25", yes: ["nginx:1.25", "docker.io/library/nginx:1.25@" + D1], no: ["nginx:1.26", "nginx", "nginx@" + D1, "org/nginx:1.25"] },
  { pattern: "nginx:latest", yes: ["nginx", "nginx:latest", "nginx:latest@" + D1], no: ["nginx@" + D1, "nginx:1"] },
  { pattern: "nginx:V1", yes: ["nginx:V1"], no: ["nginx:v1"] },

  // Reference with a digest (and possibly a tag): the digest must equal, and the tag if given.
  { pattern: "nginx@" + D1, yes: ["nginx@" + D1, "nginx:1.25@" + D1], no: ["nginx@" + D2, "nginx:1.25", "org/nginx@" + D1] },
  { pattern: "nginx:1@" + D1, yes: ["nginx:1@" + D1], no: ["nginx@" + D1, "nginx:2@" + D1, "nginx:1@" + D2, "nginx:1"] },

  // Digest only: any image with that digest, anywhere.
  { pattern: D1, yes: ["nginx@" + D1, "quay.io/x/y:1@" + D1, "localhost:5000/z@" + D1], no: ["nginx@" + D2, "nginx", "nginx:" + "1".repeat(64)] },
  { pattern: "@" + D1, yes: ["quay.io/x/y@" + D1], no: ["quay.io/x/y@" + D2] },
  { pattern: D512, yes: ["a/b@" + D512], no: ["a/b@" + D1] },

  // Globs against fullName().
  // The whole fullName must match, so a pinned "nginx:latest@sha256:…" does not end in ":latest".
  { pattern: "*:latest", yes: ["nginx", "quay.io/x/y:latest"], no: ["nginx:1", "nginx@" + D1, "nginx:latest@" + D1] },
  { pattern: "*:latest*", yes: ["nginx", "nginx:latest@" + D1], no: ["nginx:1@" + D1] },
  { pattern: "*@sha256:*", yes: ["nginx@" + D1, "quay.io/x/y:1@" + D2], no: ["nginx", "nginx:1", "nginx@" + D512] },
  { pattern: "*@" + D1, yes: ["a@" + D1, "quay.io/b:2@" + D1], no: ["a@" + D2] },
  {
    pattern: "registry.example.com/*",
    yes: ["registry.example.com/x", "registry.example.com/a/b:1@" + D1, "Registry.Example.com/x"],
    // The "/" after the host is literal: a longer host name, a port or another registry cannot match.
    no: ["registry.example.com.evil.io/x", "registry.example.com:5000/x", "evil.io/registry.example.com/x", "registry.example.co/x", "registry-example.com/x"],
  },
  { pattern: "registry.example.com:5000/*", yes: ["registry.example.com:5000/x"], no: ["registry.example.com/x", "registry.example.com:50000/x"] },
  { pattern: "index.docker.io/*", yes: ["nginx", "org/app:1", "docker.io/x/y"], no: ["quay.io/x", "registry-1.docker.io/x"] },
  { pattern: "docker.io/*", yes: ["nginx", "org/app:1"], no: ["quay.io/x", "localhost/docker.io/x"] },
  { pattern: "localhost/*", yes: ["localhost/x:1"], no: ["localhost:5000/x", "docker.io/library/localhost"] },
  { pattern: "localhost:*/*", yes: ["localhost:5000/x", "localhost:1/a/b"], no: ["localhost/x", "localhost.evil.io/x"] },
  // No registry: normalized to docker.io, single names to library/.
  { pattern: "myorg/*", yes: ["myorg/app", "docker.io/myorg/a/b:1"], no: ["quay.io/myorg/app", "myorg2/app", "library/myorg"] },
  { pattern: "nginx:*", yes: ["nginx", "nginx:1.25", "nginx:1@" + D1], no: ["nginx@" + D1, "org/nginx:1", "nginx-x:1"] },
  { pattern: "nginx*", yes: ["nginx", "nginx-unprivileged:1", "nginx@" + D1], no: ["org/nginx", "myorg/nginx:1"] },
  { pattern: "nginx*@sha256:*", yes: ["nginx@" + D1, "nginx:1@" + D1], no: ["nginx:1"] },
  { pattern: "nginx@sha256:*", yes: ["nginx@" + D1], no: ["nginx:1@" + D1, "nginx"] },
  { pattern: "docker.io/nginx:1.*", yes: ["nginx:1.25", "nginx:1.x"], no: ["nginx:1", "nginx:2.1", "org/nginx:1.2"] },
  { pattern: "*/nginx:*", yes: ["nginx:1", "quay.io/nginx:1", "quay.io/a/nginx"], no: ["nginx-x:1", "quay.io/a/b"] },
  // "?" is exactly one character, "/" included.
  { pattern: "nginx:1.2?", yes: ["nginx:1.25", "nginx:1.2x"], no: ["nginx:1.2", "nginx:1.255"] },
  { pattern: "quay.io/a?b:*", yes: ["quay.io/a/b:1", "quay.io/a-b:1", "quay.io/a.b:1"], no: ["quay.io/ab:1", "quay.io/a--b:1"] },
  // Characters that mean something in a regex are literal.
  { pattern: "a.b.io/x:*", yes: ["a.b.io/x:1"], no: ["axb.io/x:1", "a.bxio/x:1"] },
  { pattern: "[::1]:5000/*", yes: ["[::1]:5000/x"], no: ["[::2]:5000/x", "::1:5000/x".replace("::1", "localhost")] },
  { pattern: "gcr.io/*-prod/*", yes: ["gcr.io/team-prod/app:1"], no: ["gcr.io/team-dev/app:1", "gcr.io/team-prod"] },
  { pattern: "*a*a*a*a*a*a*a*a*b*", yes: ["quay.io/aaaaaaaab", "a/a/a/a/a/a/a/ab:1"], no: ["quay.io/" + "a".repeat(200), "a/a/a/a/a/a/ab:1"] },
  // Pieces must not overlap: the last one is placed after the middle ones.
  { pattern: "*ab*ba", yes: ["aba/x:ba"], no: [] },
  { pattern: "nginx:*1*1", yes: ["nginx:11", "nginx:1x1"], no: ["nginx:1"] },
];

for (const { pattern, yes, no } of cases) {
  test(`pattern ${JSON.stringify(pattern)}`, () => {
    for (const image of yes) assert.equal(matches(pattern, image), true, `${pattern} should match ${image}`);
    for (const image of no) assert.equal(matches(pattern, image), false, `${pattern} should not match ${image}`);
  });
}

test("a compiled pattern keeps its source as written", () => {
  assert.equal(compile("myorg/*").source, "myorg/*");
  assert.equal(compile("nginx").source, "nginx");
});

test("many stars do not backtrack exponentially", () => {
  // A single ".*"-per-star regex takes seconds on this; the piecewise matcher is linear-ish.
  const ref = parseImageReference("quay.io/" + "a".repeat(240));
  assert.ok(ref.ok);
  const pattern = compile("*a*a*a*a*a*a*a*a*a*a*a*a*b");
  assert.equal(pattern.test(ref.ref), false);
});

test("rejects invalid patterns with an error that names the pattern", () => {
  const cases: [string, string][] = [
    ["", "must not be empty"],
    [" nginx", "whitespace"],
    ["nginx *", "whitespace"],
    ["Nginx", "repository name must be lowercase"],
    ["nginx:", 'ends with ":" but has no tag'],
    ["a//b", "empty component"],
    ["nginx@sha256:abc", "must have 64 hex characters, not 3"],
    ["sha256:abc", "must have 64 hex characters, not 3"],
    ["@sha256:" + "A".repeat(64), "lowercase hexadecimal"],
    ["@md5:abc", 'unsupported digest algorithm "md5"'],
    ["@", "algorithm:hex"],
    ["@sha256:*", 'needs a name before "@"'],
    ["nginx:%*", 'contains "%"'],
    ["quay.io/(a|b)/*", 'contains "("'],
    ["*@sha256:*@*", 'more than one "@"'],
  ];
  for (const [source, fragment] of cases) {
    const result = compileImagePattern(source);
    assert.equal(result.ok, false, `${JSON.stringify(source)} should be rejected`);
    if (result.ok) continue;
    assert.ok(result.error.startsWith(`invalid image pattern ${JSON.stringify(source)}: `), result.error);
    assert.ok(result.error.includes(fragment), `${JSON.stringify(source)}: ${result.error} should mention ${fragment}`);
  }
  assert.deepEqual(compileImagePattern("Nginx"), { ok: false, error: 'invalid image pattern "Nginx": repository name must be lowercase' });
  assert.deepEqual(compileImagePattern(42 as unknown as string), { ok: false, error: 'invalid image pattern "42": must be a string' });
});
