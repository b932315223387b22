// From the `attestors` of a schema-valid ImagePolicy rule to the compiled form (attestors.ts): keys parsed and
// fingerprinted, identities compiled to matchers, counts checked against the entries and against the distinct
// signers the entries allow, every problem reported with its field path. Key files are read through `related` (the loader's reader, relative to the policy).
import { createHash, createPublicKey, type KeyObject } from "node:crypto";
import type { AttestorEntry, AttestorSet, IdentityMatcher, StaticKey } from "./attestors.ts";
import { compileGlob, hasWildcard } from "../primitives/glob.ts";
import { compileLinearRegex } from "../primitives/linear-regex.ts";
import { compileNotaryEntry, type RawNotaryEntry } from "./compile-notary.ts";
import { parseSecretRef } from "./secret-refs.ts";

export const DEFAULT_TRUST_ROOT = "sigstore-public-good";
/** cosign's default key name in a Kubernetes Secret (`cosign generate-key-pair k8s://…`). */
const DEFAULT_SECRET_KEY = "cosign.pub";

export interface RawAttestorSet {
  count?: number;
  entries: RawAttestorEntry[];
}

export interface RawAttestorEntry {
  staticKey?: { key?: string; keyRef?: string; name?: string; ignoreTlog?: boolean; trustRoot?: string };
  keyless?: {
    subject?: string;
    subjectRegExp?: string;
    issuer?: string;
    issuerRegExp?: string;
    additionalExtensions?: Record<string, string>;
    trustRoot?: string;
    ignoreTlog?: boolean;
  };
  notary?: RawNotaryEntry;
  attestors?: RawAttestorSet[];
}

export type FieldPath = Array<string | number>;
export type FieldError = { path: FieldPath; message: string };
/** Reads a file named relative to the policy's own file; throws with a reason. */
export type RelatedFileReader = (relativePath: string) => string;

/**
 * Fulcio's certificate extensions by the names cosign and the image-verification design use. OIDs .2–.6 are
 * the deprecated GitHub ones, stored as raw strings; .8 onwards are DER UTF8Strings (Fulcio's OID registry).
 */
export const FULCIO_EXTENSIONS: Readonly<Record<string, string>> = {
  githubWorkflowTrigger: "1.3.6.1.4.1.57264.1.2",
  githubWorkflowSha: "1.3.6.1.4.1.57264.1.3",
  githubWorkflowName: "1.3.6.1.4.1.57264.1.4",
  githubWorkflowRepository: "1.3.6.1.4.1.57264.1.5",
  githubWorkflowRef: "1.3.6.1.4.1.57264.1.6",
  buildSignerURI: "1.3.6.1.4.1.57264.1.9",
  buildSignerDigest: "1.3.6.1.4.1.57264.1.10",
  runnerEnvironment: "1.3.6.1.4.1.57264.1.11",
  sourceRepositoryURI: "1.3.6.1.4.1.57264.1.12",
  sourceRepositoryDigest: "1.3.6.1.4.1.57264.1.13",
  sourceRepositoryRef: "1.3.6.1.4.1.57264.1.14",
  sourceRepositoryIdentifier: "1.3.6.1.4.1.57264.1.15",
  sourceRepositoryOwnerURI: "1.3.6.1.4.1.57264.1.16",
  sourceRepositoryOwnerIdentifier: "1.3.6.1.4.1.57264.1.17",
  buildConfigURI: "1.3.6.1.4.1.57264.1.18",
  buildConfigDigest: "1.3.6.1.4.1.57264.1.19",
  buildTrigger: "1.3.6.1.4.1.57264.1.20",
  runInvocationURI: "1.3.6.1.4.1.57264.1.21",
  sourceRepositoryVisibilityAtSigning: "1.3.6.1.4.1.57264.1.22",
};

export function compileAttestorSets(raw: readonly RawAttestorSet[], at: FieldPath, related?: RelatedFileReader): { sets: AttestorSet[]; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const sets = raw.map((set, i) => compileSet(set, [...at, i], `attestors[${i}]`, errors, related));
  return { sets, errors };
}

