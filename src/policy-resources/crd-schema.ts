// From the JSON Schema a policy kind is loaded with to the structural OpenAPI v3 schema a
// CustomResourceDefinition (apiextensions.k8s.io/v1) needs. Pure.
//
// Structural schemas have no $ref, no const, a type on every node, and no additionalProperties beside
// properties. So: references are inlined (a recursive one is cut at its second occurrence, below which the
// object is kept as given), const becomes a one-value enum, enum gets the type of its values, and
// a node that takes any value keeps it (x-kubernetes-preserve-unknown-fields).
//
// Unknown fields: the loader refuses them ("unknown field ..."), while the apiserver would prune them
// silently — a misspelt `attestors:` would then leave an allow rule with no signature check. So objects that
// are closed in the JSON Schema keep unknown fields in the API, and the loader reports them on the
// resource's status, as it would for a file. Free-form objects are kept as they are for the same loader.
/** A node of apiextensions.k8s.io/v1 JSONSchemaProps. */
export type OpenApiSchema = Record<string, unknown>;

export class CrdSchemaError extends Error {}

/** Keywords carried over unchanged. Any other keyword fails the conversion: it needs a decision here. */
const CARRIED = ["description", "default", "minLength", "maxLength", "pattern", "minItems", "maxItems", "minimum", "maximum", "minProperties", "maxProperties"];
/** Keywords of the JSON Schema itself, not of a value. */
const DROPPED = ["$id", "$schema", "title", "$defs"];

interface Walk {
  defs: Record<string, unknown>;
  /** The definitions being inlined on the way here: a second visit is a recursion. */
  inlining: readonly string[];
  path: string;
}

/** The structural schema of `schema` (a JSON Schema object with local `#/$defs/...` references). */
export function toStructuralSchema(schema: Record<string, unknown>): OpenApiSchema {
  const defs = (schema.$defs ?? {}) as Record<string, unknown>;
  return convert(schema, { defs, inlining: [], path: "" });
}

function convert(node: unknown, walk: Walk): OpenApiSchema {
  if (typeof node !== "object" || node === null || Array.isArray(node)) throw new CrdSchemaError(`${walk.path || "/"}: a schema must be an object`);
  const s = node as Record<string, unknown>;
  if (typeof s.$ref === "string") return inline(s, walk);
  for (const key of Object.keys(s)) {
    if (![...CARRIED, ...DROPPED, "type", "enum", "const", "properties", "required", "additionalProperties", "items"].includes(key))
      throw new CrdSchemaError(`${walk.path || "/"}: keyword ${JSON.stringify(key)} has no structural equivalent here`);
  }
  const out: OpenApiSchema = {};
  const enumValues = s.const !== undefined ? [s.const] : (s.enum as unknown[] | undefined);
  const type = (s.type as string | undefined) ?? (enumValues ? typeOfValues(enumValues, walk.path) : undefined);
  if (type === undefined) {
    // Any value at all.
    copyCarried(s, out);
    out["x-kubernetes-preserve-unknown-fields"] = true;
    return out;
  }
  out.type = type;
  copyCarried(s, out);
  if (enumValues) out.enum = enumValues;
  if (type === "object") {
    const properties = s.properties as Record<string, unknown> | undefined;
    const additional = s.additionalProperties;
    if (properties) {
      out.properties = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, convert(v, { ...walk, path: `${walk.path}.${k}` })]));
      if (Array.isArray(s.required) && s.required.length > 0) out.required = s.required as string[];
      if (typeof additional === "object" && additional !== null)
        throw new CrdSchemaError(`${walk.path || "/"}: properties and an additionalProperties schema together are not structural`);
      // Closed or open, unknown fields reach the loader (see the top of this file).
      out["x-kubernetes-preserve-unknown-fields"] = true;
    } else if (typeof additional === "object" && additional !== null) {
      out.additionalProperties = convert(additional, { ...walk, path: `${walk.path}.*` });
    } else {
      out["x-kubernetes-preserve-unknown-fields"] = true;
    }
  } else if (type === "array") {
    if (s.items === undefined) throw new CrdSchemaError(`${walk.path || "/"}: an array needs items`);
    const items = convert(s.items, { ...walk, path: `${walk.path}[]` });
    // kube-apiserver's CRD validation up to at least v1.20 reads an empty string inside a list as null and refuses
    // it ("must be of type string: null"), so `apiGroups: [""]` (the core group) could not be stored. Items that
    // may be empty are marked nullable; the loader still refuses a real null, on the resource's status.
    if (items.type === "string" && !(typeof items.minLength === "number" && items.minLength > 0) && items.enum === undefined) items.nullable = true;
    out.items = items;
  } else if (s.properties !== undefined || s.items !== undefined || s.additionalProperties !== undefined) {
    throw new CrdSchemaError(`${walk.path || "/"}: a ${type} cannot have properties or items`);
  }
  return out;
}

function inline(s: Record<string, unknown>, walk: Walk): OpenApiSchema {
  const ref = s.$ref as string;
  const match = /^#\/\$defs\/([^/]+)$/.exec(ref);
  if (!match) throw new CrdSchemaError(`${walk.path || "/"}: only local #/$defs/ references can be inlined, got ${ref}`);
  const name = match[1]!;
  const target = walk.defs[name];
  if (target === undefined) throw new CrdSchemaError(`${walk.path || "/"}: ${ref} is not defined`);
  const { $ref: _ref, ...siblings } = s;
  const description = (siblings.description ?? (target as { description?: unknown }).description) as string | undefined;
  if (walk.inlining.includes(name)) {
    // A recursion: below here the loader alone checks the shape.
    return {
      type: "object",
      ...(description ? { description } : {}),
      "x-kubernetes-preserve-unknown-fields": true,
    };
  }
  const converted = convert({ ...(target as object), ...siblings }, { ...walk, inlining: [...walk.inlining, name] });
  return converted;
}

function copyCarried(s: Record<string, unknown>, out: OpenApiSchema): void {
  for (const key of CARRIED) if (s[key] !== undefined) out[key] = s[key];
}

function typeOfValues(values: unknown[], path: string): string {
  const types = new Set(values.map((v) => (v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v)));
  if (types.size !== 1 || types.has("null")) throw new CrdSchemaError(`${path || "/"}: enum values of several types cannot be given one type`);
  return [...types][0]!;
}
