// Mutations for property-based tests (test/fuzz/): of JSON documents, at a path the input chooses (delete,
// replace with any JSON, truncate, corrupt a character, wrap, nest thousands deep, blow up, retype, unicode,
// odd numbers), and of bytes (flip a bit, truncate, insert). Shared by the fuzz files that read documents.
import fc from "fast-check";
export const DELETE = Symbol("delete");
export const NEST = "\u0000nest\u0000";

export type JsonOp =
  | { op: "delete" }
  | { op: "replace"; value: unknown }
  | { op: "truncate"; at: number }
  | { op: "corrupt"; at: number; char: string }
  | { op: "wrap" }
  | { op: "nest" }
  | { op: "huge"; size: number }
  | { op: "retype" }
  | { op: "unicode" }
  | { op: "number"; value: number | string };

export interface JsonMutation {
  /** Child indexes from the root (each taken modulo the number of children); the walk stops at a leaf. */
  path: number[];
  change: JsonOp;
}

export const jsonOp: fc.Arbitrary<JsonOp> = fc.oneof(
  fc.constant({ op: "delete" as const }),
  fc.record({ op: fc.constant("replace" as const), value: fc.jsonValue({ maxDepth: 3 }) }),
  fc.record({ op: fc.constant("truncate" as const), at: fc.nat() }),
  fc.record({ op: fc.constant("corrupt" as const), at: fc.nat(), char: fc.constantFrom("!", "=", "-", "_", " ", "\n", "é", "\u0000", "\uD800", "%") }),
  fc.constant({ op: "wrap" as const }),
  fc.constant({ op: "nest" as const }),
  fc.record({ op: fc.constant("huge" as const), size: fc.integer({ min: 10_000, max: 300_000 }) }),
  fc.constant({ op: "retype" as const }),
  fc.constant({ op: "unicode" as const }),
  fc.record({ op: fc.constant("number" as const), value: fc.constantFrom(-1, 0, 1.5, 1e308, -0, 2 ** 53 + 1, "9007199254740993", "0x10", "") }),
);

export const jsonMutation: fc.Arbitrary<JsonMutation> = fc.record({ path: fc.array(fc.nat(), { maxLength: 8 }), change: jsonOp });

export function replacement(at: unknown, change: JsonOp): unknown {
  switch (change.op) {
    case "delete":
      return DELETE;
    case "replace":
      return change.value;
    case "truncate":
      if (typeof at === "string") return at.slice(0, at.length === 0 ? 0 : change.at % at.length);
      if (Array.isArray(at)) return at.slice(0, at.length === 0 ? 0 : change.at % at.length);
      return {};
    case "corrupt":
      if (typeof at !== "string" || at.length === 0) return change.char;
      return at.slice(0, change.at % at.length) + change.char + at.slice((change.at % at.length) + 1);
    case "wrap":
      return [at];
    case "nest":
      return NEST;
    case "huge":
      return typeof at === "string" && at.length > 0 ? at.repeat(Math.ceil(change.size / at.length)).slice(0, change.size) : "A".repeat(change.size);
    case "retype":
      if (typeof at === "string") return Number.isFinite(Number(at)) ? Number(at) : at.length;
      if (typeof at === "number") return String(at);
      if (typeof at === "boolean") return at ? 1 : "false";
      if (Array.isArray(at)) return Object.fromEntries(at.map((v, i) => [String(i), v]));
      if (at && typeof at === "object") return Object.values(at);
      return true;
    case "unicode":
      return typeof at === "string" ? `${at}\u{1F600}\uD800\u202E` : "\u{1F600}\uD800";
    case "number":
      return change.value;
  }
}

/** A copy of `doc` with one change at the path the mutation picks. */
export function mutateJson(doc: unknown, m: JsonMutation): unknown {
  const copy = structuredClone(doc);
  let parent: Record<string, unknown> | unknown[] | undefined;
  let key: string | number | undefined;
  let at: unknown = copy;
  for (const step of m.path) {
    if (typeof at !== "object" || at === null) break;
    const keys: Array<string | number> = Array.isArray(at) ? at.map((_, i) => i) : Object.keys(at);
    if (keys.length === 0) break;
    parent = at as Record<string, unknown> | unknown[];
    key = keys[step % keys.length]!;
    at = (parent as Record<string | number, unknown>)[key];
  }
  const value = replacement(at, m.change);
  if (parent === undefined || key === undefined) return value === DELETE ? undefined : value;
  if (value === DELETE) {
    if (Array.isArray(parent)) parent.splice(key as number, 1);
    else delete parent[key as string];
  } else (parent as Record<string | number, unknown>)[key] = value;
  return copy;
}

/** JSON text of a mutated document (a "nest" becomes thousands of nested lists). */
export function jsonText(doc: unknown, depth = 5000): string {
  const text = JSON.stringify(doc) ?? "";
  return text.split(JSON.stringify(NEST)).join(`${"[".repeat(depth)}${"]".repeat(depth)}`);
}

export type ByteMutation =
  | { op: "flip"; at: number; bit: number }
  | { op: "truncate"; at: number }
  | { op: "insert"; at: number; bytes: Uint8Array }
  | { op: "delete"; at: number; length: number };

export const byteMutation: fc.Arbitrary<ByteMutation> = fc.oneof(
  fc.record({ op: fc.constant("flip" as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ op: fc.constant("truncate" as const), at: fc.nat() }),
  fc.record({ op: fc.constant("insert" as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }) }),
  fc.record({ op: fc.constant("delete" as const), at: fc.nat(), length: fc.integer({ min: 1, max: 16 }) }),
);

/** The bytes changed as said; always different from the input (a flip of an empty input inserts a byte). */
export function mutateBytes(bytes: Buffer, m: ByteMutation): Buffer {
  if (bytes.length === 0) return Buffer.from([m.op === "insert" ? m.bytes[0]! : 0x20]);
  const at = m.at % bytes.length;
  switch (m.op) {
    case "flip": {
      const copy = Buffer.from(bytes);
      copy[at] = copy[at]! ^ (1 << m.bit);
      return copy;
    }
    case "truncate":
      return bytes.subarray(0, at);
    case "insert":
      return Buffer.concat([bytes.subarray(0, at), m.bytes, bytes.subarray(at)]);
    case "delete":
      return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + m.length)]);
  }
}
