// Image patterns that are valid but would not match what they look like they match are refused at load, with
// what they would match instead (src/core/image-pattern.ts, likelyMistake); their look-alikes that mean what
// they say still load.
import assert from "node:assert/strict";
import { test } from "node:test";
import { compileImagePattern } from "../../src/core/image-pattern.ts";
import { parseImageReference } from "../../src/core/image-reference.ts";

function refusal(pattern: string): string {
  const compiled = compileImagePattern(pattern);
  assert.equal(compiled.ok, false, `${pattern} should be refused`);
  return compiled.ok ? "" : compiled.error;
}

function matches(pattern: string, image: string): boolean {
  const compiled = compileImagePattern(pattern);
  assert.ok(compiled.ok, compiled.ok ? "" : compiled.error);
  const ref = parseImageReference(image);
  assert.ok(ref.ok);
  return compiled.pattern.test(ref.ref);
}

test("a registry written without '/' is refused, naming the Docker Hub image it would be and the pattern to write", () => {
  assert.equal(
    refusal("localhost:*"),
    `invalid image pattern "localhost:*": it has no "/", so it is read as the Docker Hub image docker.io/library/localhost:*, not as a registry; for every image of the registry localhost:* write "localhost:*/*"`,
  );
  assert.match(
    refusal("localhost:5000"),
    /read as the Docker Hub image docker\.io\/library\/localhost:5000, not as a registry; .* write "localhost:5000\/\*"$/,
  );
  assert.match(refusal("registry.example.com"), /write "registry\.example\.com\/\*"$/);
  assert.match(refusal("registry.example.com*"), /docker\.io\/library\/registry\.example\.com\*/);
  assert.match(refusal("*.example.com*"), /also matches "evil\.io\/x\.example\.comx"/);
  // What the refused patterns point to matches what was meant.
  assert.equal(matches("localhost:*/*", "localhost:5000/app:1"), true);
  assert.equal(matches("registry.example.com/*", "registry.example.com/team/app"), true);
});

test("a wildcard in the registry host is refused: '*' also matches '/', so other registries would match", () => {
  assert.equal(
    refusal("*.example.com/*"),
    `invalid image pattern "*.example.com/*": the wildcard in the registry part "*.example.com" also matches "/", so the pattern matches images of other registries ("*.example.com/*" matches "evil.io/x.example.com/x"); list the registries one by one`,
  );
  assert.match(refusal("registry.*.io/app"), /matches "registry\.evil\.io\/x\.io\/app"/);
  assert.match(refusal("registry-?.example.com/*"), /wildcard in the registry part/);
  // The refusal is right: without it the pattern would admit another registry's image.
  assert.equal(matches("*/nginx:*", "evil.io/x.example.com/nginx:1"), true, "a leading '*' alone is every registry, as written");
  // A wildcard port stays inside the host, and a first part that is no host is a Docker Hub namespace.
  assert.equal(matches("localhost:*/*", "localhost.evil.io/x"), false);
  assert.equal(matches("team-*/app:*", "docker.io/team-a/app:1"), true);
});

test('"**" is refused: it means the same as "*" here', () => {
  assert.equal(refusal("**"), `invalid image pattern "**": "**" means the same as "*" here ("*" already matches "/"); write "*"`);
  assert.match(refusal("registry.example.com/**"), /means the same as "\*"/);
});

test("patterns that mean what they look like still load", () => {
  for (const pattern of [
    "*",
    "nginx",
    "nginx:*",
    "nginx*",
    "*:latest",
    "*@sha256:*",
    "myorg/*",
    "registry.example.com/*",
    "registry.example.com:5000/*",
    "[::1]:5000/*",
    "gcr.io/*-prod/*",
    "*/nginx:*",
    "docker.io/nginx:1.*",
  ]) {
    const compiled = compileImagePattern(pattern);
    assert.ok(compiled.ok, `${pattern}: ${compiled.ok ? "" : compiled.error}`);
  }
});

test("a wildcard anywhere in the host but a whole port is refused, and the example fills every wildcard", () => {
  assert.match(refusal("reg*.io:*/app"), /wildcard in the registry part "reg\*\.io:\*"/);
  assert.match(refusal("example.com:*0/app"), /wildcard in the registry part "example\.com:\*0"/);
  assert.match(refusal("*.example.*/app"), /\("\*\.example\.\*\/app" matches "evil\.io\/x\.example\.x\/app"\)/);
  // A leading "/" is an empty path component, not a name without "/".
  assert.match(refusal("/example.com"), /: repository path has an empty component/);
});
