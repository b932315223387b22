// Strict reading of the node's record files, shared by every kind of record: a field that is not exactly what the
// proxy writes is an error, and a corrupt record means "verify", never "allow" (the callers decide that).
import { ImprimaturError } from "../../errors/imprimatur-error.ts";

/** The apiVersion of every record the node writes. */
export const RECORD_API_VERSION = "imprimatur.dev/v1alpha1";

/** A record file that is not exactly what the proxy writes: treated as "verify", never as "allow". */
export class RecordFormatError extends ImprimaturError<"corrupt-record"> {
  constructor(message: string) {
    super("corrupt-record", message);
  }
}

export function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new RecordFormatError(`not JSON: ${(e as Error).message}`);
  }
}

export function header(o: Record<string, unknown>, kind: string): void {
  if (o.apiVersion !== RECORD_API_VERSION) throw new RecordFormatError(`apiVersion must be ${RECORD_API_VERSION}, got ${JSON.stringify(o.apiVersion)}`);
  if (o.kind !== kind) throw new RecordFormatError(`kind must be ${kind}, got ${JSON.stringify(o.kind)}`);
}

export function object(v: unknown, at: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new RecordFormatError(`${at} must be an object`);
  return v as Record<string, unknown>;
}

export function exactKeys(o: Record<string, unknown>, allowed: readonly string[], at: string, optional = false): void {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) throw new RecordFormatError(`${at}: unknown field ${JSON.stringify(k)}`);
  if (!optional) for (const k of allowed) if (!(k in o)) throw new RecordFormatError(`${at}: missing field ${JSON.stringify(k)}`);
}

export function string(v: unknown, at: string): string {
  if (typeof v !== "string") throw new RecordFormatError(`${at} must be a string`);
  return v;
}

export function nonEmptyString(v: unknown, at: string): string {
  const s = string(v, at);
  if (s === "") throw new RecordFormatError(`${at} must not be empty`);
  return s;
}

export function timestamp(v: unknown, at: string): string {
  const s = nonEmptyString(v, at);
  if (Number.isNaN(Date.parse(s))) throw new RecordFormatError(`${at} is not an RFC 3339 time`);
  return s;
}
