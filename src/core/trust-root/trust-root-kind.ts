// The TrustRoot kind: a Sigstore trusted root (`trusted_root.json`: Fulcio CAs, Rekor and CT log keys,
// timestamp authorities), Notary Project trust stores (`notation`: ca, signingAuthority and tsa certificates), or
// both, under a name that attestors refer to (`trustRoot:`), for private Sigstore deployments, air-gapped clusters
// and certificates kept once for many policies. The public-good root ships embedded (src/verification/trust-roots.ts);
// a TrustRoot named `sigstore-public-good` replaces it (e.g. one written by `imprimatur trust-root update`).
// It carries data only: it judges nothing by itself.
import type { TrustMaterial } from "@sigstore/verify";
import { deferredModule } from "../primitives/deferred-module.ts";
import { POLICY_API_VERSION, type FieldIssue, type PolicyKind } from "../policy-kind.ts";
import type { PolicyOrigin } from "../policy-origin.ts";
import { unknownFieldMessage } from "../primitives/unknown-field.ts";
import { compileNotaryStores, type CertificateStore, type RawNotaryStores } from "../image-policy/compile-notary.ts";

export interface TrustRoot {
  name: string;
  source?: PolicyOrigin;
  /** The Sigstore trusted root, for key and keyless entries. */
  sigstore?: SigstoreTrust;
  /** Notary Project trust stores, for notary entries (each store's certificates). */
  notation?: { ca: readonly Uint8Array[]; signingAuthority: readonly Uint8Array[]; tsa: readonly Uint8Array[] };
}

export interface SigstoreTrust {
  /** Verification material without a key finder (static keys bring their own). */
  material: TrustMaterial;
  /** Whether it lists certificate transparency logs: keyless signatures then need an SCT. */
  hasCtLogs: boolean;
}

const TRUSTED_ROOT_MEDIA_TYPES = new Set(["application/vnd.dev.sigstore.trustedroot+json;version=0.1", "application/vnd.dev.sigstore.trustedroot.v0.2+json"]);
const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

export const trustRootKind: PolicyKind<TrustRoot, ReadonlyMap<string, TrustRoot>> = {
  kind: "TrustRoot",
  apiVersions: [POLICY_API_VERSION],
  compile(document, cx) {
    const issues: FieldIssue[] = [];
    const metadata = document.metadata as { name?: unknown } | undefined;
    const name = metadata?.name;
    if (typeof name !== "string" || !NAME.test(name)) issues.push({ path: ["metadata", "name"], message: "must be a lowercase DNS-style name" });
    for (const key of Object.keys(document)) {
      if (!["apiVersion", "kind", "metadata", "spec"].includes(key))
        issues.push({ path: [key], message: unknownFieldMessage(key, ["apiVersion", "kind", "metadata", "spec"]) });
    }
    const spec = document.spec;
    const needed = "trustedRoot (the trusted_root.json content) or path (a file next to this policy), notation (Notary Project certificates), or both";
    if (typeof spec !== "object" || spec === null || Array.isArray(spec)) {
      issues.push({ path: ["spec"], message: `missing required field "spec" with ${needed}` });
      return { issues };
    }
    const { trustedRoot, path, notation, ...unknown } = spec as Record<string, unknown>;
    for (const key of Object.keys(unknown)) issues.push({ path: ["spec", key], message: unknownFieldMessage(key, ["trustedRoot", "path", "notation"]) });
    if (trustedRoot !== undefined && path !== undefined) {
      issues.push({ path: ["spec"], message: "give trustedRoot (the trusted_root.json content) or path (a file next to this policy), not both" });
      return { issues };
    }
    if (trustedRoot === undefined && path === undefined && notation === undefined) {
      issues.push({ path: ["spec"], message: `give ${needed}` });
      return { issues };
    }
    let sigstore: SigstoreTrust | undefined;
    if (trustedRoot !== undefined || path !== undefined) {
      const read = readSigstoreRoot(trustedRoot, path, cx.related);
      if ("error" in read) issues.push({ path: read.at, message: read.error });
      else sigstore = read;
    }
    const notationStores = notation === undefined ? undefined : compileNotationStores(notation, cx.related, issues);
    if (issues.length > 0) return { issues };
    return {
      policy: { name: name as string, source: cx.source, ...(sigstore ? { sigstore } : {}), ...(notationStores ? { notation: notationStores } : {}) },
      issues,
    };
  },
  prepare: (roots) => new Map(roots.map((r) => [r.name, r])),
  usesNamespaceLabels: () => false,
};

/** The Sigstore part: the trusted root inline (an object or JSON text) or from a file. */
function readSigstoreRoot(
  trustedRoot: unknown,
  path: unknown,
  related: ((path: string) => string) | undefined,
): SigstoreTrust | { error: string; at: string[] } {
  let json: unknown = trustedRoot;
  const at = trustedRoot !== undefined ? ["spec", "trustedRoot"] : ["spec", "path"];
  if (path !== undefined) {
    if (typeof path !== "string" || path === "") return { at, error: "must be a file path" };
    if (!related) return { at, error: "files can only be named by policies loaded from files" };
    try {
      json = JSON.parse(related(path));
    } catch (e) {
      return { at, error: `cannot read ${JSON.stringify(path)} as JSON: ${(e as Error).message}` };
    }
  } else if (typeof trustedRoot === "string") {
    try {
      json = JSON.parse(trustedRoot);
    } catch (e) {
      return { at, error: `not JSON: ${(e as Error).message}` };
    }
  }
  const parsed = parseTrustedRoot(json);
  return "error" in parsed ? { at, error: parsed.error } : parsed;
}

