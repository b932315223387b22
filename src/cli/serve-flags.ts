// `imprimatur serve`'s flags, read and checked in one place into ServeOptions, as the background scan's
// (src/scan/scan-flags.ts) and --tls-secret's (src/tls/tls-secret-flags.ts) are. The help is SERVE_USAGE in serve.ts.
import { availableParallelism } from "node:os";
import { resolve } from "node:path";
import type { ServerConfig } from "../config/server-config.ts";
import { parseDuration } from "../core/primitives/duration.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { clientCaAllowedNames } from "../caller-auth/client-ca-flags.ts";
import type { ScanFlags } from "../scan/scan-flags.ts";
import { clusterKubeconfigs } from "../server/cluster-flags.ts";
import { tlsSecretFlagProblem, type TlsSecretFlags } from "../tls/tls-secret-flags.ts";
import { parseCommandArgs, UsageError } from "./args.ts";

/** A flag, or a combination of flags, that serve cannot start with, found once the flags are read. */
export class ServeFlagError extends ImprimaturError<"not-a-duration" | "needs-kubernetes-api" | "needs-namespace-labels"> {}

/** `imprimatur serve`'s flags, checked; paths stay as given unless said otherwise. */
export interface ServeOptions {
  /** --policies as given: absent means the embedded default policy (or, with --policy-crds, the resources alone). */
  policies: string | undefined;
  policyCrds: boolean;
  requirePolicies: boolean;
  /** --allow-empty or its older name --allow-empty-policies. */
  allowEmptyPolicies: boolean;
  exceptionNamespaces: string[];
  profiles: string[];
  host: string;
  port: number;
  metricsPort: number | undefined;
  /** --workers: processes serving the port (1: this one alone). */
  workers: number;
  /** Absolute. */
  stateDir: string;
  /** For the printed configuration; absent: https://127.0.0.1:PORT. */
  url: string | undefined;
  drainMs: number;
  /** --tls-cert and --tls-key, which go together. */
  certificateFiles: { cert: string; key: string } | undefined;
  /** --tls-secret and its companions, when --tls-secret is given. */
  selfManagedTls: TlsSecretFlags | undefined;
  /** Extra names for a generated or self-managed certificate (--tls-san). */
  tlsHosts: string[];
  /** --namespaces and --kubeconfig: when absent, the config file's may name them. */
  namespacesFile: string | undefined;
  kubeconfig: string | undefined;
  clusters: { home: string | undefined; files: ReadonlyMap<string, string> };
  callers: CallerFlags;
  /** --config, when given (an empty one is not). */
  configFile: string | undefined;
  configFlags: ConfigFlags;
  /** --pod-security or --pod-security-config (which implies it). */
  podSecurity: { configFile: string | undefined } | undefined;
  /** Checked with the config file loaded (backgroundScanOptions), as the cache TTLs are. */
  scan: ScanFlags;
}

export interface CallerFlags {
  clientCa: string | undefined;
  tokens: string | undefined;
  /** The common names a --client-ca certificate may carry; absent: any (--client-ca-any-name), or no CA. */
  allowedNames: string[] | undefined;
  allowUnauthenticated: boolean;
}

/** The flags laid over the config file (or the defaults); the paths are absolute, an empty one is not given. */
export interface ConfigFlags {
  failOpen: boolean;
  /** As given: checked when laid over the config file, so a config file that cannot be read is reported first. */
  allowTtl: string | undefined;
  denyTtl: string | undefined;
  auditLog: string | undefined;
  registries: string | undefined;
  authFile: string | undefined;
  digestMode: "mutate" | "record" | undefined;
}

const SERVE_FLAGS = {
  policies: { type: "string" },
  host: { type: "string" },
  port: { type: "string" },
  "state-dir": { type: "string" },
  "tls-cert": { type: "string" },
  "tls-key": { type: "string" },
  "tls-san": { type: "string", multiple: true },
  "tls-secret": { type: "string" },
  "webhook-configuration": { type: "string" },
  "leader-election-namespace": { type: "string" },
  "leader-election-id": { type: "string" },
  // Hidden, for tests: a shortened rotation timeline and sync interval (docs/tls.md).
  "tls-timeline": { type: "string" },
  "tls-sync-interval": { type: "string" },
  url: { type: "string" },
  config: { type: "string" },
  "fail-open": { type: "boolean" },
  "allow-ttl": { type: "string" },
  "deny-ttl": { type: "string" },
  "audit-log": { type: "string" },
  namespaces: { type: "string" },
  kubeconfig: { type: "string" },
  profile: { type: "string", multiple: true },
  registries: { type: "string" },
  authfile: { type: "string" },
  "digest-mode": { type: "string" },
  "allow-empty": { type: "boolean" },
  "require-policies": { type: "boolean" },
  "exceptions-namespace": { type: "string", multiple: true },
  "allow-empty-policies": { type: "boolean" },
  "policy-crds": { type: "boolean" },
  drain: { type: "string" },
  workers: { type: "string" },
  "client-ca": { type: "string" },
  "client-ca-allowed-names": { type: "string", multiple: true },
  "client-ca-any-name": { type: "boolean" },
  "caller-tokens": { type: "string" },
  "cluster-name": { type: "string" },
  "cluster-kubeconfig": { type: "string", multiple: true },
  "allow-unauthenticated": { type: "boolean" },
  "metrics-port": { type: "string" },
  "pod-security": { type: "boolean" },
  "pod-security-config": { type: "string" },
  "background-scan": { type: "boolean" },
  "scan-reports": { type: "string" },
  "scan-rate": { type: "string" },
  "scan-interval": { type: "string" },
  "scan-lease": { type: "string" },
  "scan-exclude-namespace": { type: "string", multiple: true },
  "scan-error-retry": { type: "string" },
} as const;

