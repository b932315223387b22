// The errors of the policy-report module, by code: callers branch on the code, never on the message.
import { ImprimaturError } from "../../errors/imprimatur-error.ts";

export type PolicyReportErrorCode =
  /** The scan handed to the builders or the writer breaks the formats' rules (an empty policy, an unknown result…). */
  | "invalid-scan"
  /** A report-formats value (the flag) that names no format. */
  | "invalid-format"
  /** The report's CustomResourceDefinition is not installed (kubectl apply -k deploy/crds/reports). */
  | "crd-missing"
  /** The server's identity may not write reports (the RBAC rule is named in the message). */
  | "forbidden"
  /** The apiserver refused the report (its schema, or an admission webhook): a bug or a changed CRD. */
  | "rejected"
  /** Another writer kept changing the report while this one retried. */
  | "conflict"
  /** No usable answer: unreachable, timed out, another HTTP status. */
  | "unavailable";

export class PolicyReportError extends ImprimaturError<PolicyReportErrorCode> {}
