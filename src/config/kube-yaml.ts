// Files read the way kubectl reads them. kubectl (and client-go) decode YAML with sigs.k8s.io/yaml: go-yaml v2
// resolves each plain scalar by YAML 1.1 rules, the result is converted to JSON, and that JSON is the object. This
// module does the same on top of the `yaml` package (its parser, positions and YAML 1.1 mode), with the tags
// replaced by go-yaml v2's resolution and the conversion to JSON done here, because go-yaml and the `yaml`
// package's own toJS disagree on merge order and on mapping keys:
//
// - plain scalars: y/Y/yes/on… and n/N/no/off… are booleans; ~, null and the empty scalar are null; integers as
//   Go's strconv.ParseInt with base 0 after removing "_" (0644 and 0o644 octal, 0x1F, 0b101, 1_000); floats such
//   as 1e3, .5; timestamps (2001-12-14) stay strings, as go-yaml gives them to an interface{}; 1:20 is a string.
// - merge keys (`<<: *defaults`, `<<: [*a, *b]`) are applied where they stand: a merge overrides keys above it,
//   keys below it override the merge, and in a list of merges the earlier one wins (go-yaml v2).
// - mapping keys become strings as sigs.k8s.io/yaml makes them: `true`/`false` for booleans (so `y:` is "true"),
//   integers in decimal (0644 is "420"), floats in Go's shortest float32 form; a null, list or mapping key is
//   an error. .inf and .nan are errors, as JSON has no such numbers.
// - a stream is split where kubectl splits it: at lines holding only `---`. kubectl reads one document per
//   chunk, so a second document in a chunk (after `...`, or after `--- {…}` on one line) is silently dropped by
//   kubectl: it is an error here, so that no document means something to one reader and nothing to the other.
// - input whose first non-space character is `{` is a stream of JSON values, as kubectl detects it.
//
// Two deliberate differences, both refusing what kubectl v1.20 accepts: a key given twice in one mapping is an
// error with both lines (kubectl keeps the last; newer kubectl's strict field validation refuses it), and so is
// a dropped document (above). kubectl create/apply decode manifests as unstructured JSON, so there is no
// per-field typing: `value: yes` in a ConfigMap's data is the boolean true for kubectl too (the apiserver then
// refuses it), and the same here.
import {
  Alias,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseAllDocuments,
  Scalar,
  type Document,
  type Node as YamlNode,
  type ScalarTag,
  type Tags,
} from "yaml";

/** A field path as segments: ["registries", 0, "mirrors"]. */
export type FieldPath = ReadonlyArray<string | number>;

/** One document of a stream: its value as kubectl would see it, and the line of any field path in it. */
export interface LocatedDocument {
  value: unknown;
  /** 1-based position in the stream (empty documents count). */
  document: number;
  /** The line of the deepest node of `path` that exists (the document's first line at worst). */
  lineOf(path: FieldPath): number | undefined;
}

export interface LocatedYaml {
  /** Documents without errors, in order; empty and null documents ("---" alone, comments only, ~) are left out, as kubectl skips them. */
  documents: LocatedDocument[];
  /** Syntax errors, duplicate keys, values JSON cannot hold: the 1-based document they are in and their line. */
  errors: Array<{ document: number; line: number | undefined; message: string }>;
}

/**
 * go-yaml v2's guard against alias bombs: once more than 100 of more than 1 000 decoded nodes came through
 * aliases, their share may be at most 99% (up to 400 000 nodes), falling to 10% at 4 000 000 nodes.
 */
function excessiveAliasing(decoded: number, viaAliases: number): boolean {
  if (viaAliases <= 100 || decoded <= 1000) return false;
  const allowed = decoded <= 400_000 ? 0.99 : decoded >= 4_000_000 ? 0.1 : 0.99 - (0.89 * (decoded - 400_000)) / 3_600_000;
  return viaAliases / decoded > allowed;
}

