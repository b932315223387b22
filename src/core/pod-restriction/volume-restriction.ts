// VolumeRestriction: which volumes a pod may have. `volumes` is a list of entries (or one entry); each
// entry covers the volumes whose type passes its `volumeType` (all volumes when it has none) and says
// how they may look: type-specific rules (hostPath path prefixes and type, csi and flexVolume drivers, the
// reference of an OCI image volume, restricted like a container's image) and `mount` rules for every volumeMount of those volumes in any container.
//   - A volume no entry covers is denied (its type is not allowed).
//   - A covered volume must satisfy at least one entry that covers it.
//   - An entry's collection rules (forbidEmpty/requireEmpty) and volumeType.requiredValues count the
//     volumes it covers: `{volumeType: {allowed: [hostPath]}, requireEmpty: true}` next to an entry for the
//     other types forbids hostPath volumes (alone, `{volumeType: {forbidden: [hostPath]}}` says the same).
import { CONTAINER_LISTS } from "../pod-images.ts";
import { anyOf, compileStruct, stringField, boolField, type StructSpec } from "./struct-restriction.ts";
import { compileImageRestrictions } from "./image-restriction.ts";
import { checkCollection, COLLECTION_KEYS, compileCollectionRule, type CollectionRule } from "./restrictions/collection-restriction.ts";
import {
  childOf,
  describe,
  finding,
  readListOrOne,
  readMapping,
  type Check,
  type CompileContext,
  type EvalContext,
  type Finding,
  type Located,
  type RawPath,
} from "./restrictions/restriction-support.ts";
import { compileStringListRestriction, type CompiledStringList } from "./restrictions/string-list-restriction.ts";
import { isObject } from "../primitives/json-shapes.ts";

const mount: StructSpec = {
  pointer: false,
  aliases: { mountpropagation: "mountPropagation" },
  fields: { readOnly: boolField(false), mountPropagation: stringField(true), subPath: stringField(false), subPathExpr: stringField(false) },
};

/** Type-specific restrictions, keyed by the volume type they apply to. */
const TYPE_SPECIFIC: Record<string, StructSpec> = {
  hostPath: { pointer: false, fields: { path: stringField(false, "pathPrefix"), type: stringField(true) } },
  csi: { pointer: false, fields: { driver: stringField(false), readOnly: boolField(true) } },
  flexVolume: { pointer: false, fields: { driver: stringField(false), readOnly: boolField(false) } },
  // An OCI image volume (ImageVolume): its reference is restricted as a container's image is.
  image: { pointer: false, fields: { reference: { compile: compileImageRestrictions }, pullPolicy: stringField(false) } },
};

const ENTRY_KEYS = [...COLLECTION_KEYS, "mount", "volumeType", ...Object.keys(TYPE_SPECIFIC)];

interface VolumeEntry {
  collection: CollectionRule;
  volumeType?: CompiledStringList;
  mount?: Check;
  typeSpecific: Map<string, Check>;
  rule: string;
}

export function compileVolumeRestrictions(raw: unknown, path: RawPath, cx: CompileContext): Check | undefined {
  const entries = readListOrOne(raw, path, cx)
    .map(({ raw: item, path: p }) => compileEntry(item, p, cx))
    .filter((e): e is VolumeEntry => e !== undefined);
  if (entries.length === 0) return undefined;
  const listRule = cx.rule(path);

  return (volumesAt, ecx, out) => {
    const list = volumesAt.value ?? [];
    if (!Array.isArray(list)) {
      out.push(finding(volumesAt, listRule, `must be a list, got ${describe(volumesAt.value)}`));
      return;
    }
    const covered: Array<Array<{ at: Located; type: string }>> = entries.map(() => []);
    list.forEach((volume, i) => {
      const at: Located = { value: volume, field: `${volumesAt.field}[${i}]` };
      const type = volumeType(volume);
      const covering = entries.filter((e) => !e.volumeType?.values || e.volumeType.values.accepts(type));
      entries.forEach((e, k) => {
        if (covering.includes(e)) covered[k]!.push({ at, type });
      });
      if (covering.length === 0) {
        const first = entries[0]!;
        if (entries.length === 1 && first.volumeType?.values) {
          const mine: Finding[] = [];
          first.volumeType.values.check({ value: type, field: type === "" ? at.field : `${at.field}.${type}` }, ecx, mine);
          out.push(...mine.map((f) => ({ ...f, message: `volume type ${f.message}` })));
        } else out.push(finding(at, listRule, `volume ${describe(volumeName(volume))} has type ${JSON.stringify(type)}, which no volume restriction allows`));
        return;
      }
      anyOf(covering.map((e) => (v: Located, c: EvalContext, o: Finding[]) => checkVolume(e, v, type, c, o)))(at, ecx, out);
    });
    entries.forEach((e, k) => {
      const mine = covered[k]!;
      checkCollection(e.collection, volumesAt, mine.length, e.rule, "volumes covered by this restriction", out);
      e.volumeType?.check({ value: mine.map((v) => v.type), field: volumesAt.field }, ecx, out);
    });
  };
}

function compileEntry(raw: unknown, path: RawPath, cx: CompileContext): VolumeEntry | undefined {
  const obj = readMapping(raw, path, cx, ENTRY_KEYS);
  if (!obj) return undefined;
  const entry: VolumeEntry = { collection: compileCollectionRule(obj, path, cx), typeSpecific: new Map(), rule: cx.rule(path) };
  if (obj.volumeType !== undefined) {
    const vt = compileStringListRestriction(obj.volumeType, [...path, "volumeType"], cx, cx.rule([...path, "volumeType"]));
    if (vt) entry.volumeType = vt;
  }
  if (obj.mount !== undefined) {
    const m = compileStruct(obj.mount, [...path, "mount"], cx, mount);
    if (m) entry.mount = m;
  }
  for (const [type, spec] of Object.entries(TYPE_SPECIFIC)) {
    if (obj[type] === undefined) continue;
    const c = compileStruct(obj[type], [...path, type], cx, spec);
    if (c) entry.typeSpecific.set(type, c);
  }
  return entry;
}

function checkVolume(entry: VolumeEntry, at: Located, type: string, ecx: EvalContext, out: Finding[]): void {
  entry.typeSpecific.get(type)?.(childOf(at, type), ecx, out);
  if (!entry.mount) return;
  const name = volumeName(at.value);
  for (const list of CONTAINER_LISTS) {
    const containers = childOf(ecx.podSpec, list);
    if (!Array.isArray(containers.value)) continue;
    containers.value.forEach((c, ci) => {
      const mounts = isObject(c) ? c.volumeMounts : undefined;
      if (!Array.isArray(mounts)) return;
      mounts.forEach((m, mi) => {
        if (isObject(m) && m.name === name) entry.mount!({ value: m, field: `${containers.field}[${ci}].volumeMounts[${mi}]` }, ecx, out);
      });
    });
  }
}

/**
 * The volume source's key: the one field besides "name" (hostPath, configMap, emptyDir, …). A volume with no
 * source is what the apiserver's defaulting turns into an emptyDir, so it is judged as one.
 */
export function volumeType(volume: unknown): string {
  if (!isObject(volume)) return "";
  return Object.keys(volume).find((k) => k !== "name" && volume[k] !== null && volume[k] !== undefined) ?? "emptyDir";
}

function volumeName(volume: unknown): unknown {
  return isObject(volume) ? volume.name : undefined;
}
