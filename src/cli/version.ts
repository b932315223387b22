// `imprimatur version` (and `--version`): the package version, the Git commit it was built from, and the
// Node.js running it.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pkg from "../../package.json" with { type: "json" };
import { parseCommandArgs, usageFailure, UsageError } from "./args.ts";

export const VERSION_USAGE = `Usage: imprimatur version [-o text|json]

Prints the version of imprimatur and the Git commit it was built from: the commit checked out when the
package folder is a Git checkout, else the IMPRIMATUR_COMMIT environment variable (set when a container
image is built), else "unknown". "imprimatur --version" is the same command.

  -o, --output text|json   text (default): "imprimatur VERSION (commit COMMIT)"; json: version, commit and
                           the version of Node.js running it
`;

/** The folder of package.json: a Git checkout when imprimatur runs from a clone. */
export const PACKAGE_DIR = fileURLToPath(new URL("../../", import.meta.url));

/** How long `git rev-parse` may take before the commit counts as unknown. */
const GIT_TIMEOUT_MS = 2000;

export interface VersionInfo {
  version: string;
  /** The full commit id, IMPRIMATUR_COMMIT as given, or "unknown". */
  commit: string;
  /** The version of Node.js running imprimatur, e.g. "24.21.0". */
  node: string;
}

export async function versionInfo(opts: { dir?: string; env?: NodeJS.ProcessEnv } = {}): Promise<VersionInfo> {
  const env = opts.env ?? process.env;
  const commit = (await gitCommit(opts.dir ?? PACKAGE_DIR)) ?? (env.IMPRIMATUR_COMMIT?.trim() || "unknown");
  return { version: pkg.version, commit, node: process.versions.node };
}

/**
 * The commit checked out in DIR when DIR itself is a Git checkout (not merely inside one, as an installed
 * package is inside its user's repository), else undefined: no .git, no git, or git failed or took too long.
 */
export function gitCommit(dir: string): Promise<string | undefined> {
  if (!existsSync(join(dir, ".git"))) return Promise.resolve(undefined);
  // Git's own variables (GIT_DIR from a hook, say) would point it at another repository.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("GIT_")));
  return new Promise((resolve) => {
    execFile("git", ["rev-parse", "--verify", "HEAD"], { cwd: dir, env, timeout: GIT_TIMEOUT_MS, windowsHide: true }, (err, stdout) => {
      const id = String(stdout).trim();
      resolve(!err && /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(id) ? id : undefined);
    });
  });
}

/** The text form: a full commit id is shortened as git does by default. */
export function versionLine(info: VersionInfo): string {
  const commit = /^[0-9a-f]{40,64}$/.test(info.commit) ? info.commit.slice(0, 7) : info.commit;
  return `imprimatur ${info.version} (commit ${commit})`;
}

export async function runVersion(argv: string[]): Promise<number> {
  let output: string;
  try {
    const { values } = parseCommandArgs(argv, { output: { type: "string", short: "o", default: "text" } });
    output = values.output!;
    if (output !== "text" && output !== "json") throw new UsageError(`--output must be text or json, got ${output}`);
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("version", e.message);
    throw e;
  }
  const info = await versionInfo();
  process.stdout.write(output === "json" ? `${JSON.stringify(info, null, 2)}\n` : `${versionLine(info)}\n`);
  return 0;
}
