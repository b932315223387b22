// A kind's JSON Schema errors (ajv) as the field issues every policy load reports: the field's path, and words a
// policy author can act on. Shared by every kind checked with a schema.
import type { ErrorObject } from "ajv";
import type { FieldIssue } from "./policy-kind.ts";
import { unknownFieldMessage } from "./primitives/unknown-field.ts";

/** An ajv error as a field issue: its path, and words a policy author can act on (unknown fields name the known ones). */
export function describeSchemaError(e: ErrorObject): FieldIssue {
  const path: Array<string | number> = e.instancePath
    .split("/")
    .slice(1)
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
  switch (e.keyword) {
    case "additionalProperties":
      return {
        path: [...path, String(e.params.additionalProperty)],
        message: unknownFieldMessage(
          String(e.params.additionalProperty),
          Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {}),
        ),
      };
    case "required":
      return { path, message: `missing required field ${JSON.stringify(e.params.missingProperty)}` };
    case "enum":
      return { path, message: `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}` };
    case "const":
      return { path, message: `must be ${JSON.stringify(e.params.allowedValue)}` };
    default:
      return { path, message: e.message ?? e.keyword };
  }
}
