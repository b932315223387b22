// The serve configuration file (--config): remote backends, failure policy, cache TTLs, audit log,
// registry access, tag→digest pinning and the download limits of signature verification.
// Flags given on the command line override it.
import { dirname, resolve } from "node:path";
import type { PinningMode } from "../core/image-policy/digest-pinning.ts";
import type { BreakGlassAuthorization } from "../core/break-glass.ts";
import { DEFAULT_MAX_BYTES_PER_IMAGE } from "../registry/download-budget.ts";
import { checkTemplatePath, type TemplateKind } from "../core/workload-templates.ts";
import { ConfigChecks, readConfigText, singleYamlDocument } from "./config-checks.ts";
import type { FieldPath } from "./kube-yaml.ts";

export interface BackendConfig {
  name: string;
  kubeconfig: string;
  timeoutMs: number;
}

export interface ServerConfig {
  failOpen: boolean;
  allowTtlMs: number;
  denyTtlMs: number;
  cacheMaxEntries: number;
  backends: BackendConfig[];
  auditLog?: string;
  maxRequestBytes: number;
  /** Reviews answered at once; past it a review gets the failure policy's answer without being judged. */
  maxReviewsInFlight: number;
  /** YAML/JSON map of namespace name → labels, for namespaceSelector without API access. */
  namespacesFile?: string;
  /** Kubeconfig for reading namespace labels (default: in-cluster when running in a pod). */
  kubeconfig?: string;
  /** Custom resources that embed pod templates, judged by PodRestrictions like workloads. */
  podTemplates: Array<TemplateKind & { version: string; resource: string }>;
  /** RegistryConfig file: per-registry CA, client certificate, insecure, mirrors. */
  registries?: string;
  /** The server's own registry credentials (container-tools auth file / dockerconfigjson). */
  authFile?: string;
  /** Tag→digest resolution for digestMutate rules. */
  digests: DigestConfig;
  /** What one image's signature verification may download. */
  verification: VerificationConfig;
  /** Who may use break-glass overrides. */
  breakGlass: BreakGlassConfig;
}

export interface BreakGlassConfig {
  /**
   * SubjectAccessReview: an override is honoured only for a user the cluster's authorizer lets use the verb
   * break-glass on the policy (by name); None: on the annotations alone, for anyone who can create the pod.
   */
  authorization: BreakGlassAuthorization;
  /** How long an authorizer's answer is reused. */
  cacheTtlMs: number;
}

export interface VerificationConfig {
  /** Bytes read from registries per image verification: manifests, referrer lists, signatures, attestations. */
  maxBytesPerImage: number;
  /** Signatures, and separately attestations, downloaded per image from each layout (cosign tag, referrers). */
  maxArtifactsPerImage: number;
}

const MAX_BYTES_PER_IMAGE_RANGE = [64 * 1024, 1024 * 1024 * 1024] as const;
const MAX_ARTIFACTS_PER_IMAGE_RANGE = [1, 1000] as const;

export interface DigestConfig {
  /** mutate: /mutate rewrites tags to digests; record: resolve and record only, never rewrite. */
  mode: PinningMode;
  /** How long a resolved tag is reused (tags move; keep it short). */
  cacheTtlMs: number;
  cacheMaxEntries: number;
}

export const DEFAULT_SERVER_CONFIG: ServerConfig = {
  failOpen: false,
  allowTtlMs: 3_600_000,
  denyTtlMs: 30_000,
  cacheMaxEntries: 10_000,
  backends: [],
  podTemplates: [],
  digests: { mode: "mutate", cacheTtlMs: 30_000, cacheMaxEntries: 10_000 },
  verification: { maxBytesPerImage: DEFAULT_MAX_BYTES_PER_IMAGE, maxArtifactsPerImage: 32 },
  breakGlass: { authorization: "SubjectAccessReview", cacheTtlMs: 10_000 },
  // kube-apiserver caps request bodies at 3 MiB; an AdmissionReview carries object and oldObject.
  maxRequestBytes: 8 * 1024 * 1024,
  // Far above what one replica answers in an apiserver's timeout when the registries answer; reached when they do
  // not (every review waiting on them until its deadline).
  maxReviewsInFlight: 1000,
};

const KNOWN_KEYS = [
  "apiVersion",
  "kind",
  "failurePolicy",
  "cache",
  "backends",
  "auditLog",
  "maxRequestBytes",
  "maxReviewsInFlight",
  "namespacesFile",
  "kubeconfig",
  "podTemplates",
  "registries",
  "authFile",
  "digests",
  "verification",
  "breakGlass",
];
const FILE_KEYS = ["auditLog", "namespacesFile", "kubeconfig", "registries", "authFile"] as const;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Reads and checks a ServerConfig file. Throws a ConfigError listing every problem with its line and field. */
export async function loadServerConfig(file: string): Promise<ServerConfig> {
  const document = singleYamlDocument(await readConfigText(file, "config"), file);
  return parseServerConfig(document.value, file, dirname(resolve(file)), document.lineOf);
}

