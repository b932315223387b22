// The status Imprimatur writes on a policy custom resource: a Ready condition saying whether the generation
// the user wrote is in force, and if not, why — the loader's errors, by field, as it reports them for a file —
// and `inForce`, the generation in force and its policy as compiled. That record is what a replica started
// while the object is broken reads to keep enforcing the generation the others hold in memory (without it,
// every restart would drop the policy until it is fixed).
// Pure: the time comes in, the patch goes out, and an unchanged status gives no patch at all (so replicas
// that reach the same verdict never make the status flap).
import { isDeepStrictEqual } from "node:util";
import { isObject } from "../core/primitives/json-shapes.ts";
import type { PolicyError } from "../policy/policy-error.ts";

export type ReadyReason =
  /** Compiled, and part of the policy set in force. */
  | "Loaded"
  /** The object itself does not compile (schema or semantics). */
  | "InvalidPolicy"
  /** It compiles alone but not with the others: a name defined twice. */
  | "PolicyConflict"
  /** In force, but an attestor names a trust root no TrustRoot in force answers to: the rules that need it deny. */
  | "TrustRootNotFound"
  /** Its policy document is larger than status.inForce holds, so it never comes into force (see MAX_RECORDED_DOCUMENT_BYTES). */
  | "TooLarge"
  /** A PolicyException in a namespace serve's --exceptions-namespace does not name: never in force. */
  | "NotHonoured";

/**
 * status.inForce: the generation in force and its policy document as compiled (JSON text, so a merge patch
 * replaces it whole and replicas compare it byte for byte). `document` is always written; a record without it
 * comes from an earlier version of Imprimatur, which left out documents above the cap.
 */
export interface InForceRecord {
  generation: number;
  document?: string;
}

/**
 * The largest policy document (as JSON) a resource may have to come into force. The record holds the document
 * whole, and an object and its status share etcd's 1.5 MiB with the spec itself (and kubectl's last-applied
 * copy of it). A larger document is refused (TooLarge) rather than put in force unrecorded: a generation only
 * the memory of the replicas that loaded it holds would stay in force on them once the resource breaks, while
 * replicas started afterwards, with nothing to read, would enforce nothing of it.
 */
export const MAX_RECORDED_DOCUMENT_BYTES = 256 * 1024;

export type ResourceOutcome =
  | {
      state: "in-force";
      generation: number;
      /** What status.inForce should say; undefined leaves it as it is. */
      record?: InForceRecord;
      /** In force, but rules that need what the set lacks deny every image they match. */
      unresolved?: { reason: "TrustRootNotFound"; errors: readonly PolicyError[] };
    }
  | {
      state: "rejected";
      reason: "InvalidPolicy" | "PolicyConflict" | "TooLarge" | "NotHonoured";
      generation: number;
      errors: readonly PolicyError[];
      /** The earlier generation of this object still in force, if one is; otherwise the object is not in force. */
      inForceGeneration?: number;
      /** The generation status.inForce records, when it was read and does not compile (so nothing is in force). */
      recordRejected?: { generation: number; errors: readonly PolicyError[] };
      /** What status.inForce should say: null removes it (nothing in force), undefined leaves it as it is. */
      record?: InForceRecord | null;
    };

/** The record of `text` (a policy document as compiled, never above the cap: see documentTooLarge) in force at `generation`. */
export function inForceRecord(generation: number, text: string): InForceRecord {
  return { generation, document: text };
}

/** Why a resource whose policy document as compiled is `text` cannot come into force, if its size is why. */
export function documentTooLarge(text: string, origin: string): PolicyError | undefined {
  const bytes = Buffer.byteLength(text);
  if (bytes <= MAX_RECORDED_DOCUMENT_BYTES) return undefined;
  return {
    origin,
    message:
      `the policy document is ${bytes} bytes as JSON, more than the ${MAX_RECORDED_DOCUMENT_BYTES} bytes status.inForce can hold, ` +
      "which every replica reads to enforce the same generation: split it into several policies",
  };
}

/**
 * status.inForce as an object holds it: undefined when there is none, an error when it is not the shape
 * Imprimatur writes (the CRD schema refuses other shapes; an older CRD without it prunes the field).
 */
export function readInForceRecord(object: Record<string, unknown>): InForceRecord | { error: PolicyError } | undefined {
  const status = isObject(object.status) ? object.status : {};
  const recorded = status.inForce;
  if (recorded === undefined || recorded === null) return undefined;
  if (!isObject(recorded) || !Number.isSafeInteger(recorded.generation) || (recorded.document !== undefined && typeof recorded.document !== "string"))
    return { error: { origin: "", path: "status.inForce", message: "is not a generation and the policy document it had" } };
  return { generation: recorded.generation as number, ...(typeof recorded.document === "string" ? { document: recorded.document } : {}) };
}

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
  if (outcome.state === "in-force" && outcome.unresolved) {
    // Not ready: the policy is in force, but not all of it can do what it says.
    return {
      type: "Ready",
      status: "False",
      observedGeneration: outcome.generation,
      lastTransitionTime: at,
      reason: outcome.unresolved.reason,
      message: `${describeResourceErrors(outcome.unresolved.errors)} (this policy is in force; the rules named deny every image they match)`,
    };
  }
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
  const consequence =
    outcome.inForceGeneration !== undefined
      ? `generation ${outcome.inForceGeneration} stays in force`
      : outcome.recordRejected
        ? `generation ${outcome.recordRejected.generation} recorded in status.inForce does not compile either: ${describeResourceErrors(outcome.recordRejected.errors)}; this policy is not in force`
        : "this policy is not in force";
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
  // The record written whole: a merge patch merges objects, so a field the new record lacks is set to null.
  const record =
    outcome.record === undefined
      ? undefined
      : outcome.record === null
        ? null
        : { generation: outcome.record.generation, document: outcome.record.document ?? null };
  const recordSame = record === undefined || isDeepStrictEqual(status.inForce ?? null, outcome.record);
  if (current && current.status === wanted.status) {
    wanted.lastTransitionTime = typeof current.lastTransitionTime === "string" ? current.lastTransitionTime : wanted.lastTransitionTime;
    const same =
      current.reason === wanted.reason &&
      current.message === wanted.message &&
      current.observedGeneration === wanted.observedGeneration &&
      status.observedGeneration === wanted.observedGeneration;
    if (same && recordSame) return undefined;
  }
  // A merge patch replaces lists whole: keep the conditions others may have written.
  const others = conditions.filter((c) => c.type !== "Ready");
  return {
    status: {
      observedGeneration: wanted.observedGeneration,
      conditions: [...others, wanted],
      ...(record !== undefined && !recordSame ? { inForce: record } : {}),
    },
  };
}
