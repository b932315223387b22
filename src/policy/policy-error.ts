// A policy that fails to load is reported with where it came from (a file and line, or a custom resource),
// the document, the field path and the reason.
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { renderAtLocation } from "../errors/source-location.ts";

export interface PolicyError {
  /** A file path, a flag ("--profile"), or a custom resource ("ImagePolicy/name"). */
  origin: string;
  /** 1-based index of the YAML document in the file. */
  document?: number;
  line?: number;
  /** Dotted field path, e.g. "spec.rules[0].action". */
  path?: string;
  message: string;
}

/**
 * A policy that loads but cannot do all it says, reported where errors are: a rule whose attestor names a trust
 * root the set does not hold denies every image it matches (TrustRootNotFound) while the rest of its policy enforces.
 */
export interface PolicyWarning extends PolicyError {
  reason: "TrustRootNotFound";
}

export function renderPolicyError(e: PolicyError): string {
  return renderAtLocation(
    { file: e.origin, ...(e.line !== undefined ? { line: e.line } : {}), details: [e.document !== undefined ? `document ${e.document}` : undefined, e.path] },
    e.message,
  );
}

export class PolicyLoadError extends ImprimaturError<"invalid-policy"> {
  readonly errors: PolicyError[];
  constructor(errors: PolicyError[]) {
    super("invalid-policy", `policies failed to load:\n${errors.map((e) => `  ${renderPolicyError(e)}`).join("\n")}`);
    this.errors = errors;
  }
}

/** ["spec","rules",0,"action"] → "spec.rules[0].action" */
export { formatFieldPath as formatPath } from "../core/primitives/field-path.ts";
