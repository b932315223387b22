// `imprimatur containerd-verifier`: an image verifier for containerd 2.x's `io.containerd.image-verifier.v1.bindir`
// plugin, judging with the same policies the webhook loads. containerd runs every executable in its bin_dir for
// each pull, after resolving the name, as `<bin> -name NAME -digest DIGEST -stdin-media-type MEDIA_TYPE` with the
// image's OCI descriptor as JSON on standard input; exit status 0 lets the pull go on, any other blocks it, and
// standard output is the reason (containerd keeps the first 32 KiB). The executable in bin_dir is a wrapper that
// adds this command's own flags (deploy/containerd-verifier/), since containerd passes none.
import { pino } from "pino";
import { parseImageReference } from "../core/image-reference.ts";
import { AuditLog } from "../audit/audit-log.ts";
import { buildNodeEngine } from "../node/node-engine.ts";
import { PullGate } from "../node/pull-gate.ts";
import { PolicyLoadError } from "../policy/policy-error.ts";
import { loadPolicySet } from "../policy/policy-set.ts";
import { PolicyFolder } from "../policy/policy-source.ts";
import { errorText, parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { registryAccess } from "./registry-access.ts";

export const CONTAINERD_VERIFIER_USAGE = `Usage: imprimatur containerd-verifier --policies DIR [options] --name NAME --digest DIGEST --stdin-media-type TYPE

An image verifier for containerd 2.x (plugin io.containerd.image-verifier.v1.bindir): judges the image containerd
is about to pull by the policies in DIR, as the webhook and node-proxy --policies judge it, at the digest
containerd resolved. containerd names no pod: the image is judged as an ImageReview without a namespace is, so
namespaced policies and policies scoped by namespace or labels do not apply here (node-proxy --policies judges
each pull for its pod). The executable containerd runs is a wrapper adding these flags; see
deploy/containerd-verifier/.

  --policies DIR             the policy folder or file (required)
  --registries FILE          RegistryConfig: per-registry CA, client certificate, mirrors (as serve's)
  --authfile FILE            registry credentials for signature lookups (containerd passes none)
  --failure-policy POLICY    Fail (default: a registry that gives no answer blocks the pull) or Ignore
  --timeout DURATION         how long a judgement may take, e.g. 8s (default 8s; containerd's
                             per_verifier_timeout is 10s by default)
  --audit-log FILE           every judgement, one JSON line each, fsynced before the exit status; an allowed
                             pull that cannot be recorded is blocked. Without it, judgements go to standard
                             error only (containerd's debug log), and a pull allowed by failing open is blocked:
                             that override must be recorded

containerd's arguments (it writes -name, -digest, -stdin-media-type: one dash or two, "-flag value" or
"-flag=value", mean the same, as Go's flag package reads them):
  --name NAME                the image reference being pulled
  --digest DIGEST            the digest it resolved to
  --stdin-media-type TYPE    the media type of standard input (application/vnd.oci.descriptor.v1+json)

Standard output: one line, the reason (at most 4 KiB). Exit status: 0 allowed, 1 refused, 2 usage or start-up
errors (which block the pull too: containerd allows only on 0).
`;

const DESCRIPTOR_MEDIA_TYPE = "application/vnd.oci.descriptor.v1+json";
/** Standard input is one descriptor: anything larger is not one. */
const MAX_STDIN_BYTES = 64 * 1024;
/** The reason printed; containerd keeps 32 KiB, the pod's events far less. */
const MAX_REASON_BYTES = 4096;

interface VerifierArgs {
  policies: string;
  registries?: string;
  authFile?: string;
  failOpen: boolean;
  timeoutMs: number;
  auditLog?: string;
  name: string;
  digest: string;
  mediaType: string;
}

const FLAGS = {
  policies: { type: "string" },
  registries: { type: "string" },
  authfile: { type: "string" },
  "failure-policy": { type: "string" },
  timeout: { type: "string" },
  "audit-log": { type: "string" },
  name: { type: "string" },
  digest: { type: "string" },
  "stdin-media-type": { type: "string" },
} as const;

/**
 * containerd writes Go's flag syntax (-name value, -name=value), which node's parser reads as short options: a
 * single-dash long flag is given its second dash first, so both spellings mean the same, as in Go.
 */
export function parseVerifierArgs(argv: string[]): VerifierArgs {
  const { values } = parseCommandArgs(
    argv.map((token) => (/^-[a-z][a-z-]+(=.*)?$/s.test(token) ? `-${token}` : token)),
    FLAGS,
  );
  for (const flag of ["policies", "name", "digest", "stdin-media-type"] as const) if (!values[flag]) throw new UsageError(`--${flag} is required`);
  const failurePolicy = values["failure-policy"] ?? "Fail";
  if (failurePolicy !== "Fail" && failurePolicy !== "Ignore") throw new UsageError(`--failure-policy must be Fail or Ignore, got ${failurePolicy}`);
  const timeout = values.timeout ?? "8s";
  const t = /^(\d+)(ms|s)$/.exec(timeout);
  if (!t || Number(t[1]) === 0) throw new UsageError(`--timeout must be a duration like 8s or 500ms, got ${timeout}`);
  return {
    policies: values.policies!,
    ...(values.registries ? { registries: values.registries } : {}),
    ...(values.authfile ? { authFile: values.authfile } : {}),
    ...(values["audit-log"] ? { auditLog: values["audit-log"] } : {}),
    failOpen: failurePolicy === "Ignore",
    timeoutMs: Number(t[1]) * (t[2] === "s" ? 1000 : 1),
    name: values.name!,
    digest: values.digest!,
    mediaType: values["stdin-media-type"]!,
  };
}

/** The descriptor on standard input: it must be for the digest named, or the judgement would be of another image. */
export function checkDescriptor(text: string, digest: string): string | undefined {
  let descriptor: unknown;
  try {
    descriptor = JSON.parse(text);
  } catch (e) {
    return `standard input is not JSON: ${(e as Error).message}`;
  }
  if (typeof descriptor !== "object" || descriptor === null || Array.isArray(descriptor)) return "standard input is not an OCI descriptor (a JSON object)";
  const d = descriptor as Record<string, unknown>;
  if (d.digest !== digest) return `the descriptor's digest ${JSON.stringify(d.digest)} is not -digest ${digest}`;
  if (typeof d.mediaType !== "string" || typeof d.size !== "number") return "the descriptor has no mediaType or size";
  return undefined;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_STDIN_BYTES) throw new UsageError(`standard input is larger than ${MAX_STDIN_BYTES} bytes: not one descriptor`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** One line, at most MAX_REASON_BYTES of UTF-8. */
export function reasonLine(text: string): string {
  const line = text.replace(/[\r\n]+/g, " ");
  const bytes = Buffer.from(line, "utf8");
  if (bytes.length <= MAX_REASON_BYTES) return line;
  return `${bytes
    .subarray(0, MAX_REASON_BYTES - 3)
    .toString("utf8")
    .replace(/\uFFFD$/, "")}...`;
}

export async function runContainerdVerifier(argv: string[]): Promise<number> {
  let args: VerifierArgs;
  try {
    args = parseVerifierArgs(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    return usageFailure("containerd-verifier", e.message);
  }
  const say = (line: string) => process.stdout.write(`${reasonLine(line)}\n`);
  if (args.mediaType !== DESCRIPTOR_MEDIA_TYPE) {
    say(`imprimatur: blocked: standard input is ${args.mediaType}, not ${DESCRIPTOR_MEDIA_TYPE}; this version reads descriptors only`);
    return 1;
  }
  const parsed = parseImageReference(args.name);
  if (!parsed.ok) {
    say(`imprimatur: blocked: ${JSON.stringify(args.name)} is not an image reference: ${parsed.error}`);
    return 1;
  }
  // stderr is containerd's debug log: warnings only, as JSON lines.
  const logger = pino({ level: process.env.IMPRIMATUR_LOG_LEVEL ?? "warn" }, pino.destination(2));
  try {
    const problem = checkDescriptor(await readStdin(), args.digest);
    if (problem) {
      say(`imprimatur: blocked: ${problem}`);
      return 1;
    }
    const { policies } = await loadPolicySet(new PolicyFolder(args.policies), { profiles: [], allowEmpty: false });
    const audit = args.auditLog ? new AuditLog(args.auditLog) : undefined;
    const access = await registryAccess({ ...(args.registries ? { registries: args.registries } : {}), ...(args.authFile ? { authFile: args.authFile } : {}) });
    const engine = await buildNodeEngine({ policies, failOpen: args.failOpen, logger, ...(audit ? { auditLog: audit } : {}), ...access });
    try {
      const gate = new PullGate({
        engine,
        failOpen: args.failOpen,
        logger,
        judgementMs: args.timeoutMs,
        refuser: "imprimatur containerd-verifier",
        ...(audit ? { audit } : {}),
        ...(access.staticCredentials ? { staticCredentials: access.staticCredentials } : {}),
      });
      const verdict = await gate.judge({ image: args.name, auth: undefined, pod: undefined, digest: args.digest }, Date.now() + args.timeoutMs);
      if (verdict.outcome === "refused") {
        say(verdict.message);
        return 1;
      }
      say(
        verdict.outcome === "verified"
          ? `imprimatur: allowed ${args.name}@${args.digest} by the policies in ${args.policies}`
          : `imprimatur: allowed unverified (the node fails open): ${verdict.reason}`,
      );
      return 0;
    } finally {
      await engine.close();
      await audit?.close();
    }
  } catch (e) {
    // A verifier that cannot judge blocks: containerd allows only on 0.
    say(`imprimatur: blocked: ${e instanceof PolicyLoadError ? e.message : errorText(e)}`);
    return 2;
  }
}
