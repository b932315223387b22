// How kube-apiserver reaches a webhook backend described by a kubeconfig file — the convention shared by
// ImagePolicyWebhook and the authentication/authorization webhooks: the current context's cluster `server`
// is the full URL to POST to, its certificate authority verifies the webhook, and the context's user
// carries the credentials kube-apiserver presents (client certificate and/or bearer token).
//
// This module is an I/O edge: it reads the kubeconfig and every file it references.

import { X509Certificate, createPrivateKey } from "node:crypto";
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { Agent } from "undici";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { KubeError } from "../kube/kube-error.ts";
import { parseKubeconfig, type KubeconfigFile } from "../kube/kubeconfig-document.ts";

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

  // Read as client-go reads a kubeconfig (sigs.k8s.io/yaml: YAML 1.1, merge keys), relative paths resolved against
  // the kubeconfig's folder.
  let config: KubeconfigFile;
  try {
    config = parseKubeconfig(text, file, baseDir);
  } catch (err) {
    if (err instanceof KubeError) throw new KubeconfigError("invalid", err.message, { cause: err });
    throw err;
  }
  if (config.clusters.size === 0) {
    if (config.users.size === 0 && config.contexts.size === 0 && config.currentContext === undefined) return fail("is empty or not a YAML mapping");
    return fail("defines no clusters");
  }
  for (const [name, cluster] of config.clusters) if (!cluster.server) fail(`clusters "${name}": server is missing`);
  for (const [name, context] of config.contexts) if (!context.cluster) fail(`contexts "${name}": cluster is missing`);

  // Without a current-context, a lone context is the one meant.
  let contextName: string;
  if (config.currentContext) {
    contextName = config.currentContext;
    if (!config.contexts.has(contextName)) fail(`current-context "${contextName}" is not among its contexts`);
  } else if (config.contexts.size === 1) {
    contextName = [...config.contexts.keys()][0]!;
  } else if (config.contexts.size === 0) {
    return fail("defines no contexts (a context names the cluster and user to use)");
  } else {
    return fail(`has ${config.contexts.size} contexts and no current-context; set current-context`);
  }
  const context = config.contexts.get(contextName)!;
  const clusterName = context.cluster;
  const cluster = config.clusters.get(clusterName) ?? fail(`context "${contextName}" refers to cluster "${clusterName}", which is not defined`);
  const userName = context.user;
  const user = userName ? (config.users.get(userName) ?? fail(`context "${contextName}" refers to user "${userName}", which is not defined`)) : undefined;

  // client-go drops one trailing slash from `server` when it builds the request path.
  const server = cluster.server.replace(/\/$/, "");
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    return fail(`cluster "${clusterName}": server ${JSON.stringify(server)} is not a URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return fail(`cluster "${clusterName}": server must be an https:// URL, got ${url.protocol}`);
  if (cluster.proxyUrl) return fail(`cluster "${clusterName}": proxy-url is not supported for webhook backends`, "unsupported");
  if (user) {
    if (user.exec) fail(`user "${userName}": exec credentials are not supported for webhook backends`, "unsupported");
    if (user.hasAuthProvider) fail(`user "${userName}": auth-provider is not supported for webhook backends`, "unsupported");
    if (user.username || user.password) fail(`user "${userName}": username/password is not supported for webhook backends`, "unsupported");
  }

  const readReferenced = async (what: string, path: string): Promise<string> => {
    try {
      return await readFile(path, "utf8");
    } catch (err) {
      return fail(`cannot read ${what} ${path}: ${describe(err)}`, "unreadable", err);
    }
  };
  const decodeData = (what: string, data: string): string => {
    const decoded = Buffer.from(data, "base64").toString("utf8");
    if (!decoded.includes("-----BEGIN ")) fail(`${what} is not base64-encoded PEM`);
    return decoded;
  };

  const target: WebhookTarget = { url: server, insecureSkipTLSVerify: cluster.insecureSkipTlsVerify };
  // As in client-go, the *-data fields take precedence over the file fields.
  if (cluster.certificateAuthorityData) target.ca = decodeData(`cluster "${clusterName}": certificate-authority-data`, cluster.certificateAuthorityData);
  else if (cluster.certificateAuthority) target.ca = await readReferenced(`cluster "${clusterName}": certificate-authority`, cluster.certificateAuthority);
  if (cluster.tlsServerName) target.serverName = cluster.tlsServerName;
  if (target.ca !== undefined) {
    if (target.insecureSkipTLSVerify) fail(`cluster "${clusterName}": insecure-skip-tls-verify cannot be combined with a certificate authority`);
    try {
      new X509Certificate(target.ca);
    } catch (err) {
      fail(`cluster "${clusterName}": the certificate authority is not a PEM certificate (${describe(err)})`);
    }
  }

  if (user) {
    if (user.clientCertificateData) target.cert = decodeData(`user "${userName}": client-certificate-data`, user.clientCertificateData);
    else if (user.clientCertificate) target.cert = await readReferenced(`user "${userName}": client-certificate`, user.clientCertificate);
    if (user.clientKeyData) target.key = decodeData(`user "${userName}": client-key-data`, user.clientKeyData);
    else if (user.clientKey) target.key = await readReferenced(`user "${userName}": client-key`, user.clientKey);
    if ((target.cert === undefined) !== (target.key === undefined)) {
      fail(`user "${userName}": a client certificate needs both a certificate and a key`);
    }
    if (target.cert !== undefined && target.key !== undefined) {
      let matches: boolean;
      try {
        matches = new X509Certificate(target.cert).checkPrivateKey(createPrivateKey(target.key));
      } catch (err) {
        return fail(`user "${userName}": unreadable client certificate or key (${describe(err)})`);
      }
      if (!matches) fail(`user "${userName}": the client key does not belong to the client certificate`);
    }

    // As documented for kubeconfig, token wins over token-file (which is then not read).
    if (user.token) {
      target.token = user.token;
    } else if (user.tokenFile !== undefined) {
      const token = (await readReferenced(`user "${userName}": token-file`, user.tokenFile)).trim();
      if (token === "") fail(`user "${userName}": token-file ${user.tokenFile} is empty`);
      target.token = token;
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

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
