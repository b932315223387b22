// Credentials from a kubeconfig's exec plugin (client.authentication.k8s.io, as client-go's exec authenticator
// runs it): the command is run with the kubeconfig's args and env added to ours, KUBERNETES_EXEC_INFO describing
// the request (never interactive: a server has no terminal), and its ExecCredential's token or client certificate
// is kept until its expirationTimestamp, or until the API answers 401 (then the plugin runs again).
import { execFile } from "node:child_process";
import { accessSync, constants as fsConstants, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { delimiter, isAbsolute, join } from "node:path";
import type { KubeconfigCluster, KubeconfigExec } from "./kubeconfig-document.ts";
import { KubeApiError } from "./api-requests.ts";

const SUPPORTED_VERSIONS = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"];
const PLUGIN_TIMEOUT_MS = 60_000;
const MAX_OUTPUT_BYTES = 1 << 20;

/** Whether this client runs plugins of `apiVersion` (client-go's v1alpha1 is gone from kubectl since 1.24). */
export function isSupportedExecApiVersion(apiVersion: string): boolean {
  return SUPPORTED_VERSIONS.includes(apiVersion);
}

export interface ExecCredential {
  token?: string;
  clientCertificateData?: string;
  clientKeyData?: string;
  /** ms since the epoch; undefined: valid until the API refuses it. */
  expiresAt?: number;
}

export class ExecCredentialSource {
  private readonly exec: KubeconfigExec;
  private readonly cluster: KubeconfigCluster | undefined;
  private readonly where: string;
  private current: ExecCredential | undefined;
  private running: Promise<ExecCredential> | undefined;

  /** `cluster` is handed to the plugin when the kubeconfig asks for it (provideClusterInfo). */
  constructor(exec: KubeconfigExec, cluster: KubeconfigCluster | undefined, where: string) {
    if (!isSupportedExecApiVersion(exec.apiVersion)) {
      throw new KubeApiError(
        "unauthorized",
        `${where}: exec plugin apiVersion ${JSON.stringify(exec.apiVersion)} is not one of ${SUPPORTED_VERSIONS.join(", ")}`,
      );
    }
    this.exec = exec;
    this.cluster = exec.provideClusterInfo ? cluster : undefined;
    this.where = where;
  }

  /** The credential in force, running the plugin when there is none or it expired. */
  async credential(): Promise<ExecCredential> {
    const now = Date.now();
    // Renewed a little early, so a request does not leave with a token that expires on its way.
    if (this.current && (this.current.expiresAt === undefined || this.current.expiresAt - 10_000 > now)) return this.current;
    return this.refresh();
  }

  /** Forgets the credential (the API refused it): the next request runs the plugin again. */
  invalidate(refused: ExecCredential): void {
    if (this.current === refused) this.current = undefined;
  }

  private refresh(): Promise<ExecCredential> {
    this.running ??= this.run().finally(() => (this.running = undefined));
    return this.running;
  }

  private async run(): Promise<ExecCredential> {
    const spec: Record<string, unknown> = { interactive: false };
    if (this.cluster) {
      // A CA given as a file is handed over as data, as client-go does.
      const caData =
        this.cluster.certificateAuthorityData ?? (this.cluster.certificateAuthority ? await this.caFileData(this.cluster.certificateAuthority) : "");
      spec["cluster"] = {
        server: this.cluster.server,
        ...(this.cluster.tlsServerName ? { "tls-server-name": this.cluster.tlsServerName } : {}),
        ...(this.cluster.insecureSkipTlsVerify ? { "insecure-skip-tls-verify": true } : {}),
        ...(caData ? { "certificate-authority-data": caData } : {}),
        ...(this.cluster.proxyUrl ? { "proxy-url": this.cluster.proxyUrl } : {}),
      };
    }
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const variable of this.exec.env) env[variable.name] = variable.value;
    env["KUBERNETES_EXEC_INFO"] = JSON.stringify({ apiVersion: this.exec.apiVersion, kind: "ExecCredential", spec });

    // A command without a path is looked up in our PATH, as client-go does, not in a PATH the kubeconfig's env sets.
    const command = lookPath(this.exec.command, process.env.PATH ?? "");
    if (command === undefined) {
      const hint = this.exec.installHint ? `; ${this.exec.installHint}` : "";
      throw new KubeApiError("unauthorized", `${this.where}: exec plugin ${this.exec.command} failed: no executable ${this.exec.command} in PATH${hint}`);
    }
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(command, this.exec.args, { env, timeout: PLUGIN_TIMEOUT_MS, maxBuffer: MAX_OUTPUT_BYTES, encoding: "utf8" }, (err, out, errOut) => {
        if (!err) return resolve(out);
        const hint = (err as NodeJS.ErrnoException).code === "ENOENT" && this.exec.installHint ? `; ${this.exec.installHint}` : "";
        const detail = errOut.trim().split("\n").slice(-3).join(" ").slice(0, 500);
        reject(
          new KubeApiError(
            "unauthorized",
            `${this.where}: exec plugin ${this.exec.command} failed: ${err.message.split("\n")[0]}${detail ? ` (${detail})` : ""}${hint}`,
            { cause: err },
          ),
        );
      });
    });
    const credential = this.read(stdout);
    this.current = credential;
    return credential;
  }

  private async caFileData(file: string): Promise<string> {
    try {
      return (await readFile(file)).toString("base64");
    } catch (e) {
      throw new KubeApiError("unauthorized", `${this.where}: cannot read the certificate-authority ${file} for the exec plugin: ${(e as Error).message}`, {
        cause: e,
      });
    }
  }

  private read(stdout: string): ExecCredential {
    const fail = (problem: string): never => {
      throw new KubeApiError("unauthorized", `${this.where}: exec plugin ${this.exec.command}: ${problem}`);
    };
    let output: unknown;
    try {
      output = JSON.parse(stdout);
    } catch {
      fail("its output is not JSON");
    }
    const object = output as { apiVersion?: unknown; kind?: unknown; status?: Record<string, unknown> } | null;
    if (object === null || typeof object !== "object") return fail("its output is not an ExecCredential");
    if (object.kind !== "ExecCredential") fail(`its output has kind ${JSON.stringify(object.kind)}, not ExecCredential`);
    if (object.apiVersion !== this.exec.apiVersion)
      fail(`its output has apiVersion ${JSON.stringify(object.apiVersion)}, the kubeconfig asked for ${this.exec.apiVersion}`);
    const status = object.status;
    if (status === null || typeof status !== "object") return fail("its ExecCredential has no status");
    const text = (key: string): string | undefined => {
      const value = status[key];
      if (value === undefined || value === null || value === "") return undefined;
      if (typeof value !== "string") fail(`status.${key} must be a string`);
      return value as string;
    };
    const credential: ExecCredential = {};
    const token = text("token");
    const cert = text("clientCertificateData");
    const key = text("clientKeyData");
    if (token !== undefined) credential.token = token;
    if ((cert === undefined) !== (key === undefined)) fail("status has one of clientCertificateData and clientKeyData without the other");
    if (cert !== undefined && key !== undefined) {
      credential.clientCertificateData = cert;
      credential.clientKeyData = key;
    }
    if (token === undefined && cert === undefined) fail("status has neither a token nor a client certificate");
    const expiry = text("expirationTimestamp");
    if (expiry !== undefined) {
      const at = Date.parse(expiry);
      if (Number.isNaN(at)) fail(`status.expirationTimestamp ${JSON.stringify(expiry)} is not a time`);
      credential.expiresAt = at;
    }
    return credential;
  }
}

/** `command` as found in `path` (the first executable file of that name), unless it names a path; undefined when not found. */
function lookPath(command: string, path: string): string | undefined {
  if (command.includes("/")) return command;
  for (const dir of path.split(delimiter)) {
    // Go's exec.LookPath no longer runs programs found through relative PATH entries (".", "").
    if (!isAbsolute(dir)) continue;
    const candidate = join(dir, command);
    try {
      accessSync(candidate, fsConstants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not there, or not executable: the next entry
    }
  }
  return undefined;
}
