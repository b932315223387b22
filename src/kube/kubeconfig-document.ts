// A kubeconfig read as client-go reads it (k8s.io/client-go/tools/clientcmd): the YAML decoded as kubectl decodes
// it (kube-yaml.ts), relative file paths resolved against the folder of the file that holds them, several files
// merged with the first file to name a cluster, user or context winning (and the first current-context), then the
// current (or asked-for) context's cluster and user picked and checked with client-go's own rules. Pure: the
// caller reads the files (kube-connection.ts); this decides what they say.
//
// Written here rather than taken from @kubernetes/client-node, whose KubeConfig weighed 89 MiB of RSS and 0.4 s
// of start-up for every process, reads token files relative to the working directory, and does not check a
// kubeconfig as kubectl does. No other package reads kubeconfigs.
import { isAbsolute, join, sep } from "node:path";
import { readKubeYaml } from "../config/kube-yaml.ts";
import { KubeError } from "./kube-error.ts";

export interface KubeconfigCluster {
  server: string;
  certificateAuthority?: string;
  /** base64 of PEM, as written in the file. */
  certificateAuthorityData?: string;
  insecureSkipTlsVerify: boolean;
  tlsServerName?: string;
  proxyUrl?: string;
}

export interface ExecEnvVar {
  name: string;
  value: string;
}

export interface KubeconfigExec {
  command: string;
  args: string[];
  env: ExecEnvVar[];
  apiVersion: string;
  installHint?: string;
  provideClusterInfo: boolean;
  interactiveMode?: string;
}

export interface KubeconfigUser {
  clientCertificate?: string;
  clientCertificateData?: string;
  clientKey?: string;
  clientKeyData?: string;
  token?: string;
  tokenFile?: string;
  username?: string;
  password?: string;
  exec?: KubeconfigExec;
  /** Auth providers (gcp, azure, oidc) were removed from kubectl; present only to be refused by name. */
  hasAuthProvider: boolean;
  impersonate?: string;
}

export interface KubeconfigContext {
  cluster: string;
  user: string;
  namespace?: string;
}

/** One file's content, its relative paths already resolved. */
export interface KubeconfigFile {
  path: string;
  clusters: Map<string, KubeconfigCluster>;
  users: Map<string, KubeconfigUser>;
  contexts: Map<string, KubeconfigContext>;
  currentContext?: string;
}

/** What a client connects with: the chosen context, its cluster and its user (an empty user when the context names none). */
export interface SelectedKubeconfig {
  contextName: string;
  clusterName: string;
  userName: string;
  cluster: KubeconfigCluster;
  user: KubeconfigUser;
  namespace?: string;
  /** The files it came from, for messages. */
  files: string[];
}

/**
 * One kubeconfig file's text, parsed and checked for shape; relative paths (certificate-authority, client-certificate,
 * client-key, token-file, and an exec command holding a path separator) are made absolute against `dir`, as
 * client-go's ResolveLocalPaths does. Throws a KubeError "unreadable-kubeconfig" naming the file and line.
 */
