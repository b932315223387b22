// `imprimatur trust-root update`: refreshes the Sigstore public-good trusted root over TUF (@sigstore/tuf, the
// client Sigstore ships) when the network allows — never at admission time — and writes it as a TrustRoot
// document that replaces the embedded root when put in the policy folder.
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { TrustedRoot } from "@sigstore/protobuf-specs";
import { DEFAULT_MIRROR_URL, getTrustedRoot } from "@sigstore/tuf";
import { stringify } from "yaml";
import { DEFAULT_TRUST_ROOT } from "../core/image-policy/compile-attestors.ts";
import { POLICY_API_VERSION } from "../core/image-policy/image-policy-kind.ts";
import { parseTrustedRoot } from "../core/trust-root/trust-root-kind.ts";
import { parseCommandArgs, UsageError } from "./args.ts";

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
2 usage errors.
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
    if (e instanceof UsageError) {
      process.stderr.write(`imprimatur trust-root: ${e.message}\n\n${TRUST_ROOT_USAGE}`);
      return 2;
    }
    throw e;
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

/** TUF and fetch errors in one line: the code and message, and the cause when it says more. */
function describe(e: unknown): string {
  const err = e as { code?: unknown; message?: unknown; cause?: { message?: unknown } };
  const message = typeof err.message === "string" ? err.message : String(e);
  const cause = typeof err.cause?.message === "string" && err.cause.message !== message ? ` (${err.cause.message})` : "";
  return `${typeof err.code === "string" ? `${err.code}: ` : ""}${message}${cause}`.split("\n")[0]!;
}
