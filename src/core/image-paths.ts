// Where custom resources keep images (the image-verification design's `imagePaths`): for the kinds named, a
// JMESPath expression selects the objects that hold an image (a Tekton Task's steps, an Argo template's
// container), `valueField` names the image inside each, `keyField` names the object. Images found this way are
// reviewed, verified and pinned like container images.
//
// JMESPath results carry no location, yet pinning must patch the field it read. The interpreter returns the
// input's own objects (not copies), so each holder is located by identity in one walk of the object.
import { compileOperand, evaluateOperand, type Operand } from "./conditions/jmespath-expression.ts";
import { formatFieldPath } from "./primitives/field-path.ts";
import { isObject } from "./primitives/json-shapes.ts";

/** A kind as imagePaths name it: `Kind`, `version/Kind` (the core group) or `group/version/Kind`; version may be `*`. */
export interface KindSelector {
  /** Undefined: any group (the form `Kind`). */
  group?: string;
  /** Undefined: any version. */
  version?: string;
  kind: string;
}

export interface ImagePath {
  kinds: KindSelector[];
  /** The expression as written, for messages. */
  expression: string;
  path: Extract<Operand, { expression: string }>;
  keyField: string;
  valueField: string;
  /** The policy that declared it, for messages. */
  policy: string;
}

export interface RawImagePath {
  kinds: string[];
  path: string;
  keyField?: string;
  valueField?: string;
}

export interface PathImage {
  image: string;
  /** e.g. "spec.steps[1].image" */
  field: string;
}

/** A holder a path selects that cannot be reviewed; the request is then denied in the declaring policy's name. */
export interface ExtractionError {
  policy: string;
  message: string;
}

/** What the paths found in one object. */
export interface PathImages {
  images: PathImage[];
  errors: ExtractionError[];
}

type FieldError = { path: Array<string | number>; message: string };

const KIND_NAME = /^[A-Za-z][A-Za-z0-9]*$/;
const VERSION = /^(\*|v[0-9]+((alpha|beta)[0-9]+)?)$/;
const GROUP = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
/** Field names a field path can carry: pinning turns the path into a JSON pointer by splitting on "." and "[". */
const PLAIN_FIELD = /^[^.[\]]+$/;

export function parseKindSelector(text: string): KindSelector | string {
  const parts = text.split("/");
  const kind = parts.at(-1)!;
  if (parts.length > 3 || !KIND_NAME.test(kind)) return `${JSON.stringify(text)} is not Kind, version/Kind or group/version/Kind`;
  if (parts.length === 1) return { kind };
  const version = parts.at(-2)!;
  if (!VERSION.test(version)) return `${JSON.stringify(text)}: ${JSON.stringify(version)} is not an API version (v1, v1beta1, *)`;
  const group = parts.length === 3 ? parts[0]! : "";
  if (parts.length === 3 && !GROUP.test(group)) return `${JSON.stringify(text)}: ${JSON.stringify(group)} is not an API group`;
  return { group, ...(version === "*" ? {} : { version }), kind };
}

export function compileImagePath(raw: RawImagePath, policy: string, at: Array<string | number>): { imagePath?: ImagePath; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const kinds: KindSelector[] = [];
  raw.kinds.forEach((k, i) => {
    const parsed = parseKindSelector(k);
    if (typeof parsed === "string") errors.push({ path: [...at, "kinds", i], message: parsed });
    else kinds.push(parsed);
  });
  let path: ImagePath["path"] | undefined;
  try {
    const operand = compileOperand(raw.path);
    if ("literal" in operand) errors.push({ path: [...at, "path"], message: `write the path as a JMESPath expression in {{ }}, e.g. "{{ spec.steps[*] }}"` });
    else path = operand;
  } catch (e) {
    errors.push({ path: [...at, "path"], message: (e as Error).message });
  }
  for (const field of ["keyField", "valueField"] as const) {
    const v = raw[field];
    if (v !== undefined && !PLAIN_FIELD.test(v))
      errors.push({ path: [...at, field], message: `${JSON.stringify(v)} must be one field name (no ".", "[" or "]")` });
  }
  if (errors.length > 0 || !path) return { errors };
  return {
    errors,
    imagePath: { kinds, expression: path.expression, path, keyField: raw.keyField ?? "name", valueField: raw.valueField ?? "image", policy },
  };
}

