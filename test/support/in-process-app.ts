// A server started in-process on a free loopback port with a silent logger, its own state folder and the
// CA it generated — for tests that talk HTTPS to the real server without spawning the CLI. When the suite scans
// for secrets (secret-ledger.ts), the default logger keeps every line at debug level instead, and close() scans
// them and the audit log before the state folder goes.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pino } from "pino";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { startApp, type App, type AppOptions } from "../../src/server/app.ts";
import { recordingSecrets, scanOutputsBeforeRemoval, scanTextBeforeRemoval } from "./secret-ledger.ts";

export interface TestApp {
  app: App;
  /** https://127.0.0.1:PORT */
  base: string;
  ca: string;
  stateDir: string;
  /** Closes the server and removes its state folder. */
  close(): Promise<void>;
}

export async function startTestApp(opts: Partial<AppOptions> & Pick<AppOptions, "policies">): Promise<TestApp> {
  const stateDir = opts.stateDir ?? (await mkdtemp(join(tmpdir(), "imprimatur-app-")));
  const logged: string[] = [];
  const logger = recordingSecrets()
    ? pino(
        { level: "debug" },
        new Writable({
          write(chunk: Buffer, _encoding, done) {
            logged.push(chunk.toString("utf8"));
            done();
          },
        }),
      )
    : pino({ level: "silent" });
  const app = await startApp({
    host: "127.0.0.1",
    port: 0,
    tlsHosts: [],
    config: DEFAULT_SERVER_CONFIG,
    logger,
    watchPolicies: false,
    ...opts,
    stateDir,
  });
  return {
    app,
    base: `https://127.0.0.1:${app.port}`,
    ca: await readFile(join(stateDir, "ca.crt"), "utf8"),
    stateDir,
    close: async () => {
      try {
        await app.close();
      } finally {
        if (!opts.logger) scanTextBeforeRemoval("in-process server: log", logged.join(""));
        scanOutputsBeforeRemoval([(opts.config ?? DEFAULT_SERVER_CONFIG).auditLog ?? join(stateDir, "audit.jsonl")], "in-process server");
        // The state dir goes even when the app fails to close.
        await rm(stateDir, { recursive: true, force: true });
      }
    },
  };
}
