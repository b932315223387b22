// Where the embedded public-good root says it came from: reported wherever a trust root's origin is shown.
import assert from "node:assert/strict";
import { test } from "node:test";
import { publicGoodTrustRoot, trustRootNamed } from "../../../src/verification/trust-roots.ts";

test("the embedded public-good root names its origin, and a loaded root of another name does not hide it", () => {
  const root = publicGoodTrustRoot();
  assert.deepEqual(root.source, { origin: "embedded (@sigstore/tuf seeds)" });
  assert.equal(trustRootNamed(new Map([["corp", { ...root, name: "corp", source: { origin: "corp.yaml" } }]]), "sigstore-public-good"), root);
});
