// Image policies from inline YAML for the unit tests, through the real loader; a document that fails to load
// fails the test with the loader's errors.
import assert from "node:assert/strict";
import type { ImagePolicy } from "../../src/core/image-policy/image-policy.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";

export function imagePolicies(yaml: string): ImagePolicy[] {
  const { policies, errors } = parsePolicyText(yaml, "inline.yaml");
  assert.deepEqual(errors, []);
  return [...policies.ImagePolicy];
}
