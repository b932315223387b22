// The registries file: per-registry TLS material, plain-HTTP registries, mirrors, local addresses and whether the
// server's own credentials serve namespaced policies, for the registry client.
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
//     - host: registry.local:5000
//       allowLocalAddresses: true         # may be (or resolve to) 127.0.0.1, 169.254.x.x…; refused otherwise
//       serverCredentialsForNamespacedPolicies: true  # --authfile credentials for namespaced policies' lookups too
//
// Certificates and keys are read and checked here, so a wrong path or a key that does not belong to its
// certificate stops the server at startup instead of failing every pull later.
import { X509Certificate, createPrivateKey, type KeyObject } from "node:crypto";
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { formatFieldPath } from "../core/primitives/field-path.ts";
import { parseImageReference } from "../core/image-reference.ts";
import { normalizeRegistryHost, registrySettingsMap, type RegistrySettings, type RegistrySettingsMap } from "../registry/registry-settings.ts";
import { ConfigChecks, readConfigText, singleYamlDocument } from "./config-checks.ts";
import type { FieldPath } from "./kube-yaml.ts";

const ROOT_KEYS = ["apiVersion", "kind", "registries"];
const ENTRY_KEYS = ["host", "ca", "clientCertificate", "clientKey", "insecure", "mirrors", "allowLocalAddresses", "serverCredentialsForNamespacedPolicies"];
const FLAG_KEYS = ["allowLocalAddresses", "serverCredentialsForNamespacedPolicies"] as const;
const TLS_KEYS = ["ca", "clientCertificate", "clientKey"];

/** Reads and checks a RegistryConfig file. Throws a ConfigError listing every problem with its line and field. */
export async function loadRegistriesFile(file: string): Promise<RegistrySettingsMap> {
  const document = singleYamlDocument(await readConfigText(file, "registries file"), file);
  return parseRegistriesConfig(document.value, file, dirname(resolve(file)), document.lineOf);
}

/** Checks a parsed registries file; `baseDir` resolves the certificate paths, `lineOf` places problems. */
export async function parseRegistriesConfig(
  raw: unknown,
  file: string,
  baseDir: string,
  lineOf?: (path: FieldPath) => number | undefined,
): Promise<RegistrySettingsMap> {
  const checks = new ConfigChecks(file, lineOf);
  const o = checks.mapping(raw, [], ROOT_KEYS);
  const list: RegistrySettings[] = [];
  if (o) {
    checks.header(o, "RegistryConfig");
    const entries = o.registries === undefined || o.registries === null ? [] : (checks.list(o.registries, ["registries"]) ?? []);
    const seen = new Map<string, string>();
    for (const [i, entry] of entries.entries()) {
      const settings = await parseEntry(entry, ["registries", i], seen, checks, baseDir);
      if (settings) list.push(settings);
    }
  }
  checks.throwIfAny();
  return registrySettingsMap(list);
}

async function parseEntry(
  raw: unknown,
  path: FieldPath,
  seen: Map<string, string>,
  checks: ConfigChecks,
  baseDir: string,
): Promise<RegistrySettings | undefined> {
  const e = checks.mapping(raw, path, ENTRY_KEYS);
  if (!e) return undefined;
  const at = (...rest: Array<string | number>): FieldPath => [...path, ...rest];
  const host = registryHost(e.host, at("host"), checks);
  if (host !== undefined) {
    const earlier = seen.get(host);
    if (earlier !== undefined) checks.problem(at("host"), `${host} is already listed at ${earlier}`);
    else seen.set(host, formatFieldPath(path));
  }
  const settings: RegistrySettings = { host: host ?? "" };

  if (e.insecure !== undefined && typeof e.insecure !== "boolean") checks.problem(at("insecure"), "must be true or false");
  if (e.insecure === true) {
    for (const k of TLS_KEYS) if (e[k] !== undefined) checks.problem(at(k), "has no effect with insecure: true (plain HTTP, no TLS); remove one of them");
    settings.insecure = true;
  } else {
    const readPem = async (key: string): Promise<string | undefined> => {
      const name = checks.filePath(e[key], at(key));
      if (name === undefined) return undefined;
      try {
        return await readFile(resolve(baseDir, name), "utf8");
      } catch (err) {
        return checks.problem(at(key), `cannot read ${name}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
    };
    if (e.ca !== undefined) {
      const pem = await readPem("ca");
      if (pem !== undefined && certificate(pem, at("ca"), checks)) settings.ca = pem;
    }
    if ((e.clientCertificate === undefined) !== (e.clientKey === undefined)) {
      checks.problem(at(e.clientKey === undefined ? "clientKey" : "clientCertificate"), "clientCertificate and clientKey go together; give both or neither");
    } else if (e.clientCertificate !== undefined) {
      const certPem = await readPem("clientCertificate");
      const keyPem = await readPem("clientKey");
      const cert = certPem === undefined ? undefined : certificate(certPem, at("clientCertificate"), checks);
      const key = keyPem === undefined ? undefined : privateKey(keyPem, `${String(e.clientKey)} does not hold a PEM private key`, at("clientKey"), checks);
      if (cert && key) {
        if (!cert.checkPrivateKey(key)) checks.problem(at("clientKey"), `${String(e.clientKey)} is not the key of ${String(e.clientCertificate)}`);
        settings.clientCert = certPem;
        settings.clientKey = keyPem;
      }
    }
  }
  for (const k of FLAG_KEYS) {
    if (e[k] === undefined) continue;
    if (typeof e[k] !== "boolean") checks.problem(at(k), "must be true or false");
    else if (e[k]) settings[k] = true;
  }
  if (e.mirrors !== undefined) {
    const mirrors: string[] = [];
    for (const [j, m] of (checks.list(e.mirrors, at("mirrors"), "must be a list of hosts") ?? []).entries()) {
      const mirror = registryHost(m, at("mirrors", j), checks);
      if (mirror === undefined) continue;
      if (mirror === host) checks.problem(at("mirrors", j), "is the registry itself; list only other hosts");
      else if (mirrors.includes(mirror)) checks.problem(at("mirrors", j), `${mirror} is listed twice`);
      else mirrors.push(mirror);
    }
    settings.mirrors = mirrors;
  }
  return settings;
}

/** A host as image references write it ("registry.example.com:5000"), normalized; anything else is a problem. */
function registryHost(value: unknown, path: FieldPath, checks: ConfigChecks): string | undefined {
  if (typeof value !== "string" || value === "") return checks.problem(path, 'must be a registry host such as "registry.example.com:5000"');
  const host = normalizeRegistryHost(value);
  // The image-reference grammar decides what a registry host is, so settings match references exactly.
  const parsed = parseImageReference(`${host}/probe`);
  if (!parsed.ok || parsed.ref.registry !== host) {
    return checks.problem(
      path,
      `${JSON.stringify(value)} is not a registry host as image references write it (host[:port]; a name without "." or ":" other than localhost reads as a Docker Hub path)`,
    );
  }
  return host;
}

function certificate(pem: string, path: FieldPath, checks: ConfigChecks): X509Certificate | undefined {
  try {
    return new X509Certificate(pem);
  } catch {
    return checks.problem(path, "does not hold a PEM certificate");
  }
}

function privateKey(pem: string, message: string, path: FieldPath, checks: ConfigChecks): KeyObject | undefined {
  try {
    return createPrivateKey(pem);
  } catch {
    return checks.problem(path, message);
  }
}
