// `kill` of the process the README's command starts (`npx imprimatur serve`) stops the server: npm runs the
// command through a shell that does not pass signals on, and bin/launcher.js makes the end of that shell stop the
// server as the signal would (it drains, then exits). Run as the README says, with npm's own npx, a free port and
// a temporary state folder; followLauncher's rule is also tested on its own with a stand-in process.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, test } from "node:test";
import { REPO_ROOT } from "../../support/cli-process.ts";

interface LauncherModule {
  startedByNpm(env: Record<string, string | undefined>): boolean;
  followLauncher(
    proc: { env: Record<string, string | undefined>; platform: string; pid: number; readonly ppid: number; kill(pid: number, signal: string): unknown },
    intervalMs?: number,
  ): (() => void) | undefined;
}
const launcher = (await import(pathToFileURL(join(REPO_ROOT, "bin", "launcher.js")).href)) as LauncherModule;

const scratch = mkdtempSync(join(tmpdir(), "imprimatur-npx-signals-"));
const leftovers = new Set<number>();
after(() => {
  // A server the fix failed to stop is ended here, so that a failing run leaves nothing behind.
  for (const pid of leftovers) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  rmSync(scratch, { recursive: true, force: true });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

interface LogLine {
  msg?: string;
  pid?: number;
  signal?: string;
}

/** Starts `npx imprimatur serve` and resolves once the server logs that it serves. */
async function startReadmeCommand(port: number, stateDir: string) {
  const npx = spawn("npx", ["imprimatur", "serve", "--port", String(port), "--state-dir", stateDir], {
    cwd: REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    // A process group of its own, as a shell's job: Ctrl-C is a SIGINT to the whole group.
    detached: true,
  });
  const lines: LogLine[] = [];
  let stderr = "";
  npx.stderr!.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  // The server holds this pipe (inherited through npm and the shell) until it exits.
  const stdoutClosed = new Promise<void>((resolve) => npx.stdout!.on("close", () => resolve()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npx.on("exit", (code, signal) => resolve({ code, signal })));
  const serving = new Promise<LogLine>((resolve, reject) => {
    let buffered = "";
    npx.stdout!.setEncoding("utf8").on("data", (s: string) => {
      buffered += s;
      for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        try {
          const parsed = JSON.parse(line) as LogLine;
          lines.push(parsed);
          if (parsed.msg === "serving") resolve(parsed);
        } catch {
          // not a log line
        }
      }
    });
    void exited.then(({ code, signal }) => reject(new Error(`npx ended (${code ?? signal}) before serving: ${stderr}`)));
  });
  const server = await serving;
  leftovers.add(server.pid!);
  return { npx: npx as ChildProcess, server, lines, exited, stdoutClosed, stderr: () => stderr };
}

/** Whether PID has ended (gone, or a zombie its new parent has not reaped yet). */
function ended(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8")
      .replace(/^.*\) /s, "")
      .startsWith("Z");
  } catch {
    return true;
  }
}

/** Waits until the server has closed its output, that is, exited; fails if it still runs a minute later. */
async function serverExit(run: Awaited<ReturnType<typeof startReadmeCommand>>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const stillRunning = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the server (pid ${run.server.pid}) still runs a minute after the signal`)), 60_000);
  });
  await Promise.race([run.stdoutClosed, stillRunning]).finally(() => clearTimeout(timer));
  while (!ended(run.server.pid!)) await new Promise((r) => setTimeout(r, 50));
  leftovers.delete(run.server.pid!);
}

const stoppedBy = (run: Awaited<ReturnType<typeof startReadmeCommand>>, signal: string) =>
  run.lines.some((l) => l.msg === "shutting down" && l.signal === signal);

test("kill (SIGTERM) of the process `npx imprimatur serve` started stops the server: it drains, closes its port and exits", async () => {
  const port = await freePort();
  const run = await startReadmeCommand(port, join(scratch, "sigterm"));
  assert.ok(await portAnswers(port), "the server listens");
  assert.notEqual(run.server.pid, run.npx.pid, "npm runs the server in a process of its own");

  run.npx.kill("SIGTERM");
  // npm ends as the shell it ran the command in ended: by the signal, which that shell does not pass on.
  assert.deepEqual(await run.exited, { code: null, signal: "SIGTERM" });
  await serverExit(run);
  assert.ok(stoppedBy(run, "SIGTERM"), `stopped through its own SIGTERM handling (drain, then close): ${JSON.stringify(run.lines.map((l) => l.msg))}`);
  assert.equal(await portAnswers(port), false, "the port is closed");
});

test("Ctrl-C (SIGINT to the job's process group) stops the server, and npx waits for it", async () => {
  const port = await freePort();
  const run = await startReadmeCommand(port, join(scratch, "sigint"));
  assert.ok(await portAnswers(port), "the server listens");

  process.kill(-run.npx.pid!, "SIGINT");
  // The shell waits for the server, then ends by the SIGINT it got, as shells do; npm ends as its shell did.
  assert.deepEqual(await run.exited, { code: null, signal: "SIGINT" });
  assert.ok(ended(run.server.pid!), "npx ended after the server");
  await serverExit(run);
  assert.ok(stoppedBy(run, "SIGINT"), JSON.stringify(run.lines.map((l) => l.msg)));
  assert.equal(await portAnswers(port), false, "the port is closed");
});

test("followLauncher: started by npm, the end of the parent sends the process SIGTERM, once; otherwise it watches nothing", async () => {
  assert.equal(launcher.startedByNpm({ npm_command: "exec" }), true);
  assert.equal(launcher.startedByNpm({ npm_command: "run-script" }), true);
  assert.equal(launcher.startedByNpm({}), false);

  const sent: Array<[number, string]> = [];
  const proc = { env: { npm_command: "exec" }, platform: "linux", pid: 4242, ppid: 100, kill: (pid: number, s: string) => sent.push([pid, s]) };
  const stop = launcher.followLauncher(proc, 5);
  assert.ok(stop);
  await new Promise((r) => setTimeout(r, 30));
  assert.deepEqual(sent, [], "nothing while the parent lives");
  proc.ppid = 1;
  await new Promise((r) => setTimeout(r, 30));
  assert.deepEqual(sent, [[4242, "SIGTERM"]]);
  await new Promise((r) => setTimeout(r, 30));
  assert.deepEqual(sent, [[4242, "SIGTERM"]], "once");

  assert.equal(launcher.followLauncher({ ...proc, env: {} }, 5), undefined, "not started by npm: a parent may go away (nohup, a closed terminal)");
  assert.equal(launcher.followLauncher({ ...proc, ppid: 1 }, 5), undefined, "already under init");
  assert.equal(launcher.followLauncher({ ...proc, platform: "win32" }, 5), undefined);
});