export function parseKubeconfig(text: string, path: string, dir: string): KubeconfigFile {
  const fail = (problem: string): never => {
    throw new KubeError("unreadable-kubeconfig", `kubeconfig ${path}: ${problem}`);
  };
  const parsed = readKubeYaml(text);
  const yamlError = parsed.errors[0];
  if (yamlError) fail(`not valid YAML${yamlError.line !== undefined ? ` (line ${yamlError.line})` : ""}: ${yamlError.message}`);
  if (parsed.documents.length > 1) fail("holds more than one YAML document");
  const doc: unknown = parsed.documents[0]?.value ?? {};
  // An empty file is an empty config to client-go.
  if (doc === null) return { path, clusters: new Map(), users: new Map(), contexts: new Map() };
  if (!isRecord(doc)) fail("is not a YAML mapping");
  const root = doc as Record<string, unknown>;
  const resolve = (file: string | undefined): string | undefined => (file === undefined || file === "" || isAbsolute(file) ? file : join(dir, file));

  const file: KubeconfigFile = { path, clusters: new Map(), users: new Map(), contexts: new Map() };
  const current = optionalString(root["current-context"], "current-context", fail);
  if (current) file.currentContext = current;

  for (const [name, cluster] of namedEntries(root, "clusters", "cluster", fail)) {
    const where = `clusters "${name}"`;
    const entry: KubeconfigCluster = {
      server: optionalString(cluster["server"], `${where}: server`, fail) ?? "",
      insecureSkipTlsVerify: optionalBoolean(cluster["insecure-skip-tls-verify"], `${where}: insecure-skip-tls-verify`, fail) ?? false,
    };
    setIfPresent(entry, "certificateAuthority", resolve(optionalString(cluster["certificate-authority"], `${where}: certificate-authority`, fail)));
    setIfPresent(entry, "certificateAuthorityData", optionalString(cluster["certificate-authority-data"], `${where}: certificate-authority-data`, fail));
    setIfPresent(entry, "tlsServerName", optionalString(cluster["tls-server-name"], `${where}: tls-server-name`, fail));
    setIfPresent(entry, "proxyUrl", optionalString(cluster["proxy-url"], `${where}: proxy-url`, fail));
    if (!file.clusters.has(name)) file.clusters.set(name, entry);
  }

  for (const [name, user] of namedEntries(root, "users", "user", fail)) {
    const where = `users "${name}"`;
    const entry: KubeconfigUser = { hasAuthProvider: user["auth-provider"] !== undefined && user["auth-provider"] !== null };
    setIfPresent(entry, "clientCertificate", resolve(optionalString(user["client-certificate"], `${where}: client-certificate`, fail)));
    setIfPresent(entry, "clientCertificateData", optionalString(user["client-certificate-data"], `${where}: client-certificate-data`, fail));
    setIfPresent(entry, "clientKey", resolve(optionalString(user["client-key"], `${where}: client-key`, fail)));
    setIfPresent(entry, "clientKeyData", optionalString(user["client-key-data"], `${where}: client-key-data`, fail));
    setIfPresent(entry, "token", optionalString(user["token"], `${where}: token`, fail));
    setIfPresent(entry, "tokenFile", resolve(optionalString(user["tokenFile"] ?? user["token-file"], `${where}: tokenFile`, fail)));
    setIfPresent(entry, "username", optionalString(user["username"], `${where}: username`, fail));
    setIfPresent(entry, "password", optionalString(user["password"], `${where}: password`, fail));
    setIfPresent(entry, "impersonate", optionalString(user["as"], `${where}: as`, fail));
    const exec = user["exec"];
    if (exec !== undefined && exec !== null) entry.exec = parseExec(exec, where, dir, fail);
    if (!file.users.has(name)) file.users.set(name, entry);
  }

  for (const [name, context] of namedEntries(root, "contexts", "context", fail)) {
    const where = `contexts "${name}"`;
    const entry: KubeconfigContext = {
      cluster: optionalString(context["cluster"], `${where}: cluster`, fail) ?? "",
      user: optionalString(context["user"], `${where}: user`, fail) ?? "",
    };
    setIfPresent(entry, "namespace", optionalString(context["namespace"], `${where}: namespace`, fail));
    if (!file.contexts.has(name)) file.contexts.set(name, entry);
  }
  return file;
}

