// Writes src/kube/pod-fields.generated.json: the JSON fields of every Kubernetes API type a Pod's metadata and spec
// are made of, taken from @kubernetes/client-node's generated models (each model class declares its fields and
// their types, generated from the Kubernetes OpenAPI). The server reads the JSON (known-fields.ts); the library is
// only a development dependency, run again here when it is updated (test/unit/kube/known-fields.test.ts checks the
// file is current).
//   node scripts/generate-pod-fields.ts [--check]
import { readFileSync, writeFileSync } from "node:fs";
import * as models from "@kubernetes/client-node";

type ModelClass = { getAttributeTypeMap(): Array<{ baseName: string; type: string }> };
const byName = models as unknown as Record<string, ModelClass | undefined>;

/** Type name → { JSON field → type name }, for the models reachable from the roots. */
export function podFieldTypes(roots: readonly string[] = ["V1ObjectMeta", "V1PodSpec"]): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  const queue = [...roots];
  while (queue.length > 0) {
    const type = queue.shift()!;
    const inner = /^Array<(.+)>$/.exec(type)?.[1] ?? /^\{ \[key: string\]: (.+); \}$/.exec(type)?.[1];
    if (inner !== undefined) {
      queue.push(inner);
      continue;
    }
    if (out[type] !== undefined) continue;
    const cls = byName[type];
    if (typeof cls?.getAttributeTypeMap !== "function") continue; // scalars, IntOrString, quantities, free-form objects
    const fields: Record<string, string> = {};
    for (const attribute of cls.getAttributeTypeMap()) {
      fields[attribute.baseName] = attribute.type;
      queue.push(attribute.type);
    }
    out[type] = fields;
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

const target = new URL("../src/kube/pod-fields.generated.json", import.meta.url);
const text = JSON.stringify(podFieldTypes(), null, 2) + "\n";
if (import.meta.main) {
  if (process.argv.includes("--check")) {
    if (readFileSync(target, "utf8") !== text) {
      console.error("src/kube/pod-fields.generated.json is not current: run node scripts/generate-pod-fields.ts");
      process.exit(1);
    }
  } else {
    writeFileSync(target, text);
  }
}
