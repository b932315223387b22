// The policies one origin's text compiled to, and the errors that kept others out. Its own file so that the
// sources that cache it (policy-source.ts) and the loader that makes it need not import each other.
import type { PolicySet } from "../core/policy-set/policy-kinds.ts";
import type { PolicyError } from "./policy-error.ts";

export interface ParsedPolicies {
  policies: PolicySet;
  errors: PolicyError[];
}
