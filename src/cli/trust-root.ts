// `imprimatur trust-root update`: refreshes the Sigstore public-good trusted root over TUF (@sigstore/tuf, the
// client Sigstore ships) when the network allows — never at admission time — and writes it as a TrustRoot
// document that replaces the embedded root when put in the policy folder.
import { mkdtemp, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { TrustedRoot } from "@sigstore/protobuf-specs";
import { DEFAULT_MIRROR_URL, getTrustedRoot } from "@sigstore/tuf";
import { stringify } from "yaml";
import { DEFAULT_TRUST_ROOT } from "../core/image-policy/compile-attestors.ts";
import { POLICY_API_VERSION } from "../core/policy-kind.ts";
import { parseTrustedRoot } from "../core/trust-root/trust-root-kind.ts";
import { fileProblem } from "../fs/file-problem.ts";
import { makeDirectory } from "../fs/make-directory.ts";
import { parseCommandArgs, usageFailure, UsageError } from "./args.ts";

export const TRUST_ROOT_USAGE = `Usage: imprimatur trust-root update [-o FILE|-] [--name NAME] [--mirror URL --root FILE] [--cache DIR] [--timeout SECONDS]

Fetches the current Sigstore trusted root (Fulcio CAs, Rekor and CT log keys, timestamp authorities) over TUF,
verified from the TUF root that ships with the package (or --root), and writes it as a TrustRoot policy
document. Put it in the policy folder: a TrustRoot named sigstore-public-good replaces the root embedded in
imprimatur, which is what keyless verification uses by default. The server never fetches anything itself.

  -o, --output FILE    where to write the document (.json for JSON, otherwise YAML); - for standard output (default)
  --name NAME          the TrustRoot's name (default ${DEFAULT_TRUST_ROOT})
  --mirror URL         the TUF repository (default ${DEFAULT_MIRROR_URL}); another one needs --root
  --root FILE          the TUF root.json to start from (trusted as given)
  --cache DIR          keep TUF metadata here (default: a temporary folder, removed afterwards)
  --timeout SECONDS    for the whole update (default 30)
  -h, --help           show this help

Exit status: 0 written; 1 the update failed (unreachable, or TUF verification failed: one line says why);
2 usage errors, and a --root that cannot be read or is not a TUF root.json, a --cache folder that cannot be
made, or an -o whose folder does not exist (one line naming the path and why; checked before any fetch).
`;

export async function runTrustRoot(argv: string[]): Promise<number> {
  let values;
  try {
    const parsed = parseCommandArgs(
      argv,
      {
        output: { type: "string", short: "o", default: "-" },
        name: { type: "string", default: DEFAULT_TRUST_ROOT },
        mirror: { type: "string" },
        root: { type: "string" },
        cache: { type: "string" },
        timeout: { type: "string", default: "30" },
      },
      true,
    );
    values = parsed.values;
    const [subcommand, ...rest] = parsed.positionals;
    if (subcommand !== "update")
      throw new UsageError(
        subcommand === undefined ? "give a subcommand: update" : `unknown subcommand ${JSON.stringify(subcommand)}; the one subcommand is update`,
      );
    if (rest.length > 0) throw new UsageError(`unexpected ${JSON.stringify(rest[0])}`);
    if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(values.name!)) throw new UsageError(`--name must be a lowercase DNS-style name, got ${values.name}`);
    if (values.mirror !== undefined && values.root === undefined)
      throw new UsageError("--mirror needs --root: the TUF root.json that repository is trusted from");
    if (values.mirror !== undefined && !/^https?:\/\//.test(values.mirror)) throw new UsageError(`--mirror must be an http(s) URL, got ${values.mirror}`);
    if (!/^\d+$/.test(values.timeout!) || Number(values.timeout) < 1)
      throw new UsageError(`--timeout must be a whole number of seconds, got ${values.timeout}`);
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("trust-root", e.message);
    throw e;
  }

  // The files given are checked before anything is fetched: a wrong path is the user's to fix, not a TUF failure.
  const problem = await inputProblem(values);
  if (problem) {
    process.stderr.write(`imprimatur trust-root update: ${problem}\n`);
    return 2;
  }
  const cachePath = values.cache ?? (await mkdtemp(join(tmpdir(), "imprimatur-tuf-")));
  const timeoutMs = Number(values.timeout) * 1000;
  let json: unknown;
  try {
    const fetched = getTrustedRoot({
      mirrorURL: values.mirror ?? DEFAULT_MIRROR_URL,
      cachePath,
      ...(values.root ? { rootPath: values.root } : {}),
      forceInit: values.root !== undefined,
      forceCache: false,
      retry: false,
      timeout: timeoutMs,
    });
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${values.timeout} s`)), timeoutMs);
    });
    json = TrustedRoot.toJSON(await Promise.race([fetched, deadline]).finally(() => clearTimeout(timer)));
  } catch (e) {
    process.stderr.write(`imprimatur trust-root update: ${describe(e)}\n`);
    return 1;
  } finally {
    if (values.cache === undefined) await rm(cachePath, { recursive: true, force: true });
  }

  // Written only if the server would accept it.
  const parsed = parseTrustedRoot(json);
  if ("error" in parsed) {
    process.stderr.write(`imprimatur trust-root update: the fetched trusted root is unusable: ${parsed.error}\n`);
    return 1;
  }
  const document = { apiVersion: POLICY_API_VERSION, kind: "TrustRoot", metadata: { name: values.name! }, spec: { trustedRoot: json } };
  const text = values.output!.endsWith(".json") ? `${JSON.stringify(document, null, 2)}\n` : stringify(document, { lineWidth: 0 });
  if (values.output === "-") process.stdout.write(text);
  else {
    const temporary = join(dirname(values.output!), `.${basename(values.output!)}.${process.pid}.tmp`);
    try {
      await writeFile(temporary, text, { mode: 0o644 });
      await rename(temporary, values.output!); // atomic: a watching server never reads half a file
    } catch (e) {
      await rm(temporary, { force: true });
      process.stderr.write(`imprimatur trust-root update: cannot write ${values.output}: ${(e as Error).message}\n`);
      return 1;
    }
  }
  const m = parsed.material;
  process.stderr.write(
    `trust root ${values.name}: ${m.certificateAuthorities.length} certificate authorities, ${m.tlogs.length} transparency logs, ` +
      `${m.ctlogs.length} CT logs, ${m.timestampAuthorities.length} timestamp authorities${values.output === "-" ? "" : ` written to ${values.output}`}\n`,
  );
  return 0;
}

/** Why the --root, --cache or -o given cannot be used, in one line naming the path; undefined when they can. */
async function inputProblem(values: { root?: string; cache?: string; output?: string }): Promise<string | undefined> {
  if (values.root !== undefined) {
    let text: string;
    try {
      text = await readFile(values.root, "utf8");
    } catch (e) {
      return `cannot read the TUF root ${values.root}: ${fileProblem(e)}`;
    }
    let root: { signed?: { _type?: unknown }; signatures?: unknown };
    try {
      root = JSON.parse(text) as typeof root;
    } catch {
      return `${values.root} is not a TUF root.json: it is not JSON`;
    }
    if (root?.signed?._type !== "root" || !Array.isArray(root.signatures))
      return `${values.root} is not a TUF root.json: it has no signed root metadata ("signed" with "_type": "root", and "signatures")`;
  }
  if (values.cache !== undefined) {
    try {
      await makeDirectory(values.cache, 0o700);
    } catch (e) {
      return `--cache: ${(e as Error).message}`;
    }
  }
  if (values.output !== undefined && values.output !== "-") {
    const folder = dirname(values.output);
    const isFolder = await stat(folder).then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (!isFolder) return `cannot write ${values.output}: the folder ${folder} does not exist`;
  }
  return undefined;
}

/** TUF and fetch errors in one line: the code and message, and the cause when it says more. */
function describe(e: unknown): string {
  const err = e as { code?: unknown; message?: unknown; cause?: { message?: unknown } };
  const message = typeof err.message === "string" ? err.message : String(e);
  const cause = typeof err.cause?.message === "string" && err.cause.message !== message ? ` (${err.cause.message})` : "";
  return `${typeof err.code === "string" ? `${err.code}: ` : ""}${message}${cause}`.split("\n")[0]!;
}
