// The suite-wide secrets scan (scripts/secrets-scan.ts, run by scripts/run-tests.sh after the whole suite): no
// registry password, bearer token or private key the suite used may appear in any output the suite produced.
//
// The ledger: every harness that creates a secret records it here, as it creates it (recordSecret, and
// recordPrivateKey for a private key's PEM). Registry passwords and their Basic credentials (registry.ts), the
// token server's access and refresh tokens and keys (token-server.ts), the apiserver's admin, node and component
// tokens and service-account keys (kube-cluster.ts, small-cluster.ts), caller tokens and client keys
// (caller-credentials.ts), an ImageReview backend's token (test-imagereview-backend.ts), TLS and CA keys the
// harnesses make, and the test signer's keys (signer/). New test support that creates a secret records it too.
//
// What is scanned: the logs of the processes the harnesses start and the audit logs, as they are torn down (the
// folders are removed before the run ends): `imprimatur serve`'s serve.log and audit.jsonl
// (imprimatur-process.ts), an in-process server's log lines and audit.jsonl (in-process-app.ts), the node proxy's
// log and records (node-proxy-process.ts), every log of logged-process.ts (containerd, the kubelet, the small
// cluster's control plane) and of the registries and the apiserver; then, by scripts/secrets-scan.ts, the whole
// test output (every test's stdout and stderr and every error message). Metrics labels are scanned by
// test/e2e/secrets-never-logged.test.ts (its servers' /metrics); stopping a server fetches nothing here.
//
// Three files, named by environment variables that scripts/run-tests.sh sets (all unset: recording and scanning
// do nothing): the ledger (one JSON line {kind, value} per secret), the findings (one JSON line {output, test,
// kind} per secret found: never the value) and the list of outputs scanned (one JSON line each). Every write is
// a synchronous append, so the test files' processes all write to the same files.
import { appendFileSync, readFileSync } from "node:fs";
import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import { basename } from "node:path";

export const LEDGER_ENV = "IMPRIMATUR_SECRET_LEDGER";
export const FINDINGS_ENV = "IMPRIMATUR_SECRET_FINDINGS";
export const SCANNED_ENV = "IMPRIMATUR_SECRET_SCANNED";
/** Shorter values are not recorded: they would be found by accident. */
export const MIN_SECRET_LENGTH = 8;
/** A private key's base64 lines at least this long are recorded (a leaked key shows up as such lines). */
export const MIN_KEY_LINE_LENGTH = 40;

export interface LedgerEntry {
  kind: string;
  value: string;
}

/** One output that held a secret: which output, in which test file, and the kind of secret (never its value). */
export interface Finding {
  output: string;
  test: string;
  kind: string;
}

/** Whether this run records secrets (scripts/run-tests.sh set the ledger's file). */
export function recordingSecrets(): boolean {
  return Boolean(process.env[LEDGER_ENV]);
}

/** Records a secret the suite uses, e.g. recordSecret("a registry password", password). */
export function recordSecret(kind: string, value: string): void {
  recordAll(kind, [value]);
}

/**
 * Records a private key: each base64 line (of at least MIN_KEY_LINE_LENGTH characters) of its PEM's PRIVATE KEY
 * blocks that holds more than public-key bytes (an EC key's last lines are its public point, which every
 * certificate for it shows too). A KeyObject is recorded as its PKCS#8 PEM.
 */
export function recordPrivateKey(key: string | KeyObject, kind = "a private key"): void {
  if (!recordingSecrets()) return;
  const pem = typeof key === "string" ? key : key.export({ format: "pem", type: "pkcs8" }).toString();
  recordAll(kind, privateKeyLines(pem));
}

function recordAll(kind: string, values: readonly string[]): void {
  const file = process.env[LEDGER_ENV];
  if (!file) return;
  const lines = values.filter((v) => typeof v === "string" && v.length >= MIN_SECRET_LENGTH).map((value) => JSON.stringify({ kind, value }) + "\n");
  if (lines.length > 0) appendFileSync(file, lines.join(""));
}

