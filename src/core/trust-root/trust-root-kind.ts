// The TrustRoot kind: a Sigstore trusted root (`trusted_root.json`: Fulcio CAs, Rekor and CT log keys,
// timestamp authorities) under a name that attestors refer to (`trustRoot:`), for private Sigstore
// deployments and air-gapped clusters. The public-good root ships embedded (src/verification/trust-roots.ts);
// a TrustRoot named `sigstore-public-good` replaces it (e.g. one written by `imprimatur trust-root update`).
// It carries data only: it judges nothing by itself.
import { TrustedRoot } from "@sigstore/protobuf-specs";
import { toTrustMaterial, type TrustMaterial } from "@sigstore/verify";
import { POLICY_API_VERSION, type FieldIssue, type PolicyKind } from "../policy-kind.ts";
import type { PolicyOrigin } from "../policy-origin.ts";
import { unknownFieldMessage } from "../primitives/unknown-field.ts";

export interface TrustRoot {
  name: string;
  source?: PolicyOrigin;
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
    if (typeof spec !== "object" || spec === null || Array.isArray(spec)) {
      issues.push({
        path: ["spec"],
        message: 'missing required field "spec" with trustedRoot (the trusted_root.json content) or path (a file next to this policy)',
      });
      return { issues };
    }
    const { trustedRoot, path, ...unknown } = spec as Record<string, unknown>;
    for (const key of Object.keys(unknown)) issues.push({ path: ["spec", key], message: unknownFieldMessage(key, ["trustedRoot", "path"]) });
    if ((trustedRoot === undefined) === (path === undefined)) {
      issues.push({ path: ["spec"], message: "give exactly one of trustedRoot (the trusted_root.json content) and path (a file next to this policy)" });
      return { issues };
    }
    let json: unknown = trustedRoot;
    const at = trustedRoot !== undefined ? ["spec", "trustedRoot"] : ["spec", "path"];
    if (path !== undefined) {
      if (typeof path !== "string" || path === "") return { issues: [...issues, { path: at, message: "must be a file path" }] };
      if (!cx.related) return { issues: [...issues, { path: at, message: "files can only be named by policies loaded from files" }] };
      try {
        json = JSON.parse(cx.related(path));
      } catch (e) {
        return { issues: [...issues, { path: at, message: `cannot read ${JSON.stringify(path)} as JSON: ${(e as Error).message}` }] };
      }
    } else if (typeof trustedRoot === "string") {
      try {
        json = JSON.parse(trustedRoot);
      } catch (e) {
        return { issues: [...issues, { path: at, message: `not JSON: ${(e as Error).message}` }] };
      }
    }
    const parsed = parseTrustedRoot(json);
    if ("error" in parsed) return { issues: [...issues, { path: at, message: parsed.error }] };
    if (issues.length > 0) return { issues };
    return { policy: { name: name as string, source: cx.source, ...parsed }, issues };
  },
  prepare: (roots) => new Map(roots.map((r) => [r.name, r])),
  usesNamespaceLabels: () => false,
};

/** A trusted_root.json document to verification material; every problem is one clear line. */
export function parseTrustedRoot(json: unknown): Omit<TrustRoot, "name" | "source"> | { error: string } {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return { error: "a trusted root must be a JSON object (trusted_root.json)" };
  const mediaType = (json as { mediaType?: unknown }).mediaType;
  if (typeof mediaType !== "string" || !TRUSTED_ROOT_MEDIA_TYPES.has(mediaType))
    return { error: `mediaType must be one of ${[...TRUSTED_ROOT_MEDIA_TYPES].join(", ")}, got ${JSON.stringify(mediaType ?? null)}` };
  const undated = firstMissingStart(json as Record<string, unknown>);
  if (undated) return { error: `${undated} is missing: every key and CA in a trusted root must say from when it is valid` };
  try {
    const root = TrustedRoot.fromJSON(json);
    if (root.certificateAuthorities.length === 0 && root.tlogs.length === 0 && root.timestampAuthorities.length === 0)
      return { error: "it lists no certificate authority, transparency log or timestamp authority: nothing could be verified against it" };
    const material = toTrustMaterial(root, () => {
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
