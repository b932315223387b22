// The suite-wide secrets scan itself: scripts/secrets-scan.ts (the final check run-tests.sh runs on the folder the
// test files wrote) fails when a secret of the ledger appears in the test output or the harnesses found one, never
// printing the secret; fails when it checked nothing (an empty ledger, no output, nothing scanned); passes on clean
// outputs. And test/support/secret-ledger.ts: what it records of a private key, and the harnesses' scans.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { issueCertificate, createCertificateAuthority } from "../../src/tls/tls-bootstrap.ts";
import {
  FINDINGS_ENV,
  LEDGER_ENV,
  SCANNED_ENV,
  privateKeyLines,
  recordPrivateKey,
  recordSecret,
  scanOutputsBeforeRemoval,
  scanTextBeforeRemoval,
} from "../support/secret-ledger.ts";

const SCRIPT = fileURLToPath(new URL("../../scripts/secrets-scan.ts", import.meta.url));
const PASSWORD = "scan-test-Password-4d1c9e";
const TOKEN = "scan-test-token-8b2f6a0e5d7c";

interface Folder {
  ledger?: Array<{ kind: string; value: string }>;
  findings?: Array<{ output: string; test: string; kind: string }>;
  scanned?: number;
  output?: string;
}

async function withFolder<T>(contents: Folder, body: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-secrets-scan-test-"));
  try {
    const lines = (records: object[]) => records.map((r) => JSON.stringify(r) + "\n").join("");
    if (contents.ledger) await writeFile(join(dir, "ledger.jsonl"), lines(contents.ledger));
    if (contents.findings) await writeFile(join(dir, "findings.jsonl"), lines(contents.findings));
    const scanned = contents.scanned ?? 0;
    if (scanned > 0)
      await writeFile(join(dir, "scanned.jsonl"), lines(Array.from({ length: scanned }, (_, i) => ({ output: `serve.log ${i}`, test: "x.test.ts" }))));
    if (contents.output !== undefined) await writeFile(join(dir, "test-output.txt"), contents.output);
    return await body(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function scan(dir: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [SCRIPT, dir], { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      resolve({ code, out: stdout + stderr });
    });
  });
}

const LEDGER = [
  { kind: "a registry password", value: PASSWORD },
  { kind: "a caller token", value: TOKEN },
];
const CLEAN_OUTPUT = "✔ pulls with a password (12.3ms)\n✔ refuses a wrong token (4.5ms)\nℹ tests 2\n";

test("a secret in the test output fails the scan, naming its kind and line, and the secret is not printed", async () => {
  const output = `${CLEAN_OUTPUT}  error: unauthorized for Bearer ${TOKEN} at the registry\n`;
  await withFolder({ ledger: LEDGER, scanned: 3, output }, async (dir) => {
    const { code, out } = await scan(dir);
    assert.equal(code, 1, out);
    assert.match(out, /a caller token appeared in the test output, line 4/);
    assert.doesNotMatch(out, /a registry password appeared/);
    assert.ok(!out.includes(TOKEN) && !out.includes(PASSWORD), `the scan printed a secret: ${out.replaceAll(TOKEN, "<token>")}`);
    assert.match(out, /2 secret\(s\) of 2 kind\(s\) looked for in 4 output\(s\).*: 1 finding\(s\)/);
  });
});

test("a secret the harnesses found in a log they removed fails the scan", async () => {
  const findings = [{ output: "imprimatur serve: serve.log", test: "pull-secrets.test.ts", kind: "a registry password" }];
  await withFolder({ ledger: LEDGER, findings, scanned: 1, output: CLEAN_OUTPUT }, async (dir) => {
    const { code, out } = await scan(dir);
    assert.equal(code, 1, out);
    assert.match(out, /a registry password appeared in imprimatur serve: serve\.log \(pull-secrets\.test\.ts\)/);
  });
});

test("a scan that checked nothing fails: an empty or missing ledger, nothing scanned by the harnesses, no test output", async () => {
  const cases: Array<[string, Folder, RegExp]> = [
    ["an empty ledger", { ledger: [], scanned: 2, output: CLEAN_OUTPUT }, /the ledger of secrets is empty/],
    ["no ledger", { scanned: 2, output: CLEAN_OUTPUT }, /the ledger of secrets is empty/],
    ["nothing scanned", { ledger: LEDGER, output: CLEAN_OUTPUT }, /no log, audit log or record was scanned/],
    ["no test output", { ledger: LEDGER, scanned: 2 }, /the test output \(test-output\.txt\) is missing/],
    ["an empty test output", { ledger: LEDGER, scanned: 2, output: "" }, /the test output \(test-output\.txt\) is empty/],
  ];
  for (const [name, folder, reason] of cases) {
    await withFolder(folder, async (dir) => {
      const { code, out } = await scan(dir);
      assert.equal(code, 1, `${name}: ${out}`);
      assert.match(out, reason, name);
      assert.match(out, /the scan checked too little/, name);
    });
  }
  const usage = await scan("");
  assert.notEqual(usage.code, 0, "no folder");
});

