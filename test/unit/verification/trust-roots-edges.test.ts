// The embedded public-good root: where it says it came from (reported wherever a trust root's origin is shown), and
// seeds without it refused by code.
import assert from "node:assert/strict";
import { test } from "node:test";
import { embeddedTrustedRootJson, publicGoodTrustRoot, seededTrustedRootJson, trustRootNamed } from "../../../src/verification/trust-roots.ts";

test("the embedded public-good root names its origin, and a loaded root of another name does not hide it", () => {
  const root = publicGoodTrustRoot();
  assert.deepEqual(root.source, { origin: "embedded (@sigstore/tuf seeds)" });
  assert.equal(trustRootNamed(new Map([["corp", { ...root, name: "corp", source: { origin: "corp.yaml" } }]]), "sigstore-public-good"), root);
});

test("the public-good root is read from the seeds; seeds without it are refused by code, naming the package", () => {
  const seeds = { "https://tuf-repo-cdn.sigstore.dev": { targets: { "trusted_root.json": Buffer.from('{"a":1}').toString("base64") } } };
  assert.deepEqual(seededTrustedRootJson(seeds), { a: 1 });
  assert.equal((embeddedTrustedRootJson() as { mediaType?: string }).mediaType?.startsWith("application/vnd.dev.sigstore.trustedroot"), true);
  for (const damaged of [{}, { "https://tuf-repo-cdn.sigstore.dev": {} }, { "https://tuf-repo-cdn.sigstore.dev": { targets: {} } }])
    assert.throws(() => seededTrustedRootJson(damaged), {
      name: "EmbeddedTrustRootError",
      code: "missing-seed",
      message: "@sigstore/tuf ships no trusted_root.json seed: reinstall the package",
    });
});
