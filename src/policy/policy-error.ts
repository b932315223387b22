// A policy that fails to load is reported with file, document, line, field path and reason.

export interface PolicyError {
  file: string;
  /** 1-based index of the YAML document in the file. */
  document?: number;
  line?: number;
  /** Dotted field path, e.g. "spec.rules[0].action". */
  path?: string;
  message: string;
}

export function renderPolicyError(e: PolicyError): string {
  const where = `${e.file}${e.line !== undefined ? `:${e.line}` : ""}`;
  const detail = [e.document !== undefined ? `document ${e.document}` : "", e.path ?? ""].filter(Boolean).join(", ");
  return `${where}${detail ? ` (${detail})` : ""}: ${e.message}`;
}

export class PolicyLoadError extends Error {
  readonly errors: PolicyError[];
  constructor(errors: PolicyError[]) {
    super(`policies failed to load:\n${errors.map((e) => `  ${renderPolicyError(e)}`).join("\n")}`);
    this.name = "PolicyLoadError";
    this.errors = errors;
  }
}

/** ["spec","rules",0,"action"] → "spec.rules[0].action" */
export { formatFieldPath as formatPath } from "../core/field-path.ts";
