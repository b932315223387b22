// The caller tokens file (`serve --caller-tokens FILE`): bearer tokens, or their SHA-256, each naming a caller
// and the cluster it speaks for. Only digests are kept in memory; a presented token is hashed and looked up.
//
//   apiVersion: imprimatur.dev/v1alpha1
//   kind: CallerTokens
//   callers:
//     - name: apiserver-prod          # who, in audit records and logs
//       cluster: prod                 # which policies apply (spec.clusters) and whose cache entries
//       tokenSha256: 5e88...          # hex SHA-256 of the token (printf %s TOKEN | sha256sum)
//     - name: apiserver-staging
//       cluster: staging
//       token: "..."                  # or the token itself (keep the file private)
import { createHash } from "node:crypto";
import { ConfigChecks, readConfigText, singleYamlDocument } from "../config/config-checks.ts";

export const CALLER_TOKENS_KIND = "CallerTokens";

export interface TokenCaller {
  name: string;
  cluster: string;
}

/** Token digests (hex SHA-256) → caller. */
export type CallerTokens = ReadonlyMap<string, TokenCaller>;

const SHA256_HEX = /^[0-9a-f]{64}$/;
/** Caller and cluster names: what a label value may be, so they read well in records and metrics. */
export const CALLER_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
/** Shorter tokens are guessable; kube's own bootstrap tokens carry 16 random characters. */
const MIN_TOKEN_LENGTH = 16;

export function tokenDigest(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Reads a caller tokens file. Throws a ConfigError listing every problem with its line and field. */
export async function loadCallerTokens(file: string): Promise<CallerTokens> {
  return parseCallerTokens(await readConfigText(file, "caller tokens file"), file);
}

export function parseCallerTokens(text: string, file: string): CallerTokens {
  const document = singleYamlDocument(text, file);
  const checks = new ConfigChecks(file, document.lineOf);
  const top = checks.mapping(document.value, [], ["apiVersion", "kind", "callers"]);
  const tokens = new Map<string, TokenCaller>();
  if (top) {
    checks.header(top, CALLER_TOKENS_KIND);
    const callers = checks.list(top.callers ?? null, ["callers"], "must be a list of callers (name, cluster, token or tokenSha256)") ?? [];
    if (top.callers !== undefined && callers.length === 0) checks.problem(["callers"], "is empty: no caller could authenticate");
    callers.forEach((raw, i) => {
      const path = ["callers", i];
      const entry = checks.mapping(raw, path, ["name", "cluster", "token", "tokenSha256"]);
      if (!entry) return;
      const name = nameField(entry.name, [...path, "name"], checks);
      const cluster = nameField(entry.cluster, [...path, "cluster"], checks);
      const digest = digestOf(entry, path, checks);
      if (!name || !cluster || !digest) return;
      const taken = tokens.get(digest);
      if (taken) checks.problem(path, `has the same token as caller ${JSON.stringify(taken.name)}; each caller needs its own`);
      else tokens.set(digest, { name, cluster });
    });
  }
  checks.throwIfAny();
  return tokens;
}

function nameField(value: unknown, path: Array<string | number>, checks: ConfigChecks): string | undefined {
  if (typeof value === "string" && CALLER_NAME.test(value)) return value;
  return checks.problem(path, `must be a name of letters, digits, '-', '_' or '.' (at most 63), got ${JSON.stringify(value)}`);
}

function digestOf(entry: Record<string, unknown>, path: Array<string | number>, checks: ConfigChecks): string | undefined {
  const { token, tokenSha256 } = entry;
  if ((token === undefined) === (tokenSha256 === undefined)) return checks.problem(path, "needs exactly one of token or tokenSha256");
  if (token !== undefined) {
    if (typeof token !== "string" || token.length < MIN_TOKEN_LENGTH || /\s/.test(token)) {
      return checks.problem([...path, "token"], `must be a string of at least ${MIN_TOKEN_LENGTH} characters without spaces`);
    }
    return tokenDigest(token);
  }
  if (typeof tokenSha256 !== "string" || !SHA256_HEX.test(tokenSha256.toLowerCase())) {
    return checks.problem([...path, "tokenSha256"], "must be the hex SHA-256 of the token (64 hex digits)");
  }
  return tokenSha256.toLowerCase();
}