export function selectsKind(selector: KindSelector, apiVersion: string, kind: string): boolean {
  if (selector.kind !== kind) return false;
  if (selector.group === undefined) return true;
  const slash = apiVersion.indexOf("/");
  const group = slash < 0 ? "" : apiVersion.slice(0, slash);
  const version = slash < 0 ? apiVersion : apiVersion.slice(slash + 1);
  return selector.group === group && (selector.version === undefined || selector.version === version);
}

/** The paths that apply to an object of this apiVersion and kind. */
export function pathsFor(paths: readonly ImagePath[], apiVersion: string, kind: string): ImagePath[] {
  return paths.filter((p) => p.kinds.some((k) => selectsKind(k, apiVersion, kind)));
}

/**
 * The images the paths find in `obj`, in path order, each once (two paths reaching one field review it once).
 * A holder that is not an object of `obj` (a string, a computed value) or sits under a field name a field path
 * cannot carry is an error: it could be neither named in a denial nor pinned.
 */
export function imagesAtPaths(obj: Record<string, unknown>, paths: readonly ImagePath[]): PathImages {
  const found: PathImages = { images: [], errors: [] };
  if (paths.length === 0) return found;
  const located = locateObjects(obj);
  const seen = new Set<string>();
  for (const p of paths) {
    let result: unknown;
    try {
      result = evaluateOperand(p.path, obj);
    } catch (e) {
      found.errors.push({ policy: p.policy, message: `imagePaths (${p.expression}): ${(e as Error).message}` });
      continue;
    }
    if (result === undefined) continue;
    for (const holder of Array.isArray(result) ? result : [result]) {
      if (holder === null || holder === undefined) continue;
      const at = isObject(holder) ? located.get(holder) : undefined;
      if (at === undefined || !isObject(holder)) {
        found.errors.push({
          policy: p.policy,
          message: `imagePaths (${p.expression}) selects ${describe(holder)}, not an object of the resource that holds "${p.valueField}"`,
        });
        continue;
      }
      if (at === UNNAMEABLE) {
        found.errors.push({
          policy: p.policy,
          message: `imagePaths (${p.expression}) selects an object under a field name with ".", "[" or "]", which a field path cannot name`,
        });
        continue;
      }
      if (!Object.hasOwn(holder, p.valueField) || holder[p.valueField] === null) continue; // this holder names no image
      let value = holder[p.valueField];
      const segments = [...at, p.valueField];
      // An OCI image volume's source ({reference, pullPolicy}) names its image in `reference`: a path that selects
      // volumes (`{{ spec.volumes[*] }}`) reviews their images with the default valueField.
      if (isObject(value) && Object.hasOwn(value, "reference")) {
        value = value.reference;
        segments.push("reference");
      }
      const field = formatFieldPath(segments);
      if (seen.has(field)) continue;
      seen.add(field);
      // Not a reference at all: denied (fail closed) with the value that was found, not as an empty image name.
      if (typeof value !== "string") {
        found.errors.push({ policy: p.policy, message: `imagePaths (${p.expression}) finds ${describeValue(value)} at ${field}, not an image reference` });
        continue;
      }
      found.images.push({ image: value, field });
    }
  }
  return found;
}

const UNNAMEABLE = Symbol("unnameable");

/** Every object and array inside `root`, with its field path (or UNNAMEABLE below a field path cannot carry). */
function locateObjects(root: Record<string, unknown>): Map<object, Array<string | number> | typeof UNNAMEABLE> {
  const located = new Map<object, Array<string | number> | typeof UNNAMEABLE>();
  const visit = (value: unknown, at: Array<string | number> | typeof UNNAMEABLE): void => {
    if (typeof value !== "object" || value === null || located.has(value)) return;
    located.set(value, at);
    if (Array.isArray(value)) value.forEach((v, i) => visit(v, at === UNNAMEABLE ? at : [...at, i]));
    else for (const [k, v] of Object.entries(value)) visit(v, at === UNNAMEABLE || !PLAIN_FIELD.test(k) ? UNNAMEABLE : [...at, k]);
  };
  visit(root, []);
  return located;
}

function describe(v: unknown): string {
  if (typeof v === "string") return `the string ${JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v)}`;
  return Array.isArray(v) ? "an array" : typeof v === "object" ? "a computed object" : `the ${typeof v} ${JSON.stringify(v)}`;
}

/** A value that should have been an image reference, as a denial shows it: JSON, shortened. */
function describeValue(v: unknown): string {
  const json = JSON.stringify(v) ?? String(v);
  return `${Array.isArray(v) ? "the list" : typeof v === "object" && v !== null ? "the object" : `the ${v === null ? "null" : typeof v}`} ${json.length > 80 ? `${json.slice(0, 80)}…` : json}`;
}