const NOTATION_FIELDS = ["certs", "certsRef", "signingAuthorityCerts", "signingAuthorityCertsRef", "tsaCerts", "tsaCertsRef"];

/** The Notation part: the three stores, as a notary entry writes them inline or in files (no Secrets). */
function compileNotationStores(notation: unknown, related: ((path: string) => string) | undefined, issues: FieldIssue[]): TrustRoot["notation"] {
  const at = ["spec", "notation"];
  if (typeof notation !== "object" || notation === null || Array.isArray(notation)) {
    issues.push({ path: at, message: "must be a mapping of certs, signingAuthorityCerts and tsaCerts (PEM), or their *Ref files" });
    return undefined;
  }
  const fields = notation as Record<string, unknown>;
  for (const key of Object.keys(fields)) {
    if (!NOTATION_FIELDS.includes(key)) issues.push({ path: [...at, key], message: unknownFieldMessage(key, NOTATION_FIELDS) });
    else if (typeof fields[key] !== "string" || fields[key] === "") issues.push({ path: [...at, key], message: "must be a non-empty string" });
  }
  if (issues.length > 0) return undefined;
  const errors: FieldIssue[] = [];
  const stores = compileNotaryStores(fields as RawNotaryStores, at, errors, {
    ...(related ? { related } : {}),
    secrets: false,
    requirement: "give the certificates signatures must chain to: certs (or certsRef), or signingAuthorityCerts (or signingAuthorityCertsRef)",
  });
  issues.push(...errors);
  const der = (store: CertificateStore) => ("der" in store ? store.der : []);
  return { ca: der(stores.ca), signingAuthority: der(stores.signingAuthority), tsa: der(stores.tsa) };
}

// Loaded with the first trusted root read: a policy set without TrustRoots never needs them.
const sigstoreSpecs = deferredModule<typeof import("@sigstore/protobuf-specs")>(import.meta.resolve("@sigstore/protobuf-specs"));
const sigstoreVerify = deferredModule<typeof import("@sigstore/verify")>(import.meta.resolve("@sigstore/verify"));

/** A trusted_root.json document to verification material; every problem is one clear line. */
export function parseTrustedRoot(json: unknown): SigstoreTrust | { error: string } {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return { error: "a trusted root must be a JSON object (trusted_root.json)" };
  const mediaType = (json as { mediaType?: unknown }).mediaType;
  if (typeof mediaType !== "string" || !TRUSTED_ROOT_MEDIA_TYPES.has(mediaType))
    return { error: `mediaType must be one of ${[...TRUSTED_ROOT_MEDIA_TYPES].join(", ")}, got ${JSON.stringify(mediaType ?? null)}` };
  const undated = firstMissingStart(json as Record<string, unknown>);
  if (undated) return { error: `${undated} is missing: every key and CA in a trusted root must say from when it is valid` };
  try {
    const root = sigstoreSpecs().TrustedRoot.fromJSON(json);
    if (root.certificateAuthorities.length === 0 && root.tlogs.length === 0 && root.timestampAuthorities.length === 0)
      return { error: "it lists no certificate authority, transparency log or timestamp authority: nothing could be verified against it" };
    const material = sigstoreVerify().toTrustMaterial(root, () => {
      // Unreachable: verification replaces the key finder with its own (verify-entry.ts keyMaterial).
      throw new Error("no key finder");
    });
    return { material, hasCtLogs: root.ctlogs.length > 0 };
  } catch (e) {
    return { error: `not a valid trusted root: ${(e as Error).message}` };
  }
}

/**
 * The first validity range without a start, as a field path. Sigstore's verifier would read a missing start as
 * "valid since the beginning of time", so a log key or CA would vouch for entries from before it existed.
 */
function firstMissingStart(root: Record<string, unknown>): string | undefined {
  const lists: Array<[string, string]> = [
    ["tlogs", "publicKey.validFor"],
    ["ctlogs", "publicKey.validFor"],
    ["certificateAuthorities", "validFor"],
    ["timestampAuthorities", "validFor"],
  ];
  for (const [list, rangePath] of lists) {
    const items = root[list];
    if (!Array.isArray(items)) continue;
    for (const [i, item] of items.entries()) {
      const range = rangePath
        .split(".")
        .reduce<unknown>((at, key) => (typeof at === "object" && at !== null ? (at as Record<string, unknown>)[key] : undefined), item);
      const start = typeof range === "object" && range !== null ? (range as { start?: unknown }).start : undefined;
      if (typeof start !== "string" || start === "") return `${list}[${i}].${rangePath}.start`;
    }
  }
  return undefined;
}
