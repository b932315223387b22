// The registries file: per-registry TLS material, plain-HTTP registries and mirrors for the registry client.
//
//   apiVersion: imprimatur.dev/v1alpha1
//   kind: RegistryConfig
//   registries:
//     - host: registry.example.com:5000
//       ca: ca.pem                      # file paths are relative to this file
//       clientCertificate: client.pem
//       clientKey: client-key.pem
//     - host: 127.0.0.1:5001
//       insecure: true                  # plain HTTP, for this host only
//     - host: docker.io
//       mirrors: [mirror.example.com]
//
// Certificates and keys are read and checked here, so a wrong path or a key that does not belong to its
// certificate stops the server at startup instead of failing every pull later.
import { X509Certificate, createPrivateKey } from "node:crypto";
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { parse } from "yaml";
import { parseImageReference } from "../core/image-reference.ts";
import { normalizeRegistryHost, registrySettingsMap, type RegistrySettings, type RegistrySettingsMap } from "../registry/registry-settings.ts";

const ROOT_KEYS = new Set(["apiVersion", "kind", "registries"]);
const ENTRY_KEYS = new Set(["host", "ca", "clientCertificate", "clientKey", "insecure", "mirrors"]);

export async function loadRegistriesFile(file: string): Promise<RegistrySettingsMap> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (e) {
    throw new Error(`${file}: cannot read registries file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (e) {
    throw new Error(`${file}: not valid YAML: ${(e as Error).message.split("\n")[0]}`);
  }
  return parseRegistriesConfig(raw, file, dirname(resolve(file)));
}

/** Validates a parsed registries file; `baseDir` resolves the certificate paths. */
export async function parseRegistriesConfig(raw: unknown, file: string, baseDir: string): Promise<RegistrySettingsMap> {
  const fail = (path: string, msg: string): never => {
    throw new Error(`${file}: ${path}: ${msg}`);
  };
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return fail("(root)", "must be a mapping");
  const o = raw as Record<string, unknown>;
  if (o.apiVersion !== "imprimatur.dev/v1alpha1") fail("apiVersion", `must be "imprimatur.dev/v1alpha1"`);
  if (o.kind !== "RegistryConfig") fail("kind", `must be "RegistryConfig"`);
  for (const k of Object.keys(o)) if (!ROOT_KEYS.has(k)) fail(k, "unknown field");
  if (o.registries === undefined || o.registries === null) return new Map();
  if (!Array.isArray(o.registries)) return fail("registries", "must be a list");

  const readPem = async (path: string, value: unknown): Promise<string> => {
    if (typeof value !== "string" || value === "") return fail(path, "must be a file path");
    try {
      return await readFile(resolve(baseDir, value), "utf8");
    } catch (e) {
      return fail(path, `cannot read ${value}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  };

  const list: RegistrySettings[] = [];
  const seen = new Map<string, string>();
  for (const [i, entryRaw] of (o.registries as unknown[]).entries()) {
    const path = `registries[${i}]`;
    if (typeof entryRaw !== "object" || entryRaw === null || Array.isArray(entryRaw)) fail(path, "must be a mapping");
    const e = entryRaw as Record<string, unknown>;
    for (const k of Object.keys(e)) if (!ENTRY_KEYS.has(k)) fail(`${path}.${k}`, "unknown field");

    const host = registryHost(e.host, `${path}.host`, fail);
    const earlier = seen.get(host);
    if (earlier !== undefined) fail(`${path}.host`, `${host} is already listed at ${earlier}`);
    seen.set(host, path);
    const settings: RegistrySettings = { host };

    if (e.insecure !== undefined) {
      if (typeof e.insecure !== "boolean") fail(`${path}.insecure`, "must be true or false");
      if (e.insecure === true) {
        for (const k of ["ca", "clientCertificate", "clientKey"]) {
          if (e[k] !== undefined) fail(`${path}.${k}`, "has no effect with insecure: true (plain HTTP, no TLS); remove one of them");
        }
        settings.insecure = true;
      }
    }
    if (e.ca !== undefined) {
      const pem = await readPem(`${path}.ca`, e.ca);
      certificate(pem, `${path}.ca`, fail);
      settings.ca = pem;
    }
    if ((e.clientCertificate === undefined) !== (e.clientKey === undefined)) {
      fail(`${path}.${e.clientKey === undefined ? "clientKey" : "clientCertificate"}`, "clientCertificate and clientKey go together; give both or neither");
    }
    if (e.clientCertificate !== undefined) {
      const certPem = await readPem(`${path}.clientCertificate`, e.clientCertificate);
      const keyPem = await readPem(`${path}.clientKey`, e.clientKey);
      const cert = certificate(certPem, `${path}.clientCertificate`, fail);
      let key: ReturnType<typeof createPrivateKey>;
      try {
        key = createPrivateKey(keyPem);
      } catch {
        return fail(`${path}.clientKey`, `${String(e.clientKey)} does not hold a PEM private key`);
      }
      if (!cert.checkPrivateKey(key)) fail(`${path}.clientKey`, `${String(e.clientKey)} is not the key of ${String(e.clientCertificate)}`);
      settings.clientCert = certPem;
      settings.clientKey = keyPem;
    }
    if (e.mirrors !== undefined) {
      if (!Array.isArray(e.mirrors)) fail(`${path}.mirrors`, "must be a list of hosts");
      const mirrors: string[] = [];
      for (const [j, m] of (e.mirrors as unknown[]).entries()) {
        const mirror = registryHost(m, `${path}.mirrors[${j}]`, fail);
        if (mirror === host) fail(`${path}.mirrors[${j}]`, "is the registry itself; list only other hosts");
        if (mirrors.includes(mirror)) fail(`${path}.mirrors[${j}]`, `${mirror} is listed twice`);
        mirrors.push(mirror);
      }
      settings.mirrors = mirrors;
    }
    list.push(settings);
  }
  return registrySettingsMap(list);
}

/** A host as image references write it ("registry.example.com:5000"), normalized; anything else fails. */
function registryHost(value: unknown, path: string, fail: (p: string, m: string) => never): string {
  if (typeof value !== "string" || value === "") return fail(path, 'must be a registry host such as "registry.example.com:5000"');
  const host = normalizeRegistryHost(value);
  // The image-reference grammar decides what a registry host is, so settings match references exactly.
  const parsed = parseImageReference(`${host}/probe`);
  if (!parsed.ok || parsed.ref.registry !== host) {
    return fail(path, `${JSON.stringify(value)} is not a registry host as image references write it (host[:port]; a name without "." or ":" other than localhost reads as a Docker Hub path)`);
  }
  return host;
}

function certificate(pem: string, path: string, fail: (p: string, m: string) => never): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch {
    return fail(path, "does not hold a PEM certificate");
  }
}