/**
 * Checks a parsed ServerConfig; `baseDir` resolves its file paths, `lineOf` (from the YAML) places problems.
 * Throws a ConfigError listing every problem.
 */
export function parseServerConfig(raw: unknown, file: string, baseDir: string, lineOf?: (path: FieldPath) => number | undefined): ServerConfig {
  const checks = new ConfigChecks(file, lineOf);
  const config: ServerConfig = {
    ...DEFAULT_SERVER_CONFIG,
    backends: [],
    podTemplates: [],
    digests: { ...DEFAULT_SERVER_CONFIG.digests },
    verification: { ...DEFAULT_SERVER_CONFIG.verification },
    breakGlass: { ...DEFAULT_SERVER_CONFIG.breakGlass },
  };
  const o = checks.mapping(raw, [], KNOWN_KEYS);
  if (o) {
    checks.header(o, "ServerConfig");
    readFields(o, config, checks, baseDir);
  }
  checks.throwIfAny();
  return config;
}

function readFields(o: Record<string, unknown>, config: ServerConfig, checks: ConfigChecks, baseDir: string): void {
  if (o.failurePolicy !== undefined) {
    if (o.failurePolicy !== "Fail" && o.failurePolicy !== "Ignore")
      checks.problem(["failurePolicy"], `must be "Fail" (deny when a backend is unreachable) or "Ignore" (admit)`);
    config.failOpen = o.failurePolicy === "Ignore";
  }
  const cache = o.cache === undefined ? undefined : checks.mapping(o.cache, ["cache"], ["allowTTL", "denyTTL", "maxEntries"]);
  if (cache) {
    if (cache.allowTTL !== undefined) config.allowTtlMs = checks.duration(cache.allowTTL, ["cache", "allowTTL"]) ?? config.allowTtlMs;
    if (cache.denyTTL !== undefined) config.denyTtlMs = checks.duration(cache.denyTTL, ["cache", "denyTTL"]) ?? config.denyTtlMs;
    if (cache.maxEntries !== undefined)
      config.cacheMaxEntries = checks.integer(cache.maxEntries, ["cache", "maxEntries"], 1, "must be a positive integer") ?? config.cacheMaxEntries;
  }
  const backends = o.backends === undefined ? undefined : checks.list(o.backends, ["backends"]);
  const names = new Set<string>();
  for (const [i, raw] of (backends ?? []).entries()) {
    const backend = parseBackend(raw, i, names, checks, baseDir);
    if (backend) config.backends.push(backend);
  }
  for (const key of FILE_KEYS) {
    if (o[key] === undefined) continue;
    const path = checks.filePath(o[key], [key]);
    if (path !== undefined) config[key] = resolve(baseDir, path);
  }
  const digests = o.digests === undefined ? undefined : checks.mapping(o.digests, ["digests"], ["mode", "cacheTTL", "maxEntries"]);
  if (digests) {
    if (digests.mode !== undefined) {
      if (digests.mode !== "Mutate" && digests.mode !== "Record")
        checks.problem(["digests", "mode"], `must be "Mutate" (pin tags to digests) or "Record" (resolve and record only)`);
      config.digests.mode = digests.mode === "Mutate" ? "mutate" : "record";
    }
    if (digests.cacheTTL !== undefined) config.digests.cacheTtlMs = checks.duration(digests.cacheTTL, ["digests", "cacheTTL"]) ?? config.digests.cacheTtlMs;
    if (digests.maxEntries !== undefined)
      config.digests.cacheMaxEntries =
        checks.integer(digests.maxEntries, ["digests", "maxEntries"], 1, "must be a positive integer") ?? config.digests.cacheMaxEntries;
  }
  const verification =
    o.verification === undefined ? undefined : checks.mapping(o.verification, ["verification"], ["maxBytesPerImage", "maxArtifactsPerImage"]);
  if (verification) {
    const inRange = (key: keyof VerificationConfig, [min, max]: readonly [number, number], message: string) => {
      const value = verification[key];
      if (value === undefined) return;
      if (Number.isInteger(value) && (value as number) >= min && (value as number) <= max) config.verification[key] = value as number;
      else checks.problem(["verification", key], message);
    };
    inRange("maxBytesPerImage", MAX_BYTES_PER_IMAGE_RANGE, "must be an integer from 65536 (64 KiB) to 1073741824 (1 GiB): bytes");
    inRange("maxArtifactsPerImage", MAX_ARTIFACTS_PER_IMAGE_RANGE, "must be an integer from 1 to 1000");
  }
  const breakGlass = o.breakGlass === undefined ? undefined : checks.mapping(o.breakGlass, ["breakGlass"], ["authorization", "cacheTTL"]);
  if (breakGlass) {
    if (breakGlass.authorization !== undefined) {
      if (breakGlass.authorization === "SubjectAccessReview" || breakGlass.authorization === "None") config.breakGlass.authorization = breakGlass.authorization;
      else
        checks.problem(
          ["breakGlass", "authorization"],
          `must be "SubjectAccessReview" (only users the cluster lets use the verb break-glass on the policy) or "None" (the annotations alone)`,
        );
    }
    if (breakGlass.cacheTTL !== undefined)
      config.breakGlass.cacheTtlMs = checks.duration(breakGlass.cacheTTL, ["breakGlass", "cacheTTL"]) ?? config.breakGlass.cacheTtlMs;
  }
  const podTemplates = o.podTemplates === undefined ? undefined : checks.list(o.podTemplates, ["podTemplates"]);
  for (const [i, raw] of (podTemplates ?? []).entries()) {
    const kind = parsePodTemplateKind(raw, ["podTemplates", i], checks);
    if (kind) config.podTemplates.push(kind);
  }
  if (o.maxReviewsInFlight !== undefined)
    config.maxReviewsInFlight = checks.integer(o.maxReviewsInFlight, ["maxReviewsInFlight"], 1, "must be a positive integer") ?? config.maxReviewsInFlight;
  if (o.maxRequestBytes !== undefined)
    config.maxRequestBytes = checks.integer(o.maxRequestBytes, ["maxRequestBytes"], 1024, "must be an integer ≥ 1024") ?? config.maxRequestBytes;
}

