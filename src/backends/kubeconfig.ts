// How kube-apiserver reaches a webhook backend described by a kubeconfig file — the convention shared by
// ImagePolicyWebhook and the authentication/authorization webhooks: the current context's cluster `server`
// is the full URL to POST to, its certificate authority verifies the webhook, and the context's user
// carries the credentials kube-apiserver presents (client certificate and/or bearer token).
//
// This module is an I/O edge: it reads the kubeconfig and every file it references.

import { X509Certificate, createPrivateKey } from "node:crypto";
import { readFile } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { Agent } from "undici";
import { readKubeYaml } from "../config/kube-yaml.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type KubeconfigErrorCode =
  /** The kubeconfig, or a file it references, cannot be read. */
  | "unreadable"
  /** Not valid YAML, or inconsistent: no clusters, a context naming a missing user, a key not matching its certificate. */
  | "invalid"
  /** Valid, but asks for what a webhook backend does not do: exec or auth-provider credentials, a proxy. */
  | "unsupported";

/** A webhook kubeconfig that cannot be used; the message starts "kubeconfig FILE: ". */
export class KubeconfigError extends ImprimaturError<KubeconfigErrorCode> {}

export interface WebhookTarget {
  /** Where to POST, exactly the cluster's `server`. */
  url: string;
  /** PEM bundle that verifies the webhook's certificate; absent: the system roots. */
  ca?: string;
  /** PEM client certificate and key presented to the webhook. */
  cert?: string;
  key?: string;
  /** Bearer token to send as `Authorization: Bearer …` (the dispatcher does not add it). */
  token?: string;
  insecureSkipTLSVerify: boolean;
  /** Name to send as SNI and to verify the webhook's certificate against, instead of the URL's host. */
  serverName?: string;
}

/**
 * Reads a webhook kubeconfig and everything it references. Relative paths (certificate-authority,
 * client-certificate, client-key, token-file) are relative to the kubeconfig's folder, as kubectl does.
 * Throws a KubeconfigError naming the file on any problem.
 */
