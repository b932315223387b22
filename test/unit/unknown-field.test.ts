// Unknown fields in Imprimatur's own kinds are reported with file:line and, when one known field is close, the
// field the user most likely meant.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closestField, unknownFieldMessage } from "../../src/core/primitives/unknown-field.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { renderPolicyError } from "../../src/policy/policy-error.ts";
import { loadServerConfig } from "../../src/config/server-config.ts";

test("the one close known field, or none", () => {
  const known = ["images", "action", "attestors", "digestVerify", "digestMutate"];
  assert.equal(closestField("imagess", known), "images");
  assert.equal(closestField("Images", known), "images", "case aside");
  assert.equal(closestField("actoin", known), "action", "a transposition is one edit");
  assert.equal(closestField("atestors", known), "attestors");
  assert.equal(closestField("digestVerfy", known), "digestVerify");
  assert.equal(closestField("digest", known), undefined, "too far from both");
  assert.equal(closestField("digestMutat", ["digestMutate", "digestMutant"]), undefined, "two equally close: no guess");
  assert.equal(closestField("imagess", ["images", "imageset"]), "images", "the closer of two near ones");
  assert.equal(closestField("colour", known), undefined);
  assert.equal(closestField("ab", ["ac", "bb"]), undefined);
  assert.equal(closestField("colour", ["images"]), undefined, "the only known field, but far");
  assert.equal(closestField("colour", []), undefined);
  assert.equal(closestField("IMAGE", ["image", "Image"]), undefined, "two the same but case: no guess");
  // One edit below six letters, two from six on.
  assert.equal(closestField("imgs", ["images"]), undefined);
  assert.equal(closestField("axtiom", ["action"]), "action");
  assert.equal(closestField("atestor", ["attestors"]), "attestors");
  // A transposition of neighbours is one edit; letters that only look swapped are not.
  assert.equal(closestField("imgae", ["image"]), "image");
  assert.equal(closestField("mgae", ["image"]), undefined, "a deletion and a transposition are two edits");
  assert.equal(closestField("ax", ["ya"]), undefined);
  assert.equal(closestField("ab", ["bc"]), undefined);
  assert.equal(closestField("abcd", ["bacd"]), "bacd");
  assert.equal(closestField("abdc", ["abcd"]), "abcd");
  assert.equal(closestField("bxca", ["abc"]), undefined);
  assert.equal(unknownFieldMessage("imagess", known), 'unknown field "imagess"; did you mean "images"?');
  assert.equal(unknownFieldMessage("colour", known), 'unknown field "colour"');
});

const policyErrors = (text: string) => parsePolicyText(text, "p.yaml").errors.map(renderPolicyError);

test("ImagePolicy: the schema's unknown field names its line and the field meant", () => {
  const text = [
    "apiVersion: imprimatur.dev/v1alpha1",
    "kind: ImagePolicy",
    "metadata: {name: p}",
    "spec:",
    "  rules:",
    "    - action: permit",
    "      imagess: [nginx]",
    "  colour: blue",
    "",
  ].join("\n");
  const errors = policyErrors(text);
  assert.ok(errors.includes('p.yaml:7 (document 1, spec.rules[0].imagess): unknown field "imagess"; did you mean "images"?'), errors.join("\n"));
  assert.ok(errors.includes('p.yaml:8 (document 1, spec.colour): unknown field "colour"'), errors.join("\n"));
});

test("TrustRoot and PodRestriction: the field meant", () => {
  const trustRoot = policyErrors("apiVersion: imprimatur.dev/v1alpha1\nkind: TrustRoot\nmetadata: {name: r}\nspec:\n  pathh: root.json\n  path: root.json\n");
  assert.ok(trustRoot.includes('p.yaml:5 (document 1, spec.pathh): unknown field "pathh"; did you mean "path"?'), trustRoot.join("\n"));
  const podRestriction = policyErrors(
    ["apiVersion: imprimatur.dev/v1alpha1", "kind: PodRestriction", "metadata: {name: r}", "spec:", "  spec:", "    contaners: []", ""].join("\n"),
  );
  assert.ok(
    podRestriction.some((e) =>
      /^p\.yaml:6 \(document 1, spec\.spec\.contaners\): unknown field "contaners"; known fields: .*containers.*; did you mean "containers"\?$/.test(e),
    ),
    podRestriction.join("\n"),
  );
});

test("configuration files: file:line (field): unknown field; did you mean", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-unknown-field-"));
  try {
    const file = join(dir, "config.yaml");
    await writeFile(file, "apiVersion: imprimatur.dev/v1alpha1\nkind: ServerConfig\ncache:\n  allowTtl: 1m\n  surprise: 1\n");
    await assert.rejects(loadServerConfig(file), (e: Error) => {
      assert.equal(e.message, `${file}:4 (cache.allowTtl): unknown field; did you mean "allowTTL"?\n${file}:5 (cache.surprise): unknown field`);
      return true;
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