function parseExec(value: unknown, where: string, dir: string, fail: (problem: string) => never): KubeconfigExec {
  if (!isRecord(value)) fail(`${where}: exec must be a mapping`);
  const exec = value as Record<string, unknown>;
  let command = optionalString(exec["command"], `${where}: exec.command`, fail) ?? "";
  // client-go resolves the command only when it names a path, not a program looked up in PATH.
  if (command.includes(sep) && !isAbsolute(command)) command = join(dir, command);
  const argsValue = exec["args"];
  if (argsValue !== undefined && argsValue !== null && (!Array.isArray(argsValue) || argsValue.some((a) => typeof a !== "string"))) {
    fail(`${where}: exec.args must be a list of strings`);
  }
  const envValue = exec["env"];
  const env: ExecEnvVar[] = [];
  if (envValue !== undefined && envValue !== null) {
    if (!Array.isArray(envValue)) fail(`${where}: exec.env must be a list of {name, value}`);
    for (const item of envValue as unknown[]) {
      // A missing name is left for selectKubeconfigContext to refuse, as client-go does: only when this user is used.
      if (!isRecord(item) || !isOptionalString(item["name"]) || !isOptionalString(item["value"])) {
        fail(`${where}: exec.env must be a list of {name, value}`);
      }
      const variable = item as { name?: string | null; value?: string | null };
      env.push({ name: variable.name ?? "", value: variable.value ?? "" });
    }
  }
  const out: KubeconfigExec = {
    command,
    args: (argsValue as string[] | undefined | null) ?? [],
    env,
    apiVersion: optionalString(exec["apiVersion"], `${where}: exec.apiVersion`, fail) ?? "",
    provideClusterInfo: optionalBoolean(exec["provideClusterInfo"], `${where}: exec.provideClusterInfo`, fail) ?? false,
  };
  setIfPresent(out, "installHint", optionalString(exec["installHint"], `${where}: exec.installHint`, fail));
  setIfPresent(out, "interactiveMode", optionalString(exec["interactiveMode"], `${where}: exec.interactiveMode`, fail));
  return out;
}

/**
 * Several files as one (the KUBECONFIG list): the first file to define a cluster, user or context name wins, and
 * the first current-context set wins, as client-go merges them.
 */
export function mergeKubeconfigs(files: readonly KubeconfigFile[]): KubeconfigFile {
  const merged: KubeconfigFile = { path: files.map((f) => f.path).join(":"), clusters: new Map(), users: new Map(), contexts: new Map() };
  for (const file of files) {
    for (const [name, v] of file.clusters) if (!merged.clusters.has(name)) merged.clusters.set(name, v);
    for (const [name, v] of file.users) if (!merged.users.has(name)) merged.users.set(name, v);
    for (const [name, v] of file.contexts) if (!merged.contexts.has(name)) merged.contexts.set(name, v);
    if (merged.currentContext === undefined && file.currentContext) merged.currentContext = file.currentContext;
  }
  return merged;
}

/**
 * The context to connect with (`contextName`, else the current-context), checked as client-go's ConfirmUsable checks
 * it: the context, its cluster and its user exist; the cluster has a server; data and file are not both given; a
 * client certificate has a key; one authentication method at most; exec has a command and an apiVersion. Throws a
 * KubeError naming the files and the problem.
 */
