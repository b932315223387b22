// What converting another tool's image policy gives: Imprimatur documents, and a finding for every field that
// could not be carried over as it was meant. A finding is `weaker` when the converted policy would admit
// something the original refuses (a verification requirement dropped); otherwise the conversion is as strict or
// stricter (a match condition dropped makes a policy apply to more requests), and the finding only informs.
// Pure: the CLI (src/cli/convert.ts) reads the files and writes the result.

export interface ConversionFinding {
  /** "FILE KIND/NAME", of the object converted. */
  source: string;
  /** The field of the original, e.g. "spec.rules[0].verifyImages[0].attestors[0].entries[1].certificates". */
  path: string;
  message: string;
  weaker: boolean;
}

export interface ConvertedDocument {
  object: Record<string, unknown>;
  /** The original it came from ("ClusterPolicy/check-image (kyverno.io/v1)"), said in a comment above it. */
  from: string;
}

export interface ConversionResult {
  documents: ConvertedDocument[];
  findings: ConversionFinding[];
}

/** Collects the findings of one object's conversion, each named by its source. */
export class FindingLog {
  readonly findings: ConversionFinding[] = [];
  private readonly source: string;

  constructor(source: string) {
    this.source = source;
  }

  /** A field carried over in part or not at all, where the result is as strict or stricter. */
  note(path: string, message: string): void {
    this.findings.push({ source: this.source, path, message, weaker: false });
  }

  /** A field whose loss would let the converted policy admit what the original refuses. */
  weaker(path: string, message: string): void {
    this.findings.push({ source: this.source, path, message, weaker: true });
  }
}

/** What the converted policies are written as: the apiVersion the policy kinds own. */
export { POLICY_API_VERSION } from "../core/policy-kind.ts";

export type Json = Record<string, unknown>;

export function isJson(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function listOf(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

export function stringsOf(v: unknown): string[] {
  return listOf(v).filter((s): s is string => typeof s === "string" && s !== "");
}

/** A DNS-subdomain name made of parts: lower case, runs of other characters as "-", at most 253 characters. */
export function policyName(...parts: string[]): string {
  const name = parts
    .filter((p) => p !== "")
    .join("-")
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/g, "-")
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "");
  return (name || "converted").slice(0, 253).replace(/[^a-z0-9]+$/, "");
}

/**
 * The certificate identity fields every source spells as Imprimatur does (subject, issuer and their RegExp forms),
 * non-empty strings only: what a keyless entry takes from a Kyverno keyless attestor or a policy-controller identity.
 */
export function identityFields(identity: Json): Json {
  const out: Json = {};
  for (const field of ["subject", "issuer", "subjectRegExp", "issuerRegExp"] as const)
    if (typeof identity[field] === "string" && identity[field] !== "") out[field] = identity[field];
  return out;
}

/** The PEM blocks of a text that may hold several ("-----BEGIN PUBLIC KEY-----" … "-----END PUBLIC KEY-----"). */
export function pemBlocks(text: string): string[] {
  return [...text.matchAll(/-----BEGIN ([A-Z ]+)-----[\s\S]*?-----END \1-----/g)].map((m) => `${m[0]}\n`);
}