function compileSet(raw: RawAttestorSet, at: FieldPath, path: string, errors: FieldError[], related?: RelatedFileReader): AttestorSet {
  const entries = raw.entries.map((e, j) => compileEntry(e, [...at, "entries", j], `${path}.entries[${j}]`, errors, related));
  const count = raw.count ?? 0;
  const required = count === 0 ? entries.length : count;
  if (count > entries.length) errors.push({ path: [...at, "count"], message: `count ${count} is more than the ${entries.length} entries of this set` });
  else errors.push(...sharedSigners(entries, required, at));
  return { path, required, entries };
}

/**
 * Entries that can only be met by one and the same signer (the same key, the same Secret, the same exact keyless
 * identity) count once, as the judgement does: a set that needs more distinct signers than its entries allow can
 * never be satisfied, and is refused naming the entries. Globs, regular expressions and nested sets may be met
 * by any number of signers, so they are taken to allow one each.
 */
function sharedSigners(entries: readonly AttestorEntry[], required: number, at: FieldPath): FieldError[] {
  const firstOf = new Map<string, number>();
  const repeats: Array<{ index: number; first: number; signer: string }> = [];
  entries.forEach((entry, index) => {
    const signer = fixedSigner(entry);
    if (signer === undefined) return;
    const first = firstOf.get(signer);
    if (first === undefined) firstOf.set(signer, index);
    else repeats.push({ index, first, signer });
  });
  const most = entries.length - repeats.length;
  if (required <= most) return [];
  return repeats.map(({ index, first, signer }) => ({
    path: [...at, "entries", index],
    message: `names the same signer as entries[${first}] (${signer}); this set needs ${required} distinct signers and its entries allow at most ${most}`,
  }));
}

/** The one signer that can satisfy an entry, when the policy alone fixes it. */
function fixedSigner(entry: AttestorEntry): string | undefined {
  if (entry.type === "staticKey") {
    if ("secretRef" in entry.key) {
      const ref = entry.key.secretRef;
      return ref.secret ? `key k8s://${ref.namespace}/${ref.secret}/${ref.key}` : undefined;
    }
    return entry.key.fingerprint ? `key ${entry.key.fingerprint}` : undefined;
  }
  if (entry.type === "keyless" && entry.subject.exact !== undefined && entry.issuer.exact !== undefined)
    return `subject ${entry.subject.exact} issuer ${entry.issuer.exact}`;
  return undefined;
}

function compileEntry(raw: RawAttestorEntry, at: FieldPath, path: string, errors: FieldError[], related?: RelatedFileReader): AttestorEntry {
  if (raw.attestors) {
    const nested = raw.attestors.map((s, k) => compileSet(s, [...at, "attestors", k], `${path}.attestors[${k}]`, errors, related));
    return { type: "nested", path, label: `nested set ${path}`, sets: nested };
  }
  if (raw.notary) return compileNotaryEntry(raw.notary, [...at, "notary"], path, errors, related);
  if (raw.staticKey) {
    const sk = raw.staticKey;
    const here = [...at, "staticKey"];
    const trustRoot = sk.trustRoot ?? DEFAULT_TRUST_ROOT;
    if ((sk.key === undefined) === (sk.keyRef === undefined)) {
      errors.push({ path: here, message: "give exactly one of key (a PEM public key) and keyRef (a file or k8s://NAMESPACE/SECRET[/KEY])" });
      return { type: "staticKey", path, label: sk.name ?? "key", key: { pem: "", fingerprint: "" }, ignoreTlog: sk.ignoreTlog ?? false, trustRoot };
    }
    if (sk.keyRef?.startsWith("k8s://")) {
      const ref = parseSecretRef(sk.keyRef, DEFAULT_SECRET_KEY);
      if (!ref) errors.push({ path: [...here, "keyRef"], message: `${JSON.stringify(sk.keyRef)} is not of the form k8s://NAMESPACE/SECRET[/KEY]` });
      return {
        type: "staticKey",
        path,
        label: `key ${sk.name ?? sk.keyRef}`,
        key: { secretRef: ref ?? { namespace: "", secret: "", key: "" } },
        ignoreTlog: sk.ignoreTlog ?? false,
        trustRoot,
      };
    }
    let pem = sk.key;
    if (sk.keyRef !== undefined) {
      if (!related) errors.push({ path: [...here, "keyRef"], message: "key files can only be named by policies loaded from files" });
      else
        try {
          pem = related(sk.keyRef);
        } catch (e) {
          errors.push({ path: [...here, "keyRef"], message: `cannot read ${JSON.stringify(sk.keyRef)}: ${(e as Error).message}` });
        }
    }
    const parsed = pem === undefined ? undefined : parsePublicKey(pem);
    if (parsed && "error" in parsed) errors.push({ path: [...here, sk.keyRef !== undefined ? "keyRef" : "key"], message: parsed.error });
    const key: StaticKey = parsed && "key" in parsed ? parsed.key : { pem: "", fingerprint: "" };
    const label = `key ${sk.name ?? sk.keyRef ?? key.fingerprint.slice(0, 19)}`;
    return { type: "staticKey", path, label, key, ignoreTlog: sk.ignoreTlog ?? false, trustRoot };
  }
  const kl = raw.keyless ?? {};
  const here = [...at, "keyless"];
  const subject = identity(kl.subject, kl.subjectRegExp, "subject", here, errors);
  const issuer = identity(kl.issuer, kl.issuerRegExp, "issuer", here, errors);
  const extensions = Object.entries(kl.additionalExtensions ?? {}).flatMap(([name, value]) => {
    const oid = FULCIO_EXTENSIONS[name] ?? (/^\d+(\.\d+)+$/.test(name) ? name : undefined);
    if (!oid) {
      errors.push({
        path: [...here, "additionalExtensions", name],
        message: `unknown certificate extension ${JSON.stringify(name)}; use one of ${Object.keys(FULCIO_EXTENSIONS).join(", ")}, or a dotted OID`,
      });
      return [];
    }
    return [{ name, oid, value }];
  });
  return {
    type: "keyless",
    path,
    label: `keyless ${subject.source}`,
    subject,
    issuer,
    extensions,
    trustRoot: kl.trustRoot ?? DEFAULT_TRUST_ROOT,
    ignoreTlog: kl.ignoreTlog ?? false,
  };
}

