// Every problem in a configuration file, reported at once with file, line and field, as policy files are.
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { renderAtLocation } from "../errors/source-location.ts";

export type ConfigErrorCode =
  /** The file could not be read at all (missing, no permission). */
  | "unreadable"
  /** The file was read; its content is wrong (YAML syntax, unknown fields, bad values, unusable referenced files). */
  | "invalid-config";

export interface ConfigProblem {
  /** The file as the user named it; absent for settings that did not come from a file. */
  file?: string;
  /** 1-based line, when known. */
  line?: number;
  /** Field path: "registries[0].mirrors[1]"; absent for the file as a whole. */
  path?: string;
  message: string;
}

/** "file:line (field): message" */
export function renderConfigProblem(problem: ConfigProblem): string {
  return renderAtLocation({ file: problem.file, line: problem.line, details: [problem.path] }, problem.message);
}

export class ConfigError extends ImprimaturError<ConfigErrorCode> {
  /** Every problem found, in file order as far as the checks go; never empty. */
  readonly problems: readonly ConfigProblem[];

  constructor(code: ConfigErrorCode, problems: readonly ConfigProblem[], options?: { cause?: unknown }) {
    // One line per problem, each naming its file, so the message reads the same on a terminal and in a log.
    super(code, problems.map(renderConfigProblem).join("\n"), options);
    this.problems = Object.freeze([...problems]);
  }
}
