// Where the Kubernetes API is and how to authenticate to it: a kubeconfig file when one is given, else the pod's
// service account. Nothing else is guessed (no ~/.kube/config, no localhost:8080), so a misconfigured server fails
// loudly instead of talking to the wrong cluster. The I/O edge of kubeconfig-document.ts: it reads the files.
import { existsSync, readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { ExecCredentialSource, isSupportedExecApiVersion } from "./exec-credentials.ts";
import { KubeClient, type KubeConnection, type PemSource } from "./kube-client.ts";
import { KubeError } from "./kube-error.ts";
import { mergeKubeconfigs, parseKubeconfig, selectKubeconfigContext, type KubeconfigFile, type SelectedKubeconfig } from "./kubeconfig-document.ts";

export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

export interface KubeConnectionOptions {
  /** The context to use instead of the current-context. */
  context?: string;
  /** Where the service account is mounted (tests); default SERVICE_ACCOUNT_DIR. */
  serviceAccountDir?: string;
  /** The environment to read KUBERNETES_SERVICE_HOST/PORT from; default process.env. */
  env?: NodeJS.ProcessEnv;
}

/** A client for the API the kubeconfig at `path` (or the pod's service account, when no path is given) names. */
export function loadKubeClient(path?: string, options: KubeConnectionOptions = {}): KubeClient {
  return new KubeClient(loadKubeConnection(path, options));
}

/**
 * The connection `path` describes: one kubeconfig file, or several joined with ":" (merged as KUBECONFIG is); without
 * a path, the pod's service account. Throws a KubeError naming the file and the problem.
 */
export function loadKubeConnection(path?: string, options: KubeConnectionOptions = {}): KubeConnection {
  if (path !== undefined && path !== "") {
    const files = path
      .split(":")
      .filter((p) => p !== "")
      .map(readKubeconfigFile);
    return connectionOf(selectKubeconfigContext(mergeKubeconfigs(files), options.context));
  }
  const env = options.env ?? process.env;
  if (env.KUBERNETES_SERVICE_HOST) return inClusterConnection(env, options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR);
  throw new KubeError(
    "no-kubernetes-api",
    "no Kubernetes API to talk to: give a kubeconfig file (e.g. --kubeconfig ~/.kube/config), " +
      "or run in a pod with a service account (KUBERNETES_SERVICE_HOST is not set here)",
  );
}

export function readKubeconfigFile(path: string): KubeconfigFile {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new KubeError("unreadable-kubeconfig", `kubeconfig ${path}: ${(err as Error).message}`, { cause: err });
  }
  return parseKubeconfig(text, path, dirname(resolve(path)));
}

/** The connection a selected context describes; files it names are checked now, so a typo fails at start. */
export function connectionOf(selected: SelectedKubeconfig): KubeConnection {
  const { cluster, user } = selected;
  const origin = `kubeconfig ${selected.files.join(":")}, context "${selected.contextName}"`;
  const fail = (problem: string): never => {
    throw new KubeError("unreadable-kubeconfig", `${origin}: ${problem}`);
  };
  if (user.hasAuthProvider) fail(`user "${selected.userName}": auth-provider is not supported (kubectl removed it too); use an exec plugin`);
  if (user.exec && !isSupportedExecApiVersion(user.exec.apiVersion))
    fail(
      `user "${selected.userName}": exec plugin apiVersion ${JSON.stringify(user.exec.apiVersion)} is not supported (client.authentication.k8s.io/v1 or v1beta1)`,
    );
  if (cluster.proxyUrl !== undefined && /^socks5:/i.test(cluster.proxyUrl)) fail(`cluster "${selected.clusterName}": a socks5 proxy-url is not supported`);
  const ca = pemSource(cluster.certificateAuthorityData, cluster.certificateAuthority, `cluster "${selected.clusterName}": certificate-authority`, fail);
  const clientCert = pemSource(user.clientCertificateData, user.clientCertificate, `user "${selected.userName}": client-certificate`, fail);
  const clientKey = pemSource(user.clientKeyData, user.clientKey, `user "${selected.userName}": client-key`, fail);
  if (user.tokenFile !== undefined && user.token === undefined && !existsSync(user.tokenFile))
    fail(`user "${selected.userName}": token file ${user.tokenFile} does not exist`);

  // A server without a scheme is https when any TLS setting is given, as client-go defaults it.
  let server = cluster.server;
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(server)) server = `${ca || clientCert || cluster.insecureSkipTlsVerify ? "https" : "http"}://${server}`;
  try {
    const url = new URL(server);
    if (url.protocol !== "https:" && url.protocol !== "http:") fail(`cluster "${selected.clusterName}": server must be an https:// URL, got ${url.protocol}`);
  } catch (e) {
    if (e instanceof KubeError) throw e;
    fail(`cluster "${selected.clusterName}": server ${JSON.stringify(cluster.server)} is not a URL`);
  }

  const connection: KubeConnection = {
    server: server.replace(/\/+$/, ""),
    insecureSkipTlsVerify: cluster.insecureSkipTlsVerify,
    namespace: selected.namespace ?? "default",
    origin,
  };
  if (ca) connection.ca = ca;
  if (clientCert) connection.clientCert = clientCert;
  if (clientKey) connection.clientKey = clientKey;
  if (cluster.tlsServerName) connection.tlsServerName = cluster.tlsServerName;
  if (cluster.proxyUrl) connection.proxyUrl = cluster.proxyUrl;
  if (user.token) connection.token = user.token;
  if (user.tokenFile) connection.tokenFile = user.tokenFile;
  if (user.username || user.password) connection.basicAuth = { username: user.username ?? "", password: user.password ?? "" };
  if (user.impersonate) connection.impersonate = user.impersonate;
  if (user.exec) connection.exec = new ExecCredentialSource(user.exec, cluster, `${origin}, user "${selected.userName}"`);
  return connection;
}

/** As client-go's InClusterConfig: https://KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT, the mounted CA and token. */
function inClusterConnection(env: NodeJS.ProcessEnv, dir: string): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST ?? "";
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!port) throw new KubeError("missing-service-account", "running in a pod (KUBERNETES_SERVICE_HOST is set) but KUBERNETES_SERVICE_PORT is not");
  for (const file of ["token", "ca.crt"]) {
    if (!existsSync(`${dir}/${file}`)) {
      throw new KubeError(
        "missing-service-account",
        `running in a pod (KUBERNETES_SERVICE_HOST is set) but ${dir}/${file} is missing; ` +
          `mount the service account token (automountServiceAccountToken: true) or give a kubeconfig file`,
      );
    }
  }
  let namespace = "default";
  try {
    namespace = readFileSync(`${dir}/namespace`, "utf8").trim() || "default";
  } catch {
    // no namespace file: "default", as client-go
  }
  return {
    server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    ca: { file: `${dir}/ca.crt` },
    tokenFile: `${dir}/token`,
    insecureSkipTlsVerify: false,
    namespace,
    origin: "the pod's service account",
  };
}

/** Inline data (base64 of PEM) wins over a file, as in client-go; a file must exist now. */
function pemSource(data: string | undefined, file: string | undefined, what: string, fail: (problem: string) => never): PemSource | undefined {
  if (data) {
    const pem = Buffer.from(data, "base64").toString("utf8");
    if (!pem.includes("-----BEGIN ")) fail(`${what}-data is not base64-encoded PEM`);
    return { pem };
  }
  if (file) {
    if (!existsSync(file)) fail(`${what} ${file} does not exist`);
    return { file };
  }
  return undefined;
}
