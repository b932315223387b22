// Per-registry connection settings (TLS material, plain HTTP, mirrors) and the endpoints they give an image's
// registry. Pure: no I/O; the registries file (src/config/registries-file.ts) reads these from YAML.
import { canonicalRegistryHost, DOCKER_HUB, DOCKER_HUB_API_HOST, registryApiHost } from "../core/image-reference.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export interface RegistrySettings {
  /** host[:port] as written in image references: "registry.example.com:5000", "docker.io". */
  host: string;
  /** PEM: CA certificate(s) trusted for this host, on top of the system roots. */
  ca?: string;
  /** PEM: client certificate (mutual TLS), with clientKey. */
  clientCert?: string;
  /** PEM: the client certificate's private key. */
  clientKey?: string;
  /** Plain HTTP. Only ever used for a host listed with insecure: true; nothing falls back to HTTP. */
  insecure?: boolean;
  /** Mirror hosts, tried in order before the registry itself. */
  mirrors?: string[];
  /**
   * Connections to this host may go to loopback, link-local, unspecified and cloud metadata addresses
   * (local-addresses.ts); without it they are refused, whatever names the host.
   */
  allowLocalAddresses?: boolean;
  /**
   * The server's own credentials (--authfile) are offered to this host for lookups a namespaced policy causes
   * too; without it such lookups carry only the pod's pull secrets, or none.
   */
  serverCredentialsForNamespacedPolicies?: boolean;
}

/** Settings by normalized host. */
export type RegistrySettingsMap = ReadonlyMap<string, RegistrySettings>;

/** A host as written in settings, as image references name it (lowercased, Docker Hub's legacy name as docker.io). */
export function normalizeRegistryHost(host: string): string {
  return canonicalRegistryHost(host.trim());
}

/**
 * A host listed twice in a settings list given in code. The registries file reports the same with its file and line
 * before it gets here (src/config/registries-file.ts); this is for the callers that build settings themselves.
 */
export class RegistrySettingsError extends ImprimaturError<"duplicate-host"> {}

/** A settings map from a list; a host listed twice is an error (which entry would win is not obvious). */
export function registrySettingsMap(list: RegistrySettings[]): RegistrySettingsMap {
  const map = new Map<string, RegistrySettings>();
  for (const settings of list) {
    const host = normalizeRegistryHost(settings.host);
    if (map.has(host)) throw new RegistrySettingsError("duplicate-host", `registry ${host} is listed twice`);
    map.set(host, { ...settings, host });
  }
  return map;
}

/** The settings that apply to a host as contacted (Docker Hub's entry applies to its API host too). */
export function settingsForHost(map: RegistrySettingsMap, host: string): RegistrySettings | undefined {
  const normalized = normalizeRegistryHost(host);
  return map.get(normalized) ?? (normalized === DOCKER_HUB_API_HOST ? map.get(DOCKER_HUB) : undefined);
}

/** Whether plain HTTP to this host was explicitly allowed. */
export function isInsecureHost(map: RegistrySettingsMap, host: string): boolean {
  return settingsForHost(map, host)?.insecure === true;
}

/** One place an image's registry is reached: a mirror or the registry itself. */
export interface RegistryEndpoint {
  /** The image's registry, as in the reference: "docker.io". */
  registry: string;
  /** The host contacted: "mirror.example.com", "registry-1.docker.io", "registry.example.com:5000". */
  host: string;
  /** The host credentials are looked up for: the mirror's own host, or the registry as in the reference. */
  credentialHost: string;
  /** "https://registry-1.docker.io", "http://127.0.0.1:5001". */
  origin: string;
  insecure: boolean;
  mirror: boolean;
}

/** Mirrors in their listed order, then the registry itself. */
export function endpointsFor(map: RegistrySettingsMap, registry: string): RegistryEndpoint[] {
  const normalized = normalizeRegistryHost(registry);
  const endpoints: RegistryEndpoint[] = [];
  for (const mirror of settingsForHost(map, normalized)?.mirrors ?? []) {
    const host = normalizeRegistryHost(mirror);
    endpoints.push(endpoint(map, normalized, host, host, true));
  }
  endpoints.push(endpoint(map, normalized, registryApiHost(normalized), normalized, false));
  return endpoints;
}

function endpoint(map: RegistrySettingsMap, registry: string, host: string, credentialHost: string, mirror: boolean): RegistryEndpoint {
  const insecure = isInsecureHost(map, host);
  const origin = new URL(`${insecure ? "http" : "https"}://${host}`).origin;
  return { registry, host, credentialHost, origin, insecure, mirror };
}

/** "host[:port]" of a URL, with the default port left out as in image references. */
export function hostOf(url: URL): string {
  return url.host.toLowerCase();
}