test("clean outputs pass, with a summary of what was looked for where", async () => {
  await withFolder({ ledger: [...LEDGER, LEDGER[0]!], scanned: 5, output: CLEAN_OUTPUT }, async (dir) => {
    const { code, out } = await scan(dir);
    assert.equal(code, 0, out);
    assert.match(out, /^secrets-scan: 2 secret\(s\) of 2 kind\(s\) looked for in 6 output\(s\) \(the test output and 5 log.*: no secret appeared$/m);
  });
});

test("a private key is recorded as the lines of its PEM that hold private bytes: not those its certificate shows", async () => {
  const ca = await createCertificateAuthority("secrets-scan test CA");
  const serving = await issueCertificate(ca, { commonName: "secrets-scan test", ipAddresses: ["127.0.0.1"] });
  const lines = privateKeyLines(serving.keyPem);
  assert.ok(lines.length >= 1 && lines.every((l) => l.length >= 40 && serving.keyPem.includes(l)), "lines of the PEM");
  const certBase64 = Buffer.from(serving.certPem.replace(/-----[A-Z ]+-----|\s/g, ""), "base64").toString("base64");
  for (const line of lines) assert.ok(!certBase64.includes(line) && !serving.certPem.includes(line), "no recorded line is in the certificate");
  const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "pem", type: "pkcs1" }).toString();
  assert.ok(privateKeyLines(rsa).length >= 10, "an RSA key: most of its lines");
  assert.deepEqual(privateKeyLines(serving.certPem), [], "a certificate has no private key lines");
});

test("the harnesses' scans: files and in-memory logs are scanned against the ledger; findings and the scanned list never hold the secret", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-secrets-ledger-test-"));
  const saved = { ledger: process.env[LEDGER_ENV], findings: process.env[FINDINGS_ENV], scanned: process.env[SCANNED_ENV] };
  const restore = (name: string, value: string | undefined) => (value === undefined ? delete process.env[name] : (process.env[name] = value));
  try {
    delete process.env[LEDGER_ENV];
    recordSecret("a registry password", PASSWORD); // not recording: nothing happens
    scanOutputsBeforeRemoval([join(dir, "nothing.log")]);
    process.env[LEDGER_ENV] = join(dir, "ledger.jsonl");
    process.env[FINDINGS_ENV] = join(dir, "findings.jsonl");
    process.env[SCANNED_ENV] = join(dir, "scanned.jsonl");
    recordSecret("a registry password", PASSWORD);
    recordSecret("a short one", "abc1234"); // shorter than 8: would match by accident
    const key = generateKeyPairSync("ec", { namedCurve: "P-256" });
    recordPrivateKey(key.privateKey, "a signing key");
    const keyLine = privateKeyLines(key.privateKey.export({ format: "pem", type: "pkcs8" }).toString())[0]!;

    await writeFile(join(dir, "serve.log"), `{"msg":"pulled","user":"puller"}\n{"msg":"key","line":"${keyLine}"}\n`);
    await writeFile(join(dir, "audit.jsonl"), `{"allowed":true}\nabc1234\n${key.publicKey.export({ format: "pem", type: "spki" })}`);
    scanOutputsBeforeRemoval([join(dir, "serve.log"), join(dir, "audit.jsonl"), join(dir, "removed-already.log")], "imprimatur serve");
    scanTextBeforeRemoval("in-process server: log", `{"msg":"unauthorized","password":"${PASSWORD}"}\n`);

    const ledger = await readFile(join(dir, "ledger.jsonl"), "utf8");
    assert.ok(ledger.includes(PASSWORD) && ledger.includes(keyLine) && !ledger.includes("abc1234"), ledger);
    const findings = await readFile(join(dir, "findings.jsonl"), "utf8");
    assert.deepEqual(
      findings
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l)),
      [
        { output: "imprimatur serve: serve.log", test: "secrets-scan.test.ts", kind: "a signing key" },
        { output: "in-process server: log", test: "secrets-scan.test.ts", kind: "a registry password" },
      ],
    );
    const scanned = await readFile(join(dir, "scanned.jsonl"), "utf8");
    assert.equal(scanned.trim().split("\n").length, 3, "serve.log, audit.jsonl and the in-memory log; not the missing file");
    for (const text of [findings, scanned]) assert.ok(!text.includes(PASSWORD) && !text.includes(keyLine), "no secret in what the scans write");
  } finally {
    restore(LEDGER_ENV, saved.ledger);
    restore(FINDINGS_ENV, saved.findings);
    restore(SCANNED_ENV, saved.scanned);
    await rm(dir, { recursive: true, force: true });
  }
});
