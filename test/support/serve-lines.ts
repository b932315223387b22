// A real `imprimatur serve` child whose stdout log lines a test waits for, so the tests that need them share one copy.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { installExitHooks, liveChildren } from "./child-cleanup.ts";
import { serveCommandLine } from "./imprimatur-process.ts";
import { freePort } from "./ports.ts";

export interface ServeExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ServeWithLines {
  /** The port it listens on (127.0.0.1). */
  port: number;
  /** For the tests that send their own signals or look at how it ended. */
  child: ChildProcess;
  /** Its stdout lines so far, in order. */
  lines: readonly string[];
  /** Its stderr so far. */
  stderr(): string;
  /** Resolves once it has exited and its output is closed. */
  exited: Promise<ServeExit>;
  /** The first stdout line from index `from` on that matches `pattern`, seen already or to come; fails if it exits first. */
  line(pattern: RegExp, from?: number): Promise<string>;
  running(): boolean;
  /** SIGTERM, then its exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL if it still runs, then waits for the exit (for `finally` blocks). */
  kill(): Promise<void>;
}

export interface ServeWithLinesOptions {
  stateDir: string;
  /** Return only once it logs "serving" (the default), or right after the spawn. */
  waitForServing?: boolean;
}

/** A pattern for the JSON log line whose message is exactly `msg`. */
export function logMessage(msg: string): RegExp {
  return new RegExp(`"msg":${JSON.stringify(msg).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`);
}

/**
 * Starts `imprimatur serve` on a free port with `stateDir` and ARGS (serveCommandLine: no drain period unless asked) with this Node.js.
 * The child is SIGKILLed if the test process exits first.
 */
export async function startServeWithLines(args: string[], opts: ServeWithLinesOptions): Promise<ServeWithLines> {
  const port = await freePort();
  const child = spawn(process.execPath, serveCommandLine(port, opts.stateDir, args), { stdio: ["ignore", "pipe", "pipe"] });
  installExitHooks();
  liveChildren.add(child);
  let stderr = "";
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  const lines: string[] = [];
  const waiters = new Set<{ pattern: RegExp; resolve: (line: string) => void }>();
  createInterface({ input: child.stdout! }).on("line", (line) => {
    lines.push(line);
    for (const w of [...waiters].filter((w) => w.pattern.test(line))) {
      waiters.delete(w);
      w.resolve(line);
    }
  });
  const exited = new Promise<ServeExit>((resolve) =>
    child.once("close", (code, signal) => {
      liveChildren.delete(child);
      resolve({ code, signal });
    }),
  );
  const running = () => child.exitCode === null && child.signalCode === null;
  const line = (pattern: RegExp, from = 0): Promise<string> => {
    const seen = lines.slice(from).find((l) => pattern.test(l));
    if (seen !== undefined) return Promise.resolve(seen);
    return Promise.race([
      new Promise<string>((resolve) => waiters.add({ pattern, resolve })),
      exited.then(({ code, signal }) => assert.fail(`serve exited (code ${code}, signal ${signal}) before logging ${pattern}: ${stderr}`)),
    ]);
  };
  const serve: ServeWithLines = {
    port,
    child,
    lines,
    stderr: () => stderr,
    exited,
    line,
    running,
    stop: async () => {
      child.kill("SIGTERM");
      return (await exited).code;
    },
    kill: async () => {
      if (running()) child.kill("SIGKILL");
      await exited;
    },
  };
  if (opts.waitForServing ?? true) {
    try {
      await line(logMessage("serving"));
    } catch (err) {
      await serve.kill();
      throw err;
    }
  }
  return serve;
}
