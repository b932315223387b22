// What the signature verifier's tests (test/unit/verification/) set it up with: attestors as a policy file writes
// them, loaded as `serve` and `check` load policies (one ImagePolicy "p" whose one rule allows every image); the
// TrustRoot of a mock Sigstore (test/support/signer/mock-sigstore.ts); and a registry client in memory that holds an
// image's cosign `.sig` and `.att` manifests and nothing else (the registry paths themselves are tested against
// docker-registry in test/e2e).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { leafAttestors, type LeafAttestor } from "../../src/core/image-policy/attestors.ts";
import { parseTrustedRoot, type TrustRoot } from "../../src/core/trust-root/trust-root-kind.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { RegistryError } from "../../src/registry/registry-error.ts";
import { attestationTag, ociManifestWithLayers, signatureTag, type SignatureLayer } from "./signer/cosign-signatures.ts";
import type { MockSigstore } from "./signer/mock-sigstore.ts";

/** A keyless signer's identity as GitHub Actions gives it, and the signed image of the verification tests. */
export const KEYLESS_WORKFLOW = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
export const KEYLESS_ISSUER = "https://token.actions.githubusercontent.com";
export const SIGNED_IMAGE_NAME = "registry.example.com/acme/app";
export const SIGNED_MANIFEST = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json", layers: [] }));
export const SIGNED_MANIFEST_HEX = createHash("sha256").update(SIGNED_MANIFEST).digest("hex");
export const SIGNED_MANIFEST_DIGEST = `sha256:${SIGNED_MANIFEST_HEX}`;

/** The loaded rule `{action: allow, images: ["*"], attestors: <attestors>}`, where `attestors` is YAML; fails the test on a load error. */
export function allowRule(attestors: string) {
  const { policies, errors } = parsePolicyText(
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: p}
spec:
  rules:
    - action: allow
      images: ["*"]
      attestors: ${attestors}
`,
    "p.yaml",
  );
  assert.deepEqual(errors, []);
  return policies.ImagePolicy[0]!.rules[0]!;
}

/** The loaded attestors `[{entries: [<entries>]}]`: one set, the entries given as YAML flow mappings separated by commas. */
export function attestorsWith(entries: string) {
  return allowRule(`[{entries: [${entries}]}]`).attestors!;
}

/** One LeafAttestor per entry of `[{entries: [<entries>]}]`. */
export function leafAttestorsWith(entries: string): LeafAttestor[] {
  return leafAttestors(attestorsWith(entries));
}

/** The mock's trusted root as a TrustRoot named `name`; fails the test if it does not parse. */
export function mockTrustRoot(sigstore: MockSigstore, name: string): TrustRoot {
  const parsed = parseTrustedRoot(sigstore.trustedRoot);
  assert.ok(!("error" in parsed), "error" in parsed ? parsed.error : "");
  return { name, sigstore: parsed };
}

/** An image's signature manifests: the `.sig` and `.att` layers (an absent list: no manifest at that tag). */
export interface SignatureManifests {
  sig?: SignatureLayer[];
  att?: SignatureLayer[];
}

export interface SignatureRegistryOptions {
  /** Wait this long before each manifest answer. */
  delayMs?: number;
  /** Rewrite a manifest's bytes (by tag) before it is served; its size follows. */
  rewrite?: (tag: string, body: Buffer) => Buffer;
}

/**
 * A registry client in memory serving the `.sig` and `.att` manifests of the image `digest` and their blobs, either
 * in any repository asked (`anyRepository`) or per repository (`byRepository`). Every other manifest and blob is not
 * found, and no referrers are listed. `calls.manifests` counts the manifest lookups.
 */
export function signatureRegistry(
  digest: string,
  manifests: { anyRepository: SignatureManifests } | { byRepository: Record<string, SignatureManifests> },
  opts: SignatureRegistryOptions = {},
) {
  const built = new Map<string, ReturnType<typeof ociManifestWithLayers>>();
  const blobs = new Map<string, Buffer>();
  const key = (repository: string | undefined, tag: string) => ("anyRepository" in manifests ? tag : `${repository}:${tag}`);
  const repos = "anyRepository" in manifests ? { "": manifests.anyRepository } : manifests.byRepository;
  for (const [repository, layers] of Object.entries(repos)) {
    for (const [tag, list] of [
      [signatureTag(digest), layers.sig],
      [attestationTag(digest), layers.att],
    ] as const) {
      if (!list) continue;
      const manifest = ociManifestWithLayers(list);
      built.set(key(repository, tag), manifest);
      for (const [d, b] of manifest.blobs) blobs.set(d, b);
    }
  }
  const calls = { manifests: 0 };
  return {
    calls,
    client: {
      async getManifest(ref: { repository?: string; tag?: string }) {
        calls.manifests++;
        if (opts.delayMs) await new Promise((r) => setTimeout(r, opts.delayMs));
        const m = ref.tag === undefined ? undefined : built.get(key(ref.repository, ref.tag));
        if (!m) throw new RegistryError("not-found", "manifest unknown");
        const body = opts.rewrite ? opts.rewrite(ref.tag!, m.manifest) : m.manifest;
        return { digest: m.digest, mediaType: m.mediaType, size: body.length, body, endpoint: "r.example", credentialSource: "anonymous" };
      },
      async getBlob(_repo: unknown, d: string) {
        const body = blobs.get(d);
        if (!body) throw new RegistryError("not-found", "blob unknown");
        return { digest: d, body, endpoint: "r.example", credentialSource: "anonymous" };
      },
      async listReferrers() {
        return { descriptors: [], source: "none" as const, endpoint: "r.example", credentialSource: "anonymous" };
      },
    },
  };
}