type ServeFlagValues = ReturnType<typeof parseCommandArgs<typeof SERVE_FLAGS>>["values"];

/** serve's flags as options, or the first problem with them: a usage error, told with where the help is. */
export function readServeFlags(argv: string[]): { options: ServeOptions } | { problem: string } {
  let values: ServeFlagValues;
  try {
    ({ values } = parseCommandArgs(argv, SERVE_FLAGS));
  } catch (e) {
    if (e instanceof UsageError) return { problem: e.message };
    throw e;
  }
  const flags = withDefaults(values);
  const serving = servingFlags(flags);
  if ("problem" in serving) return serving;
  const callerNames = clientCaAllowedNames(flags);
  if ("problem" in callerNames) return callerNames;
  const clusters = clusterKubeconfigs(flags);
  if ("problem" in clusters) return clusters;
  return { options: serveOptions(flags, serving, callerNames.allowedNames, clusters) };
}

const DEFAULTS = { host: "0.0.0.0", port: "8443", "state-dir": ".state", drain: "5s" } as const;

function withDefaults(values: ServeFlagValues) {
  return {
    ...values,
    host: values.host ?? DEFAULTS.host,
    port: values.port ?? DEFAULTS.port,
    "state-dir": values["state-dir"] ?? DEFAULTS["state-dir"],
    drain: values.drain ?? DEFAULTS.drain,
  };
}

type ServeFlagValuesWithDefaults = ReturnType<typeof withDefaults>;

interface ServingFlags {
  port: number;
  metricsPort: number | undefined;
  workers: number;
  drainMs: number;
  digestMode: "mutate" | "record" | undefined;
}

/** The listeners', the drain's, the digest mode's and the certificate's flags, in the order they are checked. */
function servingFlags(flags: ServeFlagValuesWithDefaults): ServingFlags | { problem: string } {
  const drainMs = parseDuration(flags.drain);
  if (drainMs === undefined || !(drainMs >= 0)) return { problem: `--drain must be a duration such as 5s, got ${flags.drain}` };
  const digestMode = flags["digest-mode"];
  if (digestMode !== undefined && !isDigestMode(digestMode)) return { problem: `--digest-mode must be mutate or record, got ${digestMode}` };
  const port = portNumber(flags.port);
  if (port === undefined) return { problem: `--port must be a port number, got ${flags.port}` };
  const metricsFlag = flags["metrics-port"];
  const metricsPort = metricsFlag === undefined ? undefined : portNumber(metricsFlag);
  if (metricsFlag !== undefined && metricsPort === undefined) return { problem: `--metrics-port must be a port number, got ${metricsFlag}` };
  const workers = workerCount(flags.workers);
  if (workers === undefined) return { problem: `--workers must be a number of processes from 1 to ${MAX_WORKERS}, or auto, got ${flags.workers}` };
  // Another cluster's own policy resources are read by its own loader, which the workers' snapshots do not carry yet.
  if (workers > 1 && flags["policy-crds"] && (flags["cluster-kubeconfig"] ?? []).length > 0)
    return { problem: "--workers above 1 cannot be combined with --policy-crds and --cluster-kubeconfig yet" };
  if (Boolean(flags["tls-cert"]) !== Boolean(flags["tls-key"])) return { problem: "--tls-cert and --tls-key go together" };
  const tlsSecretProblem = tlsSecretFlagProblem(flags, Boolean(flags["tls-cert"]));
  if (tlsSecretProblem !== undefined) return { problem: tlsSecretProblem };
  return { port, metricsPort, workers, drainMs, digestMode };
}

/** More processes than this is a typo, not a machine. */
const MAX_WORKERS = 64;

