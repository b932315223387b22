// The policy folder the node tests judge Notary Project signatures by (test/e2e/node-verify-cri.test.ts): an
// ImagePolicy whose rules ask for a `notary` entry, alone or counted with a cosign key (count: 2), as users write it
// for `imprimatur node-proxy --policies`. The key entry is logged in a mock Sigstore's Rekor, whose trust root goes
// in the folder as test/support/node-signing-policies.ts writes it.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { NODE_TRUST_ROOT, nodeTrustRoot, yamlDocuments } from "../node-signing-policies.ts";
import type { SigningKey } from "../signer/keys.ts";
import type { MockSigstore } from "../signer/mock-sigstore.ts";

export const NODE_NOTATION_POLICY = "notation-at-the-node";

export interface NodeNotationPolicy {
  sigstore: MockSigstore;
  /** The cosign key of the count: 2 rule. */
  key: SigningKey;
  /** The notary entry: its name, the CA certificates (PEM) of its `ca` trust store, its trusted identities. */
  notary: { name: string; certs: string; trustedIdentities: string[] };
  /** rules[0]: images allowed when signed by `key` and by a certificate of the notary entry (count: 2). */
  both: string[];
  /** rules[1]: images allowed when signed by a certificate of the notary entry. Everything else is denied. */
  notaryOnly: string[];
}

/** The ImagePolicy of NodeNotationPolicy. */
export function nodeNotationPolicy(o: Pick<NodeNotationPolicy, "key" | "notary" | "both" | "notaryOnly">): Record<string, unknown> {
  const notary = { notary: o.notary };
  const key = { staticKey: { name: "release.pub", key: o.key.publicKeyPem, trustRoot: NODE_TRUST_ROOT } };
  return {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: NODE_NOTATION_POLICY },
    spec: {
      rules: [
        { action: "allow", images: o.both, attestors: [{ count: 2, entries: [key, notary] }] },
        { action: "allow", images: o.notaryOnly, attestors: [{ entries: [notary] }] },
      ],
      default: "deny",
    },
  };
}

/** A policy folder (created): the mock's trusted_root.json, its TrustRoot, and the ImagePolicy. */
export async function writeNotationFolder(folder: string, o: NodeNotationPolicy): Promise<string> {
  await mkdir(folder, { recursive: true });
  await writeFile(join(folder, "root.json"), JSON.stringify(o.sigstore.trustedRoot));
  await writeFile(join(folder, "policies.yaml"), yamlDocuments([nodeTrustRoot(o.sigstore, "folder"), nodeNotationPolicy(o)]));
  return folder;
}