/** Parses a YAML or JSON stream as kubectl does (see the top of this file); never throws. */
export function readKubeYaml(text: string): LocatedYaml {
  const result: LocatedYaml = { documents: [], errors: [] };
  // A JSON stream is read one value at a time, each as a YAML text of its own (JSON is YAML).
  const parts = startsAsJson(text) ? jsonValues(text) : [{ text, firstLine: 1 }];
  let documentNumber = 0;
  for (const part of parts) {
    const lineCounter = new LineCounter();
    // Lines of the whole text, not of the part.
    const lineAt = (offset: number | undefined): number | undefined =>
      offset === undefined ? undefined : lineCounter.linePos(offset).line + part.firstLine - 1;
    const docs = parseAllDocuments(part.text, {
      version: "1.1",
      customTags: goYamlTags,
      merge: false, // merge keys are applied by the conversion below, in go-yaml's order
      uniqueKeys: false, // duplicates are found by the conversion below, on the keys as kubectl writes them
      lineCounter,
      prettyErrors: false,
    });
    if ("empty" in docs) {
      // No document at all (an empty file, comments only); a stray directive is still an error.
      for (const err of docs.errors) result.errors.push({ document: documentNumber + 1, line: lineAt(err.pos[0]), message: firstLine(err.message) });
      continue;
    }
    const separators = kubectlSeparatorOffsets(part.text);
    let separatorsBefore = 0;
    let lastChunk = -1;
    for (const doc of docs) {
      const document = ++documentNumber;
      const fail = (line: number | undefined, message: string) => result.errors.push({ document, line, message });
      if (doc.errors.length > 0) {
        for (const err of doc.errors) fail(lineAt(err.pos[0]), firstLine(err.message));
        continue;
      }
      if (doc.contents === null) continue;
      const problems: Array<{ line: number | undefined; message: string }> = [];
      const value = new JsonConversion(doc, lineAt, problems).value(doc.contents);
      if (problems.length > 0) {
        for (const p of problems) fail(p.line, p.message);
        continue;
      }
      // kubectl skips a document that is null ("---" alone, comments only), and so it takes no chunk.
      if (value === null) continue;
      const start = doc.contents.range[0];
      while (separatorsBefore < separators.length && separators[separatorsBefore]! < start) separatorsBefore++;
      if (separatorsBefore === lastChunk) {
        fail(lineAt(start), "kubectl would skip this document: it reads one document between lines that hold only ---; put a line with --- before it");
        continue;
      }
      lastChunk = separatorsBefore;
      result.documents.push({ value, document, lineOf: (path) => lineOfPath(doc, path, lineAt) });
    }
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Scalars as go-yaml v2 resolves them

type Resolved = { kind: "null"; value: null } | { kind: "bool"; value: boolean } | { kind: "int" | "float"; value: number } | { kind: "str"; value: string };

const BOOLEANS = new Map<string, boolean>([
  ...["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"].map((s): [string, boolean] => [s, true]),
  ...["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"].map((s): [string, boolean] => [s, false]),
]);
const NULLS = new Set(["", "~", "null", "Null", "NULL"]);
const SPECIAL_FLOATS = new Map<string, number>([
  ...[".nan", ".NaN", ".NAN"].map((s): [string, number] => [s, NaN]),
  ...[".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"].map((s): [string, number] => [s, Infinity]),
  ...["-.inf", "-.Inf", "-.INF"].map((s): [string, number] => [s, -Infinity]),
]);
/** strconv.ParseInt(s, 0, 64) and ParseUint's syntax: a sign, then a base prefix (0x, 0o, 0b, or 0 for octal). */
const GO_INT = /^([-+]?)(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|0([0-7]*)|([1-9][0-9]*))$/;
/** go-yaml v2's yamlStyleFloat. */
const GO_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
const DOT_FLOAT = /^\.[0-9]+([eE][-+]?[0-9]+)?$/;

/** What go-yaml v2 makes of a plain (unquoted, untagged) scalar. */
export function resolvePlainScalar(text: string): Resolved {
  if (NULLS.has(text)) return { kind: "null", value: null };
  const bool = BOOLEANS.get(text);
  if (bool !== undefined) return { kind: "bool", value: bool };
  const special = SPECIAL_FLOATS.get(text);
  if (special !== undefined) return { kind: "float", value: special };
  const first = text[0]!;
  if (first === ".") return DOT_FLOAT.test(text) ? { kind: "float", value: Number(text) } : { kind: "str", value: text };
  if (!/[-+0-9]/.test(first)) return { kind: "str", value: text };
  const plain = text.replaceAll("_", "");
  const int = GO_INT.exec(plain);
  if (int) {
    const [, sign, hex, oct, bin, octLeadingZero, dec] = int;
    const magnitude =
      hex !== undefined
        ? BigInt(`0x${hex}`)
        : oct !== undefined
          ? BigInt(`0o${oct}`)
          : bin !== undefined
            ? BigInt(`0b${bin}`)
            : dec !== undefined
              ? BigInt(dec)
              : BigInt(`0o${octLeadingZero || "0"}`);
    // Beyond uint64 go-yaml tries it as a float; the value is the same number.
    if (sign !== "-" || magnitude !== 0n) return { kind: magnitude < 2n ** 64n ? "int" : "float", value: Number(sign === "-" ? -magnitude : magnitude) };
    return { kind: "int", value: 0 };
  }
  if (GO_FLOAT.test(plain)) {
    const value = Number(plain);
    // strconv.ParseFloat refuses what overflows; go-yaml then keeps the text.
    if (Number.isFinite(value)) return { kind: "float", value: value === 0 ? 0 : value };
  }
  return { kind: "str", value: text };
}

/** Scalars the float tag made: a float key is written as a float ("1000" for 1e3, "1e+06" for 1e6). */
const floatScalars = new WeakSet<Scalar>();

function implicitTag(kind: Resolved["kind"], tag: string): ScalarTag {
  return {
    tag,
    default: true,
    test: { test: (text: string) => resolvePlainScalar(text).kind === kind } as RegExp,
    resolve: (text) => scalarOf(kind, resolvePlainScalar(text).value),
  };
}

/** `!!int "12"`, `!!float 1`, `!!bool yes`, `!!null ~`: the text must resolve to that kind (an int is a float too). */
function explicitTag(kind: Resolved["kind"], tag: string): ScalarTag {
  return {
    tag,
    resolve(text, onError) {
      const resolved = resolvePlainScalar(text);
      if (resolved.kind === kind || (kind === "float" && resolved.kind === "int")) return scalarOf(kind, resolved.value);
      onError(`cannot decode ${JSON.stringify(text)} as a !!${kind}`);
      return text;
    },
  };
}

function scalarOf(kind: Resolved["kind"], value: unknown): Scalar {
  const scalar = new Scalar(value);
  if (kind === "float") floatScalars.add(scalar);
  return scalar;
}

/** go-yaml v2's tags: its scalar resolution, timestamps as their text and !!binary as the bytes' text. */
function goYamlTags(defaults: Tags): Tags {
  const collections = defaults.filter(
    (t) => typeof t === "object" && ["tag:yaml.org,2002:map", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:str"].includes(t.tag),
  );
  const kinds = [
    ["null", "tag:yaml.org,2002:null"],
    ["bool", "tag:yaml.org,2002:bool"],
    ["int", "tag:yaml.org,2002:int"],
    ["float", "tag:yaml.org,2002:float"],
  ] as const;
  return [
    ...collections,
    // An explicitly tagged scalar takes the first tag of its name without a test, so these come first.
    ...kinds.map(([kind, tag]) => explicitTag(kind, tag)),
    { tag: "tag:yaml.org,2002:timestamp", resolve: (text: string) => text },
    { tag: "tag:yaml.org,2002:binary", resolve: (text: string) => Buffer.from(text.replace(/\s/g, ""), "base64").toString("utf8") },
    ...kinds.map(([kind, tag]) => implicitTag(kind, tag)),
  ];
}

// ---------------------------------------------------------------------------------------------
// The conversion to JSON (sigs.k8s.io/yaml on go-yaml v2's values)

type LineAt = (offset: number | undefined) => number | undefined;

class JsonConversion {
  readonly #doc: Document.Parsed;
  readonly #lineAt: LineAt;
  readonly #problems: Array<{ line: number | undefined; message: string }>;
  readonly #expanding = new Set<unknown>();
  #aliasDepth = 0;
  #decoded = 0;
  #decodedViaAliases = 0;

  constructor(doc: Document.Parsed, lineAt: LineAt, problems: Array<{ line: number | undefined; message: string }>) {
    this.#doc = doc;
    this.#lineAt = lineAt;
    this.#problems = problems;
  }

  value(node: unknown): unknown {
    if (this.#problems.length > 0) return null;
    this.#decoded++;
    if (this.#aliasDepth > 0) this.#decodedViaAliases++;
    if (excessiveAliasing(this.#decoded, this.#decodedViaAliases)) return this.#problem(node, "the document contains excessive aliasing (an alias bomb?)");
    if (node === null || node === undefined) return null;
    if (isAlias(node)) return this.#alias(node);
    if (isScalar(node)) return this.#scalar(node);
    if (isSeq(node)) return node.items.map((item) => this.value(item));
    if (isMap(node)) return this.#mapping(node);
    return this.#problem(node, "unsupported YAML node");
  }

  #alias(alias: Alias): unknown {
    const target = alias.resolve(this.#doc);
    if (!target) return this.#problem(alias, `unknown anchor ${JSON.stringify(alias.source)}`);
    if (this.#expanding.has(target)) return this.#problem(alias, `anchor ${JSON.stringify(alias.source)} refers to itself`);
    this.#expanding.add(target);
    this.#aliasDepth++;
    try {
      return this.value(target);
    } finally {
      this.#aliasDepth--;
      this.#expanding.delete(target);
    }
  }

  #scalar(scalar: Scalar): unknown {
    const v = scalar.value;
    if (typeof v === "number" && !Number.isFinite(v))
      return this.#problem(scalar, `${scalar.source} cannot be converted to JSON (kubectl: "json: unsupported value")`);
    if (v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean") return v;
    return this.#problem(scalar, `unsupported value ${JSON.stringify(scalar.source)}`);
  }

  #mapping(map: { items: Array<{ key: unknown; value: unknown }> }): Record<string, unknown> {
    const entries = new Map<string, unknown>();
    const explicitKeyLines = new Map<string, number | undefined>();
    for (const pair of map.items) {
      if (isMergeKey(pair.key)) {
        this.#merge(pair.value, entries);
        continue;
      }
      const key = this.#keyString(pair.key);
      if (key === undefined) break;
      const line = this.#lineOfNode(pair.key);
      if (explicitKeyLines.has(key)) {
        const first = explicitKeyLines.get(key);
        this.#problem(pair.key, `duplicate key ${JSON.stringify(key)}${first !== undefined ? ` (first on line ${first})` : ""}`);
        break;
      }
      explicitKeyLines.set(key, line);
      entries.set(key, this.value(pair.value));
    }
    // fromEntries defines properties, so a key "__proto__" is a key like any other.
    return Object.fromEntries(entries) as Record<string, unknown>;
  }

  /** go-yaml v2: the merged mapping's keys are set where the merge stands; in a list, earlier mappings win. */
  #merge(source: unknown, entries: Map<string, unknown>): void {
    // A list of merges must be written in place; an alias to a list is an error, as in go-yaml.
    const sources = isSeq(source) ? [...source.items].reverse() : [source];
    for (const item of sources) {
      const resolved = isAlias(item) ? item.resolve(this.#doc) : item;
      if (!isMap(resolved)) {
        this.#problem(item, "a merge key (<<) takes a mapping or a list of mappings");
        return;
      }
      const merged = this.value(item);
      if (merged && typeof merged === "object") for (const [k, v] of Object.entries(merged)) entries.set(k, v);
    }
  }

  /** A mapping key as sigs.k8s.io/yaml writes it in JSON; undefined (and a problem) when it has no such form. */
  #keyString(node: unknown): string | undefined {
    const key = isAlias(node) ? node.resolve(this.#doc) : node;
    if (!isScalar(key)) return this.#problem(node, "a mapping key must be a string, number or boolean, not a list or mapping");
    const v = key.value;
    if (typeof v === "string") return v;
    if (typeof v === "boolean") return String(v);
    if (typeof v === "number") return floatScalars.has(key) ? goFloatKey(v) : String(v);
    return this.#problem(node, `a mapping key must be a string, number or boolean, not ${v === null ? "null" : JSON.stringify(key.source)}`);
  }

  #lineOfNode(node: unknown): number | undefined {
    return this.#lineAt((node as YamlNode | null)?.range?.[0]);
  }

  #problem(node: unknown, message: string): undefined {
    this.#problems.push({ line: this.#lineOfNode(node), message });
    return undefined;
  }
}

function isMergeKey(key: unknown): boolean {
  return isScalar(key) && key.type === Scalar.PLAIN && key.source === "<<" && !key.tag;
}

/** strconv.FormatFloat(v, 'g', -1, 32), with go-yaml's names for infinities and NaN: how a float key is written. */
export function goFloatKey(v: number): string {
  if (Number.isNaN(v)) return ".nan";
  if (!Number.isFinite(v)) return v > 0 ? ".inf" : "-.inf";
  const f = Math.fround(v);
  if (!Number.isFinite(f)) return v > 0 ? ".inf" : "-.inf";
  if (f === 0) return "0";
  // The fewest significant digits that read back as the same float32.
  let digits = 1;
  while (digits < 9 && Math.fround(Number(f.toPrecision(digits))) !== f) digits++;
  const [mantissa, exp] = f.toExponential(digits - 1).split("e") as [string, string];
  const exponent = Number(exp);
  // %g with the shortest precision uses %e when the exponent is < -4 or >= 6.
  if (exponent < -4 || exponent >= 6) return `${mantissa}e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
  return String(Number(f.toPrecision(digits)));
}

// ---------------------------------------------------------------------------------------------
// Streams: where kubectl splits them, and JSON

/** Offsets of the lines holding only "---" (and spaces): where kubectl's YAML reader cuts a stream into chunks. */
function kubectlSeparatorOffsets(text: string): number[] {
  const offsets: number[] = [];
  for (const m of text.matchAll(/^---[ \t\r\v\f]*$/gm)) offsets.push(m.index);
  return offsets;
}

/** Go's unicode.IsSpace (a byte-order mark is not one): kubectl takes input as JSON when `{` comes first. */
const GO_SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*/;

function startsAsJson(text: string): boolean {
  return text.slice(GO_SPACE.exec(text)![0].length).startsWith("{");
}

/** A JSON stream cut into its top-level values (kubectl reads `{…}{…}` as two objects), with their first lines. */
function jsonValues(text: string): Array<{ text: string; firstLine: number }> {
  const values: Array<{ text: string; firstLine: number }> = [];
  let i = 0;
  let line = 1;
  while (i < text.length) {
    const ch = text[i]!;
    if (/\s/.test(ch)) {
      if (ch === "\n") line++;
      i++;
      continue;
    }
    const start = i;
    const firstLine = line;
    let depth = 0;
    let inString = false;
    for (; i < text.length; i++) {
      const c = text[i]!;
      if (inString) {
        if (c === "\\") i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") {
        if (--depth === 0) {
          i++;
          break;
        }
      } else if (depth === 0 && /\s/.test(c)) break; // the space after a scalar: the outer loop counts its line
      if (c === "\n") line++;
    }
    values.push({ text: text.slice(start, i), firstLine });
  }
  return values;
}

// ---------------------------------------------------------------------------------------------
// Lines of field paths

/** The line of the deepest YAML node on `path` that exists: the key's line for a mapping entry, the item's for a list item. */
function lineOfPath(doc: Document.Parsed, path: FieldPath, lineAt: LineAt): number | undefined {
  let node: unknown = doc.contents;
  let best: number | undefined = (doc.contents as YamlNode | null)?.range?.[0];
  for (const segment of path) {
    if (isAlias(node)) node = node.resolve(doc);
    if (isMap(node)) {
      const pair = pairOf(doc, node, String(segment));
      if (!pair) break;
      const keyRange = (pair.key as YamlNode | null)?.range;
      if (keyRange) best = keyRange[0];
      node = pair.value;
    } else if (isSeq(node) && typeof segment === "number") {
      node = node.items[segment];
      const range = (node as YamlNode | undefined)?.range;
      if (range) best = range[0];
    } else break;
  }
  return lineAt(best);
}

/** The pair that gave `key` its value: the last explicit one, else one from a merged mapping. */
function pairOf(doc: Document.Parsed, map: { items: Array<{ key: unknown; value: unknown }> }, key: string): { key: unknown; value: unknown } | undefined {
  const matches = (k: unknown): boolean => {
    const scalar = isAlias(k) ? k.resolve(doc) : k;
    if (!isScalar(scalar) || scalar.value === null || typeof scalar.value === "object") return false;
    const text = typeof scalar.value === "number" && floatScalars.has(scalar) ? goFloatKey(scalar.value) : String(scalar.value);
    return text === key;
  };
  const explicit = map.items.findLast((p) => !isMergeKey(p.key) && matches(p.key));
  if (explicit) return explicit;
  for (const pair of map.items) {
    if (!isMergeKey(pair.key)) continue;
    const source = isAlias(pair.value) ? pair.value.resolve(doc) : pair.value;
    for (const item of isSeq(source) ? source.items : [source]) {
      const merged = isAlias(item) ? item.resolve(doc) : item;
      if (isMap(merged)) {
        const found = pairOf(doc, merged, key);
        if (found) return found;
      }
    }
  }
  return undefined;
}

function firstLine(message: string): string {
  return message.split("\n")[0]!;
}
