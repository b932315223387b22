// Trust roots by name for verification: the TrustRoot policies loaded, and the Sigstore public-good root
// embedded in @sigstore/tuf's seeds, so verification works offline out of the box (air-gapped clusters). A
// TrustRoot named sigstore-public-good replaces the embedded one. Nothing here fetches anything.
import seeds from "@sigstore/tuf/seeds.json" with { type: "json" };
import { DEFAULT_TRUST_ROOT } from "../core/image-policy/compile-attestors.ts";
import { parseTrustedRoot, type TrustRoot } from "../core/trust-root/trust-root-kind.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

/** The Sigstore root embedded in @sigstore/tuf is missing or unusable: the package is damaged. */
export class EmbeddedTrustRootError extends ImprimaturError<"missing-seed" | "unusable-root"> {}

/** The TUF repository whose seeded targets include the production trusted_root.json. */
const PUBLIC_GOOD_TUF = "https://tuf-repo-cdn.sigstore.dev";

let embedded: TrustRoot | undefined;

/** The trusted_root.json shipped inside @sigstore/tuf (parsed once). */
export function embeddedTrustedRootJson(): unknown {
  return seededTrustedRootJson(seeds);
}

/** The public-good trusted_root.json in a document shaped as @sigstore/tuf's seeds.json. */
export function seededTrustedRootJson(seedsDocument: unknown): unknown {
  const targets = (seedsDocument as Record<string, { targets?: Record<string, string> } | undefined>)[PUBLIC_GOOD_TUF]?.targets;
  const encoded = targets?.["trusted_root.json"];
  if (encoded === undefined) throw new EmbeddedTrustRootError("missing-seed", "@sigstore/tuf ships no trusted_root.json seed: reinstall the package");
  return JSON.parse(Buffer.from(encoded, "base64").toString("utf8"));
}

export function publicGoodTrustRoot(): TrustRoot {
  if (!embedded) {
    const parsed = parseTrustedRoot(embeddedTrustedRootJson());
    if ("error" in parsed) throw new EmbeddedTrustRootError("unusable-root", `the embedded Sigstore trusted root is unusable: ${parsed.error}`);
    embedded = { name: DEFAULT_TRUST_ROOT, source: { origin: "embedded (@sigstore/tuf seeds)" }, sigstore: parsed };
  }
  return embedded;
}

/** A trust root by name: a loaded TrustRoot first, then the embedded public-good root. */
export function trustRootNamed(loaded: ReadonlyMap<string, TrustRoot>, name: string): TrustRoot | undefined {
  return loaded.get(name) ?? (name === DEFAULT_TRUST_ROOT ? publicGoodTrustRoot() : undefined);
}
