// The policies the tests and the benchmark of verification at pull time judge by: the trust root of a mock
// Sigstore (test/support/signer/mock-sigstore.ts) and an ImagePolicy that allows images only when signed by one
// key, logged in that mock's Rekor; written as a policy folder, or applied as custom resources.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "yaml";
import type { SigningKey } from "./signer/keys.ts";
import type { MockSigstore } from "./signer/mock-sigstore.ts";

/** The name of the TrustRoot, and of the ImagePolicy's one key entry. */
export const NODE_TRUST_ROOT = "node";
export const NODE_SIGNED_POLICY = "signed-at-the-node";

/** The TrustRoot: in a folder, its trusted_root.json beside the policies (`path`); as a resource, inline. */
export function nodeTrustRoot(sigstore: MockSigstore, where: "folder" | "resource"): Record<string, unknown> {
  const spec = where === "folder" ? { path: "root.json" } : { trustedRoot: sigstore.trustedRoot };
  return { apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", metadata: { name: NODE_TRUST_ROOT }, spec };
}

/** An ImagePolicy: `images` are allowed when signed by `key`, everything else denied. */
export function signedOnlyPolicy(images: string[], key: SigningKey): Record<string, unknown> {
  return {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: NODE_SIGNED_POLICY },
    spec: {
      rules: [
        { action: "allow", images, attestors: [{ entries: [{ staticKey: { name: "release.pub", key: key.publicKeyPem, trustRoot: NODE_TRUST_ROOT } }] }] },
      ],
      default: "deny",
    },
  };
}

/** Documents as one multi-document YAML text. */
export function yamlDocuments(documents: readonly Record<string, unknown>[]): string {
  return documents.map((d) => stringify(d)).join("---\n");
}

/** A policy folder (created): the mock's trusted_root.json, and the trust root, the signed-only policy and `extra`. */
export async function writeSignedOnlyFolder(
  folder: string,
  o: { sigstore: MockSigstore; key: SigningKey; images: string[]; extra?: Record<string, unknown>[] },
): Promise<string> {
  await mkdir(folder, { recursive: true });
  await writeFile(join(folder, "root.json"), JSON.stringify(o.sigstore.trustedRoot));
  await writeFile(join(folder, "policies.yaml"), yamlDocuments([nodeTrustRoot(o.sigstore, "folder"), signedOnlyPolicy(o.images, o.key), ...(o.extra ?? [])]));
  return folder;
}
