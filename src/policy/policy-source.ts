// Where policy documents come from: files in a folder here; Kubernetes custom resources implement the same
// interface (resource-policy-source.ts), so loading and errors never assume a file.
import { readFileSync, statSync, watch, type FSWatcher } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { dirname, isAbsolute, resolve, sep } from "node:path";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { filesUnder, YAML_OR_JSON } from "../fs/files-under.ts";
import type { ParsedPolicies } from "./parsed-policies.ts";
import type { PolicyError } from "./policy-error.ts";

export interface PolicyText {
  /** Shown in errors: a file's path as the folder was given, or a resource name. */
  origin: string;
  text: string;
  /** Reads files the policies name relative to themselves (key files, trust roots); throws with a reason. */
  related?: (relativePath: string) => string;
  /** false when the text is not what the user wrote (a custom resource): errors then name no line or document. */
  locations?: false;
  /** The text already compiled (a custom resource unchanged since it was): used as it is, not compiled again. */
  parsed?: ParsedPolicies;
}

export interface PolicySource {
  /** For logs: "policies/", "ImagePolicy custom resources". */
  readonly description: string;
  /** Every document's text; problems reading are errors, not exceptions. */
  read(): Promise<{ texts: PolicyText[]; errors: PolicyError[] }>;
  /** Calls `changed` (coalesced: not once per object) when the source may have changed; returns a way to stop. */
  watch?(changed: () => void, failed: (err: unknown) => void): { close(): void };
  /** Told the outcome of each load that followed a read (its errors; none when the set is in force), e.g. to write status. */
  loaded?(outcome: { errors: readonly PolicyError[] }): void;
}

export type RelatedFileErrorCode =
  /** An absolute path: a policy names files relative to itself. */
  | "absolute-path"
  /** A path that leads out of the policy folder. */
  | "outside-folder"
  /** A file larger than a related file may be. */
  | "too-large";

/** A file a policy names (a key, a trust root) that it may not read; the message is the reason, the caller names the file. */
export class RelatedFileError extends ImprimaturError<RelatedFileErrorCode> {}

const MAX_POLICY_FILE_BYTES = 4 * 1024 * 1024;
const MAX_RELATED_FILE_BYTES = 1024 * 1024;

/** Every *.yaml, *.yml and *.json under a folder (recursively; hidden entries skipped), or one file. */
export class PolicyFolder implements PolicySource {
  readonly description: string;
  readonly root: string;

  constructor(root: string) {
    this.root = root;
    this.description = root;
  }

  async read(): Promise<{ texts: PolicyText[]; errors: PolicyError[] }> {
    const errors: PolicyError[] = [];
    const texts: PolicyText[] = [];
    let files: string[];
    try {
      files = await filesUnder(this.root, YAML_OR_JSON);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      const why = code === "ENOENT" ? "no such file or directory" : (code ?? (e as Error).message);
      return { texts, errors: [{ origin: this.root, message: `cannot read the policy folder: ${why}` }] };
    }
    for (const file of files) {
      // Named as the user gave the path (an absolute --policies stays absolute), so errors point where they looked.
      const origin = file;
      try {
        const info = await stat(file);
        if (info.size > MAX_POLICY_FILE_BYTES) {
          errors.push({ origin, message: `file is ${info.size} bytes; the limit is ${MAX_POLICY_FILE_BYTES}` });
          continue;
        }
        texts.push({ origin, text: await readFile(file, "utf8"), related: (path) => this.readRelated(file, path) });
      } catch (e) {
        errors.push({ origin, message: `cannot read: ${(e as Error).message}` });
      }
    }
    return { texts, errors };
  }

  /** A file next to a policy file, inside the folder (a policy cannot reach out of it). */
  private readRelated(policyFile: string, path: string): string {
    if (isAbsolute(path)) throw new RelatedFileError("absolute-path", "must be a path relative to the policy file");
    const top = resolve(statSync(this.root).isDirectory() ? this.root : dirname(this.root));
    const target = resolve(dirname(policyFile), path);
    if (target !== top && !target.startsWith(top + sep)) throw new RelatedFileError("outside-folder", `it is outside the policy folder ${this.root}`);
    const size = statSync(target).size;
    if (size > MAX_RELATED_FILE_BYTES) throw new RelatedFileError("too-large", `it is ${size} bytes; the limit is ${MAX_RELATED_FILE_BYTES}`);
    return readFileSync(target, "utf8");
  }

  watch(changed: () => void, failed: (err: unknown) => void): { close(): void } {
    let timer: NodeJS.Timeout | undefined;
    let watcher: FSWatcher | undefined;
    try {
      watcher = watch(this.root, { recursive: true, persistent: false }, () => {
        clearTimeout(timer);
        timer = setTimeout(changed, 200); // editors write in several steps
      });
      watcher.on("error", failed);
    } catch (err) {
      failed(err);
    }
    return {
      close: () => {
        clearTimeout(timer);
        watcher?.close();
      },
    };
  }
}

/** No policies at all (e.g. `check --profile restricted` without --policies judges the profile alone). */
export const NO_POLICY_SOURCE: PolicySource = {
  description: "no policy folder",
  read: async () => ({ texts: [], errors: [] }),
};

/** Several folders or files as one source, so policy names must be unique across all of them. */
export function policyFolders(paths: readonly string[]): PolicySource {
  if (paths.length === 0) return NO_POLICY_SOURCE;
  const folders = paths.map((p) => new PolicyFolder(p));
  if (folders.length === 1) return folders[0]!;
  return {
    description: paths.join(", "),
    read: async () => {
      const texts: PolicyText[] = [];
      const errors: PolicyError[] = [];
      for (const folder of folders) {
        const r = await folder.read();
        texts.push(...r.texts);
        errors.push(...r.errors);
      }
      return { texts, errors };
    },
  };
}
