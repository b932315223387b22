// kubectl as `imprimatur install` runs it: the user's kubectl, kubeconfig and context, so install reaches the
// cluster exactly as the user's own kubectl does (auth plugins, proxies, the current context), and kustomize
// renders as `kubectl apply -k` would. Each run is bounded in time; its output is kept for messages.
import { spawn } from "node:child_process";
import { InstallError } from "./install-error.ts";

export interface KubectlOptions {
  /** The kubectl binary. Default: kubectl on PATH. */
  binary?: string;
  kubeconfig?: string;
  context?: string;
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

const OUTPUT_LIMIT = 64 * 1024 * 1024;

export class Kubectl {
  readonly #binary: string;
  readonly #global: string[];

  constructor(options: KubectlOptions = {}) {
    this.#binary = options.binary ?? "kubectl";
    this.#global = [
      ...(options.kubeconfig !== undefined ? ["--kubeconfig", options.kubeconfig] : []),
      ...(options.context !== undefined ? ["--context", options.context] : []),
    ];
  }

  /** The command as a user would type it, for "run this next" hints. */
  command(args: string[]): string {
    return ["kubectl", ...this.#global, ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(" ");
  }

  /** Runs kubectl; never rejects for a non-zero exit (the caller decides), only when kubectl cannot start. */
  run(args: string[], options: { input?: string; timeoutMs?: number } = {}): Promise<KubectlResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.#binary, [...this.#global, ...args], { stdio: ["pipe", "pipe", "pipe"], windowsHide: true });
      const stdout: Buffer[] = [];
      const stderr: Buffer[] = [];
      let size = 0;
      const keep = (into: Buffer[]) => (chunk: Buffer) => {
        size += chunk.length;
        if (size <= OUTPUT_LIMIT) into.push(chunk);
      };
      child.stdout.on("data", keep(stdout));
      child.stderr.on("data", keep(stderr));
      const timeoutMs = options.timeoutMs ?? 60_000;
      const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs);
      child.on("error", (e: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        reject(
          new InstallError(
            "kubectl",
            e.code === "ENOENT"
              ? `cannot run ${this.#binary}: not found; install kubectl or name it with --kubectl`
              : `cannot run ${this.#binary}: ${e.message}`,
          ),
        );
      });
      child.on("close", (code, signal) => {
        clearTimeout(timer);
        const err = Buffer.concat(stderr).toString("utf8");
        resolve({
          code: code ?? -1,
          stdout: Buffer.concat(stdout).toString("utf8"),
          stderr: signal ? `${err}(stopped after ${timeoutMs / 1000} s)` : err,
        });
      });
      child.stdin.on("error", () => {}); // kubectl may exit before reading all of its input; its exit says why
      child.stdin.end(options.input ?? "");
    });
  }
}