export async function loadWebhookKubeconfig(file: string): Promise<WebhookTarget> {
  const fail = (problem: string, code: KubeconfigErrorCode = "invalid", cause?: unknown): never => {
    throw new KubeconfigError(code, `kubeconfig ${file}: ${problem}`, { cause });
  };
  const baseDir = dirname(resolve(file));

  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    return fail(`cannot read the file: ${describe(err)}`, "unreadable", err);
  }

  // Parsed here first for two reasons: a YAML error gets a line number, and `token-file` is taken out
  // before @kubernetes/client-node sees it — that library reads it synchronously, relative to the process's
  // working directory rather than the kubeconfig's folder, and throws a bare ENOENT when it is not there.
  // Read as client-go reads a kubeconfig (sigs.k8s.io/yaml: YAML 1.1, merge keys); one document.
  const parsed = readKubeYaml(text);
  const yamlError = parsed.errors[0];
  if (yamlError) return fail(`not valid YAML${yamlError.line !== undefined ? ` (line ${yamlError.line})` : ""}: ${yamlError.message}`);
  const doc: unknown = parsed.documents[0]?.value;
  if (!isRecord(doc)) return fail("is empty or not a YAML mapping");
  const tokenFiles = new Map<string, string>();
  const sanitized: Record<string, unknown> = { ...doc };
  if (Array.isArray(doc["users"])) {
    sanitized["users"] = doc["users"].map((entry: unknown) => {
      if (!isRecord(entry) || !isRecord(entry["user"]) || entry["user"]["token-file"] === undefined) return entry;
      const { "token-file": tokenFile, ...user } = entry["user"];
      if (typeof tokenFile !== "string" || tokenFile === "") fail(`users "${String(entry["name"])}": token-file must be a path`);
      tokenFiles.set(String(entry["name"]), tokenFile as string);
      return { ...entry, user };
    });
  }

  // Loaded lazily: the package is large and only webhook backends need it.
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  try {
    // JSON is YAML, and leaves no room for the two YAML parsers to read a scalar differently.
    kc.loadFromString(JSON.stringify(sanitized));
  } catch (err) {
    return fail(describe(err), "invalid", err);
  }

  if (kc.getClusters().length === 0) return fail("defines no clusters");
  const contexts = kc.getContexts();
  const currentName = kc.getCurrentContext();
  let context;
  if (currentName) {
    context = kc.getContextObject(currentName) ?? fail(`current-context "${currentName}" is not among its contexts`);
  } else if (contexts.length === 1) {
    context = contexts[0]!;
  } else if (contexts.length === 0) {
    return fail("defines no contexts (a context names the cluster and user to use)");
  } else {
    return fail(`has ${contexts.length} contexts and no current-context; set current-context`);
  }
  const cluster = kc.getCluster(context.cluster) ?? fail(`context "${context.name}" refers to cluster "${context.cluster}", which is not defined`);
  const user = context.user ? (kc.getUser(context.user) ?? fail(`context "${context.name}" refers to user "${context.user}", which is not defined`)) : null;

  let url: URL;
  try {
    url = new URL(cluster.server);
  } catch {
    return fail(`cluster "${cluster.name}": server ${JSON.stringify(cluster.server)} is not a URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return fail(`cluster "${cluster.name}": server must be an https:// URL, got ${url.protocol}`);
  if (cluster.proxyUrl) return fail(`cluster "${cluster.name}": proxy-url is not supported for webhook backends`, "unsupported");
  if (user) {
    if (user.exec) fail(`user "${user.name}": exec credentials are not supported for webhook backends`, "unsupported");
    if (user.authProvider) fail(`user "${user.name}": auth-provider is not supported for webhook backends`, "unsupported");
    if (user.username || user.password) fail(`user "${user.name}": username/password is not supported for webhook backends`, "unsupported");
  }

  const readReferenced = async (what: string, path: string): Promise<string> => {
    const full = isAbsolute(path) ? path : join(baseDir, path);
    try {
      return await readFile(full, "utf8");
    } catch (err) {
      return fail(`cannot read ${what} ${full}: ${describe(err)}`, "unreadable", err);
    }
  };
  const decodeData = (what: string, data: string): string => {
    const decoded = Buffer.from(data, "base64").toString("utf8");
    if (!decoded.includes("-----BEGIN ")) fail(`${what} is not base64-encoded PEM`);
    return decoded;
  };

  // client-node drops one trailing slash from `server`; so does client-go when it builds the request path.
  const target: WebhookTarget = { url: cluster.server, insecureSkipTLSVerify: cluster.skipTLSVerify };
  // As in client-go, the *-data fields take precedence over the file fields.
  if (cluster.caData) target.ca = decodeData(`cluster "${cluster.name}": certificate-authority-data`, cluster.caData);
  else if (cluster.caFile) target.ca = await readReferenced(`cluster "${cluster.name}": certificate-authority`, cluster.caFile);
  if (cluster.tlsServerName) target.serverName = cluster.tlsServerName;
  if (target.ca !== undefined) {
    if (target.insecureSkipTLSVerify) fail(`cluster "${cluster.name}": insecure-skip-tls-verify cannot be combined with a certificate authority`);
    try {
      new X509Certificate(target.ca);
    } catch (err) {
      fail(`cluster "${cluster.name}": the certificate authority is not a PEM certificate (${describe(err)})`);
    }
  }

  if (user) {
    if (user.certData) target.cert = decodeData(`user "${user.name}": client-certificate-data`, user.certData);
    else if (user.certFile) target.cert = await readReferenced(`user "${user.name}": client-certificate`, user.certFile);
    if (user.keyData) target.key = decodeData(`user "${user.name}": client-key-data`, user.keyData);
    else if (user.keyFile) target.key = await readReferenced(`user "${user.name}": client-key`, user.keyFile);
    if ((target.cert === undefined) !== (target.key === undefined)) {
      fail(`user "${user.name}": a client certificate needs both a certificate and a key`);
    }
    if (target.cert !== undefined && target.key !== undefined) {
      let matches: boolean;
      try {
        matches = new X509Certificate(target.cert).checkPrivateKey(createPrivateKey(target.key));
      } catch (err) {
        return fail(`user "${user.name}": unreadable client certificate or key (${describe(err)})`);
      }
      if (!matches) fail(`user "${user.name}": the client key does not belong to the client certificate`);
    }

    if (user.token) {
      target.token = user.token;
    } else {
      const tokenFile = tokenFiles.get(user.name);
      if (tokenFile !== undefined) {
        const token = (await readReferenced(`user "${user.name}": token-file`, tokenFile)).trim();
        if (token === "") fail(`user "${user.name}": token-file ${tokenFile} is empty`);
        target.token = token;
      }
    }
  }
  return target;
}

/**
 * An undici dispatcher that connects to `target` with its TLS settings and keeps connections alive.
 * The bearer token, if any, is not added here: send `authorization: Bearer ${target.token}` per request.
 */
export function webhookDispatcher(target: WebhookTarget, opts: { connections?: number } = {}): Agent {
  return new Agent({
    connect: {
      ...(target.ca !== undefined ? { ca: target.ca } : {}),
      ...(target.cert !== undefined ? { cert: target.cert } : {}),
      ...(target.key !== undefined ? { key: target.key } : {}),
      ...(target.serverName !== undefined ? { servername: target.serverName } : {}),
      rejectUnauthorized: !target.insecureSkipTLSVerify,
    },
    ...(opts.connections !== undefined ? { connections: opts.connections } : {}),
    // Idle connections are kept for reuse; 4 s (undici's default) stays under common server idle timeouts
    // (Node's is 5 s), so a request is not written to a socket the server is closing. A server's
    // `Keep-Alive: timeout=` hint overrides it, up to 10 minutes.
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 600_000,
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
