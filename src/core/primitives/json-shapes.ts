// Narrowing untyped JSON (admission requests, manifests) without trusting its shape.

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function asObject(v: unknown): Record<string, unknown> | undefined {
  return isObject(v) ? v : undefined;
}

/** The string-valued entries of a map such as metadata.annotations; anything else is dropped. */
export function stringMap(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (isObject(v)) for (const [k, val] of Object.entries(v)) if (typeof val === "string") out[k] = val;
  return out;
}
