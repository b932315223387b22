// Image policies from inline YAML for the unit tests, through the real loader; a document that fails to load
// fails the test with the loader's errors.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import type { ImagePolicy } from "../../src/core/image-policy/image-policy.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";

export function imagePolicies(yaml: string): ImagePolicy[] {
  const { policies, errors } = parsePolicyText(yaml, "inline.yaml");
  assert.deepEqual(errors, []);
  return [...policies.ImagePolicy];
}

/**
 * An ImagePolicy named `name` that allows `images` only when signed by a fresh P-256 key (one no test holds the
 * private half of): nothing can verify it, so what a test sees is why a signature was not found.
 */
export function freshKeyPolicy(name: string, images: string): string {
  const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const pem = (publicKey.export({ type: "spki", format: "pem" }) as string)
    .trim()
    .split("\n")
    .map((l) => `                  ${l}`)
    .join("\n");
  return `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: ${name}}
spec:
  rules:
    - action: allow
      images: ["${images}"]
      attestors:
        - entries:
            - staticKey:
                key: |
${pem}
  default: deny
`;
}