/** --workers: a count, or auto (one per CPU the process may use); absent: 1. */
function workerCount(text: string | undefined): number | undefined {
  if (text === undefined) return 1;
  if (text === "auto") return Math.min(MAX_WORKERS, availableParallelism());
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  return n >= 1 && n <= MAX_WORKERS ? n : undefined;
}

function serveOptions(
  flags: ServeFlagValuesWithDefaults,
  serving: ServingFlags,
  allowedNames: string[] | undefined,
  clusters: { home: string | undefined; files: ReadonlyMap<string, string> },
): ServeOptions {
  const [cert, key] = [flags["tls-cert"], flags["tls-key"]];
  return {
    policies: flags.policies,
    policyCrds: flags["policy-crds"] === true,
    requirePolicies: flags["require-policies"] === true,
    allowEmptyPolicies: flags["allow-empty"] === true || flags["allow-empty-policies"] === true,
    exceptionNamespaces: flags["exceptions-namespace"] ?? [],
    profiles: flags.profile ?? [],
    host: flags.host,
    port: serving.port,
    metricsPort: serving.metricsPort,
    workers: serving.workers,
    stateDir: resolve(flags["state-dir"]),
    url: flags.url,
    drainMs: serving.drainMs,
    certificateFiles: cert && key ? { cert, key } : undefined,
    selfManagedTls: flags["tls-secret"] ? tlsSecretFlags(flags) : undefined,
    tlsHosts: flags["tls-san"] ?? [],
    namespacesFile: flags.namespaces,
    kubeconfig: flags.kubeconfig,
    clusters,
    callers: {
      clientCa: flags["client-ca"],
      tokens: flags["caller-tokens"],
      allowedNames,
      allowUnauthenticated: flags["allow-unauthenticated"] === true,
    },
    configFile: flags.config || undefined,
    configFlags: {
      failOpen: flags["fail-open"] === true,
      allowTtl: flags["allow-ttl"],
      denyTtl: flags["deny-ttl"],
      auditLog: flags["audit-log"] ? resolve(flags["audit-log"]) : undefined,
      registries: flags.registries ? resolve(flags.registries) : undefined,
      authFile: flags.authfile ? resolve(flags.authfile) : undefined,
      digestMode: serving.digestMode,
    },
    podSecurity: flags["pod-security"] || flags["pod-security-config"] ? { configFile: flags["pod-security-config"] } : undefined,
    scan: scanFlags(flags),
  };
}

function tlsSecretFlags(flags: TlsSecretFlags): TlsSecretFlags {
  return {
    "tls-secret": flags["tls-secret"],
    "webhook-configuration": flags["webhook-configuration"],
    "leader-election-namespace": flags["leader-election-namespace"],
    "leader-election-id": flags["leader-election-id"],
    "tls-timeline": flags["tls-timeline"],
    "tls-sync-interval": flags["tls-sync-interval"],
  };
}

function scanFlags(flags: ScanFlags): ScanFlags {
  return {
    "background-scan": flags["background-scan"],
    "scan-reports": flags["scan-reports"],
    "scan-rate": flags["scan-rate"],
    "scan-interval": flags["scan-interval"],
    "scan-lease": flags["scan-lease"],
    "scan-exclude-namespace": flags["scan-exclude-namespace"],
    "scan-error-retry": flags["scan-error-retry"],
  };
}

function isDigestMode(mode: string): mode is "mutate" | "record" {
  return mode === "mutate" || mode === "record";
}

/** The port a flag names, or undefined when it names none. */
function portNumber(text: string): number | undefined {
  return /^\d+$/.test(text) && Number(text) <= 65535 ? Number(text) : undefined;
}

/** Lays the flags over the server's configuration (changed in place, and returned); throws ServeFlagError for a TTL that is no duration. */
export function layConfigFlags(config: ServerConfig, flags: ConfigFlags): ServerConfig {
  if (flags.failOpen) config.failOpen = true;
  for (const [flag, raw, key] of [
    ["allow-ttl", flags.allowTtl, "allowTtlMs"],
    ["deny-ttl", flags.denyTtl, "denyTtlMs"],
  ] as const) {
    if (raw === undefined) continue;
    const ms = parseDuration(raw);
    if (ms === undefined || ms < 0) throw new ServeFlagError("not-a-duration", `--${flag}: not a duration: ${raw}`);
    config[key] = ms;
  }
  if (flags.auditLog !== undefined) config.auditLog = flags.auditLog;
  if (flags.registries !== undefined) config.registries = flags.registries;
  if (flags.authFile !== undefined) config.authFile = flags.authFile;
  if (flags.digestMode !== undefined) config.digests.mode = flags.digestMode;
  return config;
}