function parseBackend(raw: unknown, i: number, names: Set<string>, checks: ConfigChecks, baseDir: string): BackendConfig | undefined {
  const path = ["backends", i];
  const e = checks.mapping(raw, path, ["name", "kubeconfig", "timeout"]);
  if (!e) return undefined;
  let name: string | undefined;
  if (typeof e.name !== "string" || !DNS_LABEL.test(e.name)) checks.problem([...path, "name"], "must be a DNS label");
  else if (names.has(e.name)) checks.problem([...path, "name"], `duplicate backend name ${JSON.stringify(e.name)}`);
  else names.add((name = e.name));
  const kubeconfig = checks.filePath(e.kubeconfig, [...path, "kubeconfig"], "must be a path to a kubeconfig file");
  const timeoutMs = e.timeout === undefined ? 5_000 : checks.duration(e.timeout, [...path, "timeout"]);
  if (name === undefined || kubeconfig === undefined || timeoutMs === undefined) return undefined;
  return { name, kubeconfig: resolve(baseDir, kubeconfig), timeoutMs };
}

/**
 * A custom resource that embeds pod templates, e.g.
 *   {apiVersion: ci.example.com/v1, kind: BuildRun, resource: buildruns, templates: [spec.podTemplate]}
 * `templates` point at PodTemplateSpecs (metadata + spec), `podSpecs` at bare PodSpecs; "[*]" visits lists.
 */
function parsePodTemplateKind(raw: unknown, path: FieldPath, checks: ConfigChecks): ServerConfig["podTemplates"][number] | undefined {
  const t = checks.mapping(raw, path, ["apiVersion", "kind", "resource", "templates", "podSpecs"]);
  if (!t) return undefined;
  const text = (key: string, pattern: RegExp, message: string): string | undefined =>
    typeof t[key] === "string" && pattern.test(t[key]) ? t[key] : checks.problem([...path, key], message);
  const apiVersion = text("apiVersion", /^[a-z0-9.-]+\/[a-z0-9]+$/, "must be group/version, e.g. ci.example.com/v1");
  const kind = text("kind", /^[A-Z][A-Za-z0-9]*$/, "must be a kind name, e.g. BuildRun");
  const resource = text("resource", /^[a-z0-9.-]+$/, "must be the plural resource name, e.g. buildruns");
  const paths = (key: "templates" | "podSpecs"): string[] | undefined => {
    const v = t[key];
    if (v === undefined) return [];
    if (!Array.isArray(v) || v.some((p) => typeof p !== "string")) return checks.problem([...path, key], "must be a list of paths such as spec.template");
    let ok = true;
    (v as string[]).forEach((p, i) => {
      const problem = checkTemplatePath(p);
      if (problem) {
        checks.problem([...path, key, i], problem);
        ok = false;
      }
    });
    return ok ? (v as string[]) : undefined;
  };
  const templates = paths("templates");
  const podSpecs = paths("podSpecs");
  if (templates?.length === 0 && podSpecs?.length === 0) checks.problem(path, "give at least one path in templates or podSpecs");
  if (apiVersion === undefined || kind === undefined || resource === undefined || !templates || !podSpecs) return undefined;
  const [group, version] = apiVersion.split("/") as [string, string];
  return { group, version, kind, resource, templates, podSpecs };
}
