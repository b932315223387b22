// The serve configuration file (--config): remote backends, failure policy, cache TTLs, audit log,
// registry access and tag→digest pinning.
// Flags given on the command line override it.
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { parse } from "yaml";
import type { PinningMode } from "../core/digest-pinning.ts";
import { checkTemplatePath, type TemplateKind } from "../core/workload-templates.ts";
import { parseDuration } from "../server/http-body.ts";

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
}

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
  // kube-apiserver caps request bodies at 3 MiB; an AdmissionReview carries object and oldObject.
  maxRequestBytes: 8 * 1024 * 1024,
};

const KNOWN_KEYS = new Set(["apiVersion", "kind", "failurePolicy", "cache", "backends", "auditLog", "maxRequestBytes", "namespacesFile", "kubeconfig", "podTemplates", "registries", "authFile", "digests"]);

export async function loadServerConfig(file: string): Promise<ServerConfig> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (e) {
    throw new Error(`${file}: cannot read config: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (e) {
    throw new Error(`${file}: not valid YAML: ${(e as Error).message.split("\n")[0]}`);
  }
  return parseServerConfig(raw, file, dirname(resolve(file)));
}

export function parseServerConfig(raw: unknown, file: string, baseDir: string): ServerConfig {
  const fail = (path: string, msg: string): never => {
    throw new Error(`${file}: ${path}: ${msg}`);
  };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) fail("(root)", "must be a mapping");
  const o = raw as Record<string, unknown>;
  if (o.apiVersion !== "imprimatur.dev/v1alpha1") fail("apiVersion", `must be "imprimatur.dev/v1alpha1"`);
  if (o.kind !== "ServerConfig") fail("kind", `must be "ServerConfig"`);
  for (const k of Object.keys(o)) if (!KNOWN_KEYS.has(k)) fail(k, "unknown field");
  const config: ServerConfig = { ...DEFAULT_SERVER_CONFIG, backends: [], podTemplates: [], digests: { ...DEFAULT_SERVER_CONFIG.digests } };

  if (o.failurePolicy !== undefined) {
    if (o.failurePolicy !== "Fail" && o.failurePolicy !== "Ignore") fail("failurePolicy", `must be "Fail" (deny when a backend is unreachable) or "Ignore" (admit)`);
    config.failOpen = o.failurePolicy === "Ignore";
  }
  if (o.cache !== undefined) {
    const c = o.cache as Record<string, unknown>;
    if (typeof c !== "object" || c === null) fail("cache", "must be a mapping");
    for (const k of Object.keys(c)) if (!["allowTTL", "denyTTL", "maxEntries"].includes(k)) fail(`cache.${k}`, "unknown field");
    if (c.allowTTL !== undefined) config.allowTtlMs = duration(c.allowTTL, "cache.allowTTL", fail);
    if (c.denyTTL !== undefined) config.denyTtlMs = duration(c.denyTTL, "cache.denyTTL", fail);
    if (c.maxEntries !== undefined) {
      if (!Number.isInteger(c.maxEntries) || (c.maxEntries as number) < 1) fail("cache.maxEntries", "must be a positive integer");
      config.cacheMaxEntries = c.maxEntries as number;
    }
  }
  if (o.backends !== undefined) {
    if (!Array.isArray(o.backends)) fail("backends", "must be a list");
    const names = new Set<string>();
    (o.backends as unknown[]).forEach((b, i) => {
      const path = `backends[${i}]`;
      if (typeof b !== "object" || b === null) fail(path, "must be a mapping");
      const e = b as Record<string, unknown>;
      for (const k of Object.keys(e)) if (!["name", "kubeconfig", "timeout"].includes(k)) fail(`${path}.${k}`, "unknown field");
      if (typeof e.name !== "string" || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(e.name)) fail(`${path}.name`, "must be a DNS label");
      if (names.has(e.name as string)) fail(`${path}.name`, `duplicate backend name ${JSON.stringify(e.name)}`);
      names.add(e.name as string);
      if (typeof e.kubeconfig !== "string" || !e.kubeconfig) fail(`${path}.kubeconfig`, "must be a path to a kubeconfig file");
      config.backends.push({
        name: e.name as string,
        kubeconfig: resolve(baseDir, e.kubeconfig as string),
        timeoutMs: e.timeout === undefined ? 5_000 : duration(e.timeout, `${path}.timeout`, fail),
      });
    });
  }
  if (o.auditLog !== undefined) {
    if (typeof o.auditLog !== "string" || !o.auditLog) fail("auditLog", "must be a file path");
    config.auditLog = resolve(baseDir, o.auditLog as string);
  }
  if (o.namespacesFile !== undefined) {
    if (typeof o.namespacesFile !== "string" || !o.namespacesFile) fail("namespacesFile", "must be a file path");
    config.namespacesFile = resolve(baseDir, o.namespacesFile as string);
  }
  if (o.kubeconfig !== undefined) {
    if (typeof o.kubeconfig !== "string" || !o.kubeconfig) fail("kubeconfig", "must be a file path");
    config.kubeconfig = resolve(baseDir, o.kubeconfig as string);
  }
  for (const key of ["registries", "authFile"] as const) {
    if (o[key] === undefined) continue;
    if (typeof o[key] !== "string" || !o[key]) fail(key, "must be a file path");
    config[key] = resolve(baseDir, o[key] as string);
  }
  if (o.digests !== undefined) {
    const d = o.digests as Record<string, unknown>;
    if (typeof d !== "object" || d === null || Array.isArray(d)) fail("digests", "must be a mapping");
    for (const k of Object.keys(d)) if (!["mode", "cacheTTL", "maxEntries"].includes(k)) fail(`digests.${k}`, "unknown field");
    if (d.mode !== undefined) {
      if (d.mode !== "Mutate" && d.mode !== "Record") fail("digests.mode", `must be "Mutate" (pin tags to digests) or "Record" (resolve and record only)`);
      config.digests.mode = d.mode === "Mutate" ? "mutate" : "record";
    }
    if (d.cacheTTL !== undefined) config.digests.cacheTtlMs = duration(d.cacheTTL, "digests.cacheTTL", fail);
    if (d.maxEntries !== undefined) {
      if (!Number.isInteger(d.maxEntries) || (d.maxEntries as number) < 1) fail("digests.maxEntries", "must be a positive integer");
      config.digests.cacheMaxEntries = d.maxEntries as number;
    }
  }
  if (o.podTemplates !== undefined) {
    if (!Array.isArray(o.podTemplates)) fail("podTemplates", "must be a list");
    (o.podTemplates as unknown[]).forEach((t, i) => config.podTemplates.push(parsePodTemplateKind(t, `podTemplates[${i}]`, fail)));
  }
  if (o.maxRequestBytes !== undefined) {
    if (!Number.isInteger(o.maxRequestBytes) || (o.maxRequestBytes as number) < 1024) fail("maxRequestBytes", "must be an integer ≥ 1024");
    config.maxRequestBytes = o.maxRequestBytes as number;
  }
  return config;
}

/**
 * A custom resource that embeds pod templates, e.g.
 *   {apiVersion: ci.example.com/v1, kind: BuildRun, resource: buildruns, templates: [spec.podTemplate]}
 * `templates` point at PodTemplateSpecs (metadata + spec), `podSpecs` at bare PodSpecs; "[*]" visits lists.
 */
function parsePodTemplateKind(raw: unknown, path: string, fail: (p: string, m: string) => never): ServerConfig["podTemplates"][number] {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return fail(path, "must be a mapping");
  const t = raw as Record<string, unknown>;
  for (const k of Object.keys(t)) if (!["apiVersion", "kind", "resource", "templates", "podSpecs"].includes(k)) fail(`${path}.${k}`, "unknown field");
  if (typeof t.apiVersion !== "string" || !/^[a-z0-9.-]+\/[a-z0-9]+$/.test(t.apiVersion)) fail(`${path}.apiVersion`, "must be group/version, e.g. ci.example.com/v1");
  if (typeof t.kind !== "string" || !/^[A-Z][A-Za-z0-9]*$/.test(t.kind)) fail(`${path}.kind`, "must be a kind name, e.g. BuildRun");
  if (typeof t.resource !== "string" || !/^[a-z0-9.-]+$/.test(t.resource)) fail(`${path}.resource`, "must be the plural resource name, e.g. buildruns");
  const paths = (key: "templates" | "podSpecs"): string[] => {
    const v = t[key];
    if (v === undefined) return [];
    if (!Array.isArray(v) || v.some((p) => typeof p !== "string")) return fail(`${path}.${key}`, "must be a list of paths such as spec.template");
    (v as string[]).forEach((p, i) => {
      const problem = checkTemplatePath(p);
      if (problem) fail(`${path}.${key}[${i}]`, problem);
    });
    return v as string[];
  };
  const templates = paths("templates");
  const podSpecs = paths("podSpecs");
  if (templates.length + podSpecs.length === 0) fail(path, "give at least one path in templates or podSpecs");
  const [group, version] = (t.apiVersion as string).split("/") as [string, string];
  return { group, version, kind: t.kind as string, resource: t.resource as string, templates, podSpecs };
}

function duration(v: unknown, path: string, fail: (p: string, m: string) => never): number {
  const ms = typeof v === "string" ? parseDuration(v) : undefined;
  if (ms === undefined) return fail(path, `must be a duration such as "30s", "5m" or "1h", got ${JSON.stringify(v)}`);
  return ms;
}
