// What the configuration loaders share: reading a file, parsing its YAML as kubectl does (with lines), and checking fields
// while collecting every problem (with file, line and field) instead of stopping at the first.
import { readFile } from "node:fs/promises";
import { formatFieldPath } from "../core/primitives/field-path.ts";
import { parseDuration } from "../core/primitives/duration.ts";
import { didYouMean } from "../core/primitives/unknown-field.ts";
import { ConfigError, type ConfigProblem } from "./config-error.ts";
import { readKubeYaml, type FieldPath, type LocatedDocument, type LocatedYaml } from "./kube-yaml.ts";

export const CONFIG_API_VERSION = "imprimatur.dev/v1alpha1";

type LineOf = (path: FieldPath) => number | undefined;

/** The problems of one file, each placed at its field's line when the YAML positions are known. */
export class ConfigChecks {
  readonly #file: string;
  readonly #lineOf: LineOf;
  readonly #problems: ConfigProblem[];

  constructor(file: string, lineOf: LineOf = () => undefined, problems: ConfigProblem[] = []) {
    this.#file = file;
    this.#lineOf = lineOf;
    this.#problems = problems;
  }

  /** The same file's list of problems, with the lines of another document of it. */
  withLines(lineOf: LineOf): ConfigChecks {
    return new ConfigChecks(this.#file, lineOf, this.#problems);
  }

  /** Records a problem at `path` ([] for the file as a whole); undefined, so a check can return it. */
  problem(path: FieldPath, message: string): undefined {
    const line = this.#lineOf(path);
    const field = formatFieldPath(path);
    this.#problems.push({ file: this.#file, ...(line !== undefined ? { line } : {}), ...(field ? { path: field } : {}), message });
    return undefined;
  }

  /** Throws one ConfigError ("invalid-config") listing every problem in line order, if there is any. */
  throwIfAny(): void {
    if (this.#problems.length === 0) return;
    const byLine = this.#problems.map((p, i) => ({ p, i })).sort((a, b) => (a.p.line ?? Infinity) - (b.p.line ?? Infinity) || a.i - b.i);
    throw new ConfigError(
      "invalid-config",
      byLine.map(({ p }) => p),
    );
  }

  /** `value` as a mapping whose keys are all in `known`; each other key is an unknown field. */
  mapping(value: unknown, path: FieldPath, known: readonly string[]): Record<string, unknown> | undefined {
    if (!isMapping(value)) return this.problem(path, path.length === 0 ? "the file must be a YAML mapping" : "must be a mapping");
    for (const key of Object.keys(value)) if (!known.includes(key)) this.problem([...path, key], `unknown field${didYouMean(key, known)}`);
    return value;
  }

  list(value: unknown, path: FieldPath, message = "must be a list"): unknown[] | undefined {
    return Array.isArray(value) ? value : this.problem(path, message);
  }

  /** apiVersion imprimatur.dev/v1alpha1 and the given kind. */
  header(document: Record<string, unknown>, kind: string): void {
    if (document.apiVersion !== CONFIG_API_VERSION) this.problem(["apiVersion"], `must be ${JSON.stringify(CONFIG_API_VERSION)}`);
    if (document.kind !== kind) this.problem(["kind"], `must be ${JSON.stringify(kind)}`);
  }

  /** A non-empty string, for a file path; undefined (and a problem) otherwise. */
  filePath(value: unknown, path: FieldPath, message = "must be a file path"): string | undefined {
    return typeof value === "string" && value !== "" ? value : this.problem(path, message);
  }

  /** A Go-style duration ("30s", "5m", "1h30m") in milliseconds. */
  duration(value: unknown, path: FieldPath): number | undefined {
    const parsed = typeof value === "string" ? parseDuration(value) : undefined;
    const ms = parsed !== undefined && parsed >= 0 ? parsed : undefined;
    return ms ?? this.problem(path, `must be a duration such as "30s", "5m" or "1h", got ${JSON.stringify(value)}`);
  }

  /** An integer of at least `min`. */
  integer(value: unknown, path: FieldPath, min: number, message: string): number | undefined {
    return Number.isInteger(value) && (value as number) >= min ? (value as number) : this.problem(path, message);
  }
}

export function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A configuration file's text; a file that cannot be read is a ConfigError ("unreadable") naming it. */
export async function readConfigText(file: string, what: string): Promise<string> {
  try {
    return await readFile(file, "utf8");
  } catch (e) {
    const reason = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    throw new ConfigError("unreadable", [{ file, message: `cannot read ${what}: ${reason}` }], { cause: e });
  }
}

/** Every document of a YAML file; syntax errors are thrown as one ConfigError listing them all. */
export function yamlDocuments(text: string, file: string): LocatedDocument[] {
  const parsed: LocatedYaml = readKubeYaml(text);
  if (parsed.errors.length > 0) {
    throw new ConfigError(
      "invalid-config",
      parsed.errors.map((e) => ({ file, ...(e.line !== undefined ? { line: e.line } : {}), message: `not valid YAML: ${e.message}` })),
    );
  }
  return parsed.documents;
}

/** The one document of a configuration file (null for an empty file); more than one is an error. */
export function singleYamlDocument(text: string, file: string): LocatedDocument {
  const documents = yamlDocuments(text, file);
  if (documents.length > 1) {
    const line = documents[1]!.lineOf([]);
    throw new ConfigError("invalid-config", [
      { file, ...(line !== undefined ? { line } : {}), message: `holds ${documents.length} YAML documents; expected one` },
    ]);
  }
  return documents[0] ?? { value: null, document: 1, lineOf: () => undefined };
}