/** The base64 lines of a PEM's private keys that recordPrivateKey records. */
export function privateKeyLines(pem: string): string[] {
  const lines: string[] = [];
  for (const block of pem.matchAll(/-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----[\s\S]*?-----END \1-----/g)) {
    let publicDer: Buffer | undefined;
    try {
      publicDer = createPublicKey(createPrivateKey(block[0])).export({ format: "der", type: "spki" });
    } catch {
      // An encrypted or unusual key: every line is kept.
    }
    for (const raw of block[0].split("\n")) {
      const line = raw.trim();
      if (line.length < MIN_KEY_LINE_LENGTH || !/^[A-Za-z0-9+/]+=*$/.test(line)) continue;
      if (publicDer && publicDer.includes(Buffer.from(line, "base64"))) continue;
      lines.push(line);
    }
  }
  return lines;
}

/** The ledger's secrets, each value once (with the kind it was first recorded as). A missing ledger is empty. */
export function readLedger(file: string): LedgerEntry[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const byValue = new Map<string, LedgerEntry>();
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    const entry = JSON.parse(line) as LedgerEntry;
    if (typeof entry.value === "string" && entry.value.length >= MIN_SECRET_LENGTH && !byValue.has(entry.value)) byValue.set(entry.value, entry);
  }
  return [...byValue.values()];
}

/** The secrets that occur in `text`, each with the offset of its first occurrence. One pass over the text. */
export function findSecrets(text: string, secrets: readonly LedgerEntry[]): Array<LedgerEntry & { at: number }> {
  const byPrefix = new Map<string, LedgerEntry[]>();
  for (const secret of secrets) {
    if (secret.value.length < MIN_SECRET_LENGTH) continue;
    const prefix = secret.value.slice(0, MIN_SECRET_LENGTH);
    const list = byPrefix.get(prefix);
    if (list) list.push(secret);
    else byPrefix.set(prefix, [secret]);
  }
  const found = new Map<LedgerEntry, number>();
  if (byPrefix.size === 0) return [];
  for (let at = 0; at + MIN_SECRET_LENGTH <= text.length; at++) {
    const candidates = byPrefix.get(text.slice(at, at + MIN_SECRET_LENGTH));
    if (candidates === undefined) continue;
    for (const secret of candidates) if (!found.has(secret) && text.startsWith(secret.value, at)) found.set(secret, at);
  }
  return [...found].map(([secret, at]) => ({ ...secret, at }));
}

/** This test file's name, for findings. */
function testFile(): string {
  return basename(process.argv[1] ?? "unknown");
}

function append(envName: string, record: object): void {
  const file = process.env[envName];
  if (file) appendFileSync(file, JSON.stringify(record) + "\n");
}

function scanText(output: string, text: string, secrets: readonly LedgerEntry[]): void {
  const test = testFile();
  append(SCANNED_ENV, { output, test, bytes: Buffer.byteLength(text) });
  for (const found of findSecrets(text, secrets)) append(FINDINGS_ENV, { output, test, kind: found.kind } satisfies Finding);
}

/** Runs a scan; a scan that fails is itself a finding, so that the final check fails rather than passes unseen. */
function guarded(output: string, scan: () => void): void {
  try {
    scan();
  } catch (err) {
    try {
      append(FINDINGS_ENV, { output, test: testFile(), kind: `(the scan failed: ${(err as Error).message})` } satisfies Finding);
    } catch {
      // nowhere to report it: the final check fails on the missing scan instead
    }
  }
}

/**
 * Scans output files (logs, audit logs, records) for the ledger's secrets before a harness removes them: each file
 * that exists is counted as scanned, and each secret found is a finding. `source` names what wrote them.
 */
export function scanOutputsBeforeRemoval(files: readonly string[], source = "output"): void {
  const ledger = process.env[LEDGER_ENV];
  if (!ledger) return;
  guarded(source, () => {
    const secrets = readLedger(ledger);
    for (const file of files) {
      let text: string;
      try {
        text = readFileSync(file, "utf8");
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT" || (err as NodeJS.ErrnoException).code === "EISDIR") continue;
        throw err;
      }
      scanText(`${source}: ${basename(file)}`, text, secrets);
    }
  });
}

/** Scans output kept in memory (an in-process server's log lines), as scanOutputsBeforeRemoval does a file. */
export function scanTextBeforeRemoval(output: string, text: string): void {
  const ledger = process.env[LEDGER_ENV];
  if (!ledger) return;
  guarded(output, () => scanText(output, text, readLedger(ledger)));
}
