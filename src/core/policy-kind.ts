// What every policy kind declares, so that loading, evaluation and reporting dispatch through one registry
// (src/core/policy-set/policy-kinds.ts) instead of an if-chain per kind. A kind compiles its documents (schema and
// semantics, reporting issues by field path), prepares the compiled set once per load (indexes), and
// evaluates an AdmissionSubject. Kinds that only carry data for others (trust roots) evaluate nothing.
import type { AdmissionSubject } from "./admission-subject.ts";
import type { BreakGlassAccess } from "./break-glass.ts";
import type { Decision } from "./decision.ts";
import type { PolicyOrigin } from "./policy-origin.ts";
import type { VerificationResults } from "./verification-results.ts";

/** The apiVersion of every Imprimatur policy kind. */
export const POLICY_API_VERSION = "imprimatur.dev/v1alpha1";

export interface CompiledPolicy {
  name: string;
  source?: PolicyOrigin;
}

export interface FieldIssue {
  path: Array<string | number>;
  message: string;
}

export interface CompileContext {
  source: PolicyOrigin;
  /** Raw shipped profile documents by name (PodRestriction `spec.profile`). */
  profiles?: ReadonlyMap<string, unknown>;
  /** Reads a file named relative to the policy (key files, trust roots); throws with a reason. Absent: no files. */
  related?: (relativePath: string) => string;
}

export interface KindEvaluationContext {
  /** Labels of the subject's namespace; undefined when unknown. */
  namespaceLabels?: Record<string, string>;
  /** Signature verification results gathered by the engine; absent offline (signatures then go unchecked). */
  verifications?: VerificationResults;
  /** The server's failure policy, for lookups the registry did not answer. */
  failOpen?: boolean;
  /** The admission's time (ms since the epoch): the core reads no clock, so conditions on age (time_since) get it here. */
  now?: number;
  /** Who may use break-glass on which policy, asked by the edge when the subject requests it. */
  breakGlassAccess?: BreakGlassAccess;
}

export interface PolicyKind<Compiled extends CompiledPolicy = CompiledPolicy, Prepared = unknown> {
  readonly kind: string;
  /** The first is the one the project writes; others are accepted spellings (e.g. a design's). */
  readonly apiVersions: readonly string[];
  compile(document: Record<string, unknown>, cx: CompileContext): { policy?: Compiled; issues: FieldIssue[] };
  /** Built once per load, swapped atomically on reload. */
  prepare(policies: readonly Compiled[]): Prepared;
  /** Whether evaluating needs the namespace's labels (the engine fetches them only then). */
  usesNamespaceLabels(prepared: Prepared): boolean;
  /** The kind's verdict on a subject; undefined when it has nothing to say (no policy, nothing to judge). */
  evaluate?(prepared: Prepared, subject: AdmissionSubject, cx: KindEvaluationContext): Decision | undefined;
}
