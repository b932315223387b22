// The status Imprimatur writes on a policy custom resource: a Ready condition saying whether the generation
// the user wrote is in force, and if not, why — the loader's errors, by field, as it reports them for a file.
// Pure: the time comes in, the patch goes out, and an unchanged condition gives no patch at all (so replicas
// that reach the same verdict never make the status flap).
import { isObject } from "../core/json-shapes.ts";
import type { PolicyError } from "./policy-error.ts";

export type ReadyReason =
  /** Compiled, and part of the policy set in force. */
  | "Loaded"
  /** The object itself does not compile (schema or semantics). */
  | "InvalidPolicy"
  /** It compiles alone but not with the others: a name defined twice, a trust root no TrustRoot answers to. */
  | "PolicyConflict";

export type ResourceOutcome =
  | { state: "in-force"; generation: number }
  | {
      state: "rejected";
      reason: Exclude<ReadyReason, "Loaded">;
      generation: number;
      errors: readonly PolicyError[];
      /** The earlier generation of this object still in force, if one is; otherwise the object is not in force. */
      inForceGeneration?: number;
    };

export interface ReadyCondition {
  type: "Ready";
  status: "True" | "False";
  observedGeneration: number;
  lastTransitionTime: string;
  reason: ReadyReason;
  message: string;
}

/** Conditions are read by people: a policy with a hundred errors shows the first ones. */
const MAX_MESSAGE = 4096;

/** "spec.rules[0].action: must be one of ..." — the field and the reason; the origin is the object itself. */
export function describeResourceErrors(errors: readonly PolicyError[]): string {
  const text = errors.map((e) => (e.path ? `${e.path}: ${e.message}` : e.message)).join("; ");
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text;
}

export function readyCondition(outcome: ResourceOutcome, now: Date): ReadyCondition {
  const at = now.toISOString().replace(/\.\d{3}Z$/, "Z");
  if (outcome.state === "in-force") {
    return {
      type: "Ready",
      status: "True",
      observedGeneration: outcome.generation,
      lastTransitionTime: at,
      reason: "Loaded",
      message: "compiled and in force",
    };
  }
  const consequence = outcome.inForceGeneration !== undefined ? `generation ${outcome.inForceGeneration} stays in force` : "this policy is not in force";
  return {
    type: "Ready",
    status: "False",
    observedGeneration: outcome.generation,
    lastTransitionTime: at,
    reason: outcome.reason,
    message: `${describeResourceErrors(outcome.errors)} (${consequence})`,
  };
}

/**
 * The merge patch for the status subresource that records `outcome`, or undefined when the object's status
 * already says the same. lastTransitionTime moves only when the condition's status does.
 */
export function statusPatch(object: Record<string, unknown>, outcome: ResourceOutcome, now: Date): { status: Record<string, unknown> } | undefined {
  const wanted = readyCondition(outcome, now);
  const status = isObject(object.status) ? object.status : {};
  const conditions = Array.isArray(status.conditions) ? status.conditions.filter(isObject) : [];
  const current = conditions.find((c) => c.type === "Ready");
  if (current && current.status === wanted.status) {
    wanted.lastTransitionTime = typeof current.lastTransitionTime === "string" ? current.lastTransitionTime : wanted.lastTransitionTime;
    const same =
      current.reason === wanted.reason &&
      current.message === wanted.message &&
      current.observedGeneration === wanted.observedGeneration &&
      status.observedGeneration === wanted.observedGeneration;
    if (same) return undefined;
  }
  // A merge patch replaces lists whole: keep the conditions others may have written.
  const others = conditions.filter((c) => c.type !== "Ready");
  return { status: { observedGeneration: wanted.observedGeneration, conditions: [...others, wanted] } };
}