export function selectKubeconfigContext(config: KubeconfigFile, contextName?: string): SelectedKubeconfig {
  const fail = (code: "no-current-context" | "undefined-cluster" | "unreadable-kubeconfig", problem: string): never => {
    throw new KubeError(code, `kubeconfig ${config.path}: ${problem}`);
  };
  const name = contextName || config.currentContext;
  if (!name) return fail("no-current-context", "no current-context is set (and no context was asked for)");
  const context = config.contexts.get(name) ?? fail(contextName ? "unreadable-kubeconfig" : "no-current-context", `context "${name}" is not defined`);
  if (!context.cluster) fail("undefined-cluster", `context "${name}" names no cluster`);
  const cluster =
    config.clusters.get(context.cluster) ?? fail("undefined-cluster", `context "${name}" names cluster "${context.cluster}", which is not defined`);
  let user: KubeconfigUser = { hasAuthProvider: false };
  if (context.user)
    user = config.users.get(context.user) ?? fail("unreadable-kubeconfig", `context "${name}" names user "${context.user}", which is not defined`);

  const problems: string[] = [];
  const clusterWhere = `cluster "${context.cluster}"`;
  if (!cluster.server) problems.push(`no server found for ${clusterWhere}`);
  else if (!/^https?:\/\//i.test(cluster.server) && !/^[^/:]+(:\d+)?(\/.*)?$/.test(cluster.server))
    problems.push(`${clusterWhere}: server ${JSON.stringify(cluster.server)} is not a URL`);
  if (cluster.certificateAuthority && cluster.certificateAuthorityData)
    problems.push(`certificate-authority-data and certificate-authority are both specified for ${clusterWhere}`);
  if (cluster.insecureSkipTlsVerify && (cluster.certificateAuthority || cluster.certificateAuthorityData)) {
    problems.push(`${clusterWhere}: specifying a root certificates file with the insecure flag is not allowed`);
  }
  if (cluster.proxyUrl !== undefined && !/^(https?|socks5):\/\//i.test(cluster.proxyUrl))
    problems.push(`${clusterWhere}: invalid proxy-url ${JSON.stringify(cluster.proxyUrl)}`);

  const userWhere = `user "${context.user}"`;
  const methods: string[] = [];
  if (user.token) methods.push("token");
  if (user.username || user.password) methods.push("basicAuth");
  if (user.clientCertificate || user.clientCertificateData) {
    if (user.clientCertificate && user.clientCertificateData) problems.push(`client-cert-data and client-cert are both specified for ${userWhere}`);
    if (user.clientKey && user.clientKeyData) problems.push(`client-key-data and client-key are both specified for ${userWhere}`);
    if (!user.clientKey && !user.clientKeyData)
      problems.push(`client-key-data or client-key must be specified for ${userWhere} to use the clientCert authentication method`);
  }
  if (user.exec) {
    if (user.hasAuthProvider) problems.push(`authProvider cannot be provided in combination with an exec plugin for ${userWhere}`);
    if (!user.exec.command) problems.push(`command must be specified for ${userWhere} to use exec authentication plugin`);
    if (!user.exec.apiVersion) problems.push(`apiVersion must be specified for ${userWhere} to use exec authentication plugin`);
    if (user.exec.env.some((e) => e.name === "")) problems.push(`env variable name must be specified for ${userWhere} to use exec authentication plugin`);
  }
  if (methods.length > 1) problems.push(`more than one authentication method found for ${userWhere}; found [${methods.join(" ")}], only one is allowed`);
  if (problems.length > 0) fail("unreadable-kubeconfig", `context "${name}": ${problems.join("; ")}`);

  const out: SelectedKubeconfig = { contextName: name, clusterName: context.cluster, userName: context.user, cluster, user, files: config.path.split(":") };
  if (context.namespace) out.namespace = context.namespace;
  return out;
}

function namedEntries(
  root: Record<string, unknown>,
  listKey: string,
  itemKey: string,
  fail: (problem: string) => never,
): Array<[string, Record<string, unknown>]> {
  const list = root[listKey];
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) fail(`${listKey} must be a list`);
  const out: Array<[string, Record<string, unknown>]> = [];
  (list as unknown[]).forEach((item, index) => {
    if (!isRecord(item)) fail(`${listKey}[${index}] must be a mapping with name and ${itemKey}`);
    const entry = item as Record<string, unknown>;
    const name = entry["name"];
    if (typeof name !== "string" || name === "") fail(`${listKey}[${index}] has no name`);
    const body = entry[itemKey] ?? {};
    if (!isRecord(body)) fail(`${listKey} "${name as string}": ${itemKey} must be a mapping`);
    // client-go refuses a file that names two entries alike (it cannot tell which is meant).
    if (out.some(([seen]) => seen === name)) fail(`${listKey}: duplicate name "${name as string}"`);
    out.push([name as string, body as Record<string, unknown>]);
  });
  return out;
}

function optionalString(value: unknown, what: string, fail: (problem: string) => never): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") fail(`${what} must be a string, got ${JSON.stringify(value)}`);
  return value as string;
}

function optionalBoolean(value: unknown, what: string, fail: (problem: string) => never): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "boolean") fail(`${what} must be true or false, got ${JSON.stringify(value)}`);
  return value as boolean;
}

function setIfPresent<T extends object, K extends keyof T>(target: T, key: K, value: T[K] | undefined): void {
  if (value !== undefined && value !== "") target[key] = value;
}

function isOptionalString(value: unknown): boolean {
  return value === undefined || value === null || typeof value === "string";
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