function identity(exact: string | undefined, regExp: string | undefined, field: "subject" | "issuer", at: FieldPath, errors: FieldError[]): IdentityMatcher {
  const never: IdentityMatcher = { source: exact ?? regExp ?? "", test: () => false };
  if ((exact === undefined) === (regExp === undefined)) {
    errors.push({ path: at, message: `give exactly one of ${field} and ${field}RegExp` });
    return never;
  }
  if (exact !== undefined) {
    if (!hasWildcard(exact)) return { source: exact, exact, test: (v) => v === exact };
    // "*" is any run of characters: the glob engine places the pieces without backtracking.
    return { source: exact, test: compileGlob(exact) };
  }
  // Unanchored, as cosign and Kyverno match it (Go's MatchString).
  const compiled = compileLinearRegex(regExp!, "anywhere");
  if ("error" in compiled) {
    errors.push({ path: [...at, `${field}RegExp`], message: compiled.error });
    return never;
  }
  return { source: `/${regExp}/`, test: (v) => compiled.regex.test(v) };
}

/** Keys Sigstore's verifier supports; anything else (DSA, X25519, a certificate) is a load error. */
export function parsePublicKey(pem: string): { key: StaticKey } | { error: string } {
  let key: KeyObject;
  try {
    key = createPublicKey({ key: pem, format: "pem" });
  } catch (e) {
    if (!pem.includes("-----BEGIN PUBLIC KEY-----")) return { error: "not a PEM public key (-----BEGIN PUBLIC KEY----- … -----END PUBLIC KEY-----)" };
    return { error: `not a usable PEM public key: ${(e as Error).message.replace(/^error:[0-9A-F]+:/, "")}` };
  }
  const type = key.asymmetricKeyType;
  if (type === "ec") {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    if (curve !== "prime256v1" && curve !== "secp384r1" && curve !== "secp521r1")
      return { error: `ECDSA curve ${curve ?? "?"} is not supported; use P-256, P-384 or P-521` };
  } else if (type !== "rsa" && type !== "ed25519") {
    return { error: `${type ?? "unknown"} keys are not supported; use ECDSA (P-256/384/521), RSA or Ed25519` };
  }
  const der = key.export({ type: "spki", format: "der" });
  return {
    key: {
      pem: key.export({ type: "spki", format: "pem" }).toString(),
      fingerprint: `sha256:${createHash("sha256").update(der).digest("hex")}`,
    },
  };
}
