// The three places registry credentials are written the Docker way, read into (key, credential) pairs:
//
//   kubernetes.io/dockerconfigjson secrets, container-tools auth files: {"auths": {KEY: ENTRY, …}}
//   kubernetes.io/dockercfg secrets (the legacy ~/.dockercfg):           {KEY: ENTRY, …}
//   ENTRY: {auth?: base64("user:pass"), username?, password?, identitytoken?, registrytoken?, email?}
//
// KEY is a registry location ("registry.example.com", "https://index.docker.io/v1/", "*.example.com/team");
// the keyring (keyring.ts) decides what it matches. Field names are matched case-insensitively ("Auths",
// "Username"), as Go's encoding/json does for the kubelet.
//
// A malformed entry is skipped and reported; the rest still load. Problems name the source and key, never a
// value (a JSON.parse message can quote the text, so it is never passed on). Pure except loadAuthFile.
import { readFile } from "node:fs/promises";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import type { RegistryCredential } from "./credential.ts";

export type DockerConfigErrorCode =
  /** The auth file cannot be read. */
  | "unreadable"
  /** The document as a whole is unusable: not JSON, not a JSON object, "auths" not an object. */
  | "invalid-document";

/** A docker config document that yields no credentials at all; the message names its source, never a value. */
export class DockerConfigError extends ImprimaturError<DockerConfigErrorCode> {}

export interface DockerConfigEntry {
  /** The registry location as written in the file. */
  key: string;
  credential: RegistryCredential;
}

export interface ParsedDockerConfig {
  entries: DockerConfigEntry[];
  /** One line per skipped entry, e.g. `secret team-a/regcred: entry "quay.io": auth is not valid base64`. */
  problems: string[];
}

export type DockerConfigFormat =
  /** {"auths": {…}}: kubernetes.io/dockerconfigjson, container-tools auth.json, ~/.docker/config.json. */
  | "dockerconfigjson"
  /** {KEY: {…}}: kubernetes.io/dockercfg. */
  | "dockercfg";

const q = (s: string): string => JSON.stringify(s);

// Top-level members of a docker/podman config.json; a file with none of them is taken as the legacy shape.
const CONFIG_JSON_MEMBERS = ["auths", "credhelpers", "credsstore", "httpheaders", "proxies", "currentcontext"];

/**
 * Reads one document. `source` names where it came from in credentials and problems ("secret ns/name",
 * "authfile /path"). Throws when the whole document is unusable (not JSON, not an object); a bad entry is
 * only a problem.
 */
export function parseDockerConfig(text: string, format: DockerConfigFormat, source: string): ParsedDockerConfig {
  return parseDocument(parseJsonObject(text, source), format, source);
}

function parseDocument(document: Record<string, unknown>, format: DockerConfigFormat, source: string): ParsedDockerConfig {
  if (format === "dockercfg") return parseEntries(document, source);
  const auths = field(document, "auths");
  // The kubelet reads a config without "auths" as one with no credentials; an empty result says the same.
  if (auths === undefined || auths === null) return { entries: [], problems: [] };
  if (!isObject(auths)) throw new DockerConfigError("invalid-document", `${source}: "auths" is not a JSON object`);
  return parseEntries(auths, source);
}

/**
 * An auth file of the server's own (--authfile): the dockerconfigjson shape, or the legacy dockercfg shape
 * when it has none of config.json's members ("auths", "credHelpers", …). Rejects, naming the file, when it cannot be read or is not a JSON object.
 */
export async function loadAuthFile(path: string): Promise<ParsedDockerConfig> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new DockerConfigError("unreadable", `auth file ${path}: cannot read it (${code ?? (err as Error).message})`, { cause: err });
  }
  const document = parseJsonObject(text, `auth file ${path}`);
  const source = `authfile ${path}`;
  const isConfigJson = CONFIG_JSON_MEMBERS.some((name) => field(document, name) !== undefined);
  const parsed = parseDocument(document, isConfigJson ? "dockerconfigjson" : "dockercfg", source);
  for (const name of ["credHelpers", "credsStore"]) {
    if (field(document, name.toLowerCase()) !== undefined) parsed.problems.push(`${source}: ${q(name)} is ignored (credential helpers are not supported)`);
  }
  return parsed;
}

function parseJsonObject(text: string, source: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    // V8's message may quote the text (a password); only the position is passed on, and the error is not the cause.
    const position = /position (\d+)/.exec((err as Error).message)?.[1];
    throw new DockerConfigError("invalid-document", `${source}: not valid JSON${position === undefined ? "" : ` (at character ${position})`}`);
  }
  if (!isObject(value)) throw new DockerConfigError("invalid-document", `${source}: not a JSON object`);
  return value;
}

function parseEntries(map: Record<string, unknown>, source: string): ParsedDockerConfig {
  const entries: DockerConfigEntry[] = [];
  const problems: string[] = [];
  for (const [key, value] of Object.entries(map)) {
    const result = parseEntry(value, source);
    if (typeof result === "string") problems.push(`${source}: entry ${q(key)}: ${result}`);
    else entries.push({ key, credential: result });
  }
  return { entries, problems };
}

/** The credential, or why the entry is unusable (never quoting a value). */
function parseEntry(value: unknown, source: string): RegistryCredential | string {
  if (!isObject(value)) return "is not a JSON object";
  const fields: Record<string, string> = {};
  for (const name of ["auth", "username", "password", "identitytoken", "registrytoken", "email"]) {
    const v = field(value, name);
    if (v === undefined || v === null) continue;
    if (typeof v !== "string") return `${name} is not a string`;
    fields[name] = v;
  }
  let username = fields.username;
  let password = fields.password;
  // As the kubelet does (pkg/credentialprovider/config.go, DockerConfigEntry.UnmarshalJSON): a non-empty
  // "auth" replaces username and password; an empty one is ignored.
  if (fields.auth) {
    const decoded = decodeBase64Like(fields.auth);
    if (decoded === undefined) return "auth is not valid base64";
    const colon = decoded.indexOf(":");
    if (colon < 0) return 'auth does not decode to "username:password" (no colon)';
    username = decoded.slice(0, colon);
    password = decoded.slice(colon + 1);
  }
  const credential: RegistryCredential = { source };
  if (username) credential.username = username;
  if (password) credential.password = password;
  if (fields.identitytoken) credential.identityToken = fields.identitytoken;
  if (fields.registrytoken) credential.registryToken = fields.registrytoken;
  if (Object.keys(credential).length === 1) {
    // e.g. {} left behind by `docker login` with a credential store, or an email alone.
    return "holds no credential (no auth, username, password, identitytoken or registrytoken; credential helpers are not supported)";
  }
  return Object.freeze(credential);
}

/**
 * Decodes "auth" the way the kubelet does: standard alphabet; padded ("=" at the end, ignoring surrounding
 * blanks) means strictly padded, otherwise strictly unpadded. Like Go's decoder, line breaks are skipped.
 */
function decodeBase64Like(field: string): string | undefined {
  const padded = field.trim().endsWith("=");
  const text = field.replace(/[\r\n]/g, "");
  if (padded) {
    if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)$/.test(text)) return undefined;
  } else if (text.length % 4 === 1 || !/^[A-Za-z0-9+/]*$/.test(text)) {
    return undefined;
  }
  return Buffer.from(text, "base64").toString("utf8");
}

/** A member by name, exact spelling first, else case-insensitively (Go's encoding/json rule). */
function field(object: Record<string, unknown>, name: string): unknown {
  if (Object.hasOwn(object, name)) return object[name];
  for (const [key, value] of Object.entries(object)) if (key.toLowerCase() === name) return value;
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
