// The suite-wide secrets scan's final check: `node scripts/secrets-scan.ts FOLDER`, run by scripts/run-tests.sh
// after the test files, on the folder it gave them (test/support/secret-ledger.ts describes what goes in it):
//   ledger.jsonl       every secret the suite used ({kind, value} lines, written by the harnesses);
//   findings.jsonl     secrets the harnesses found in logs, audit logs and records as they tore them down;
//   scanned.jsonl      one line per output the harnesses scanned;
//   test-output.txt    the test runner's whole output (every test's stdout and stderr, every error message).
// It scans the test output for every secret of the ledger, prints each finding (the kind of secret and where,
// never the secret) and a summary, and exits 1 when a secret appeared, when the ledger is empty, when the test
// output is missing or empty, or when the harnesses scanned nothing: a scan that checked nothing fails.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { findSecrets, readLedger, type Finding } from "../test/support/secret-ledger.ts";

const FILES = { ledger: "ledger.jsonl", findings: "findings.jsonl", scanned: "scanned.jsonl", output: "test-output.txt" } as const;

function readLines(file: string): string[] {
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .filter((line) => line.trim() !== "");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}

function main(folder: string | undefined): number {
  if (!folder) {
    console.error("usage: node scripts/secrets-scan.ts FOLDER (the folder scripts/run-tests.sh gave the test files)");
    return 2;
  }
  const problems: string[] = [];
  const secrets = readLedger(join(folder, FILES.ledger));
  if (secrets.length === 0) problems.push("the ledger of secrets is empty: nothing was recorded, so nothing could be found");

  const findings: Finding[] = readLines(join(folder, FILES.findings)).map((line) => JSON.parse(line) as Finding);
  const scanned = readLines(join(folder, FILES.scanned)).length;
  if (scanned === 0) problems.push("no log, audit log or record was scanned by the test harnesses");

  let output: string | undefined;
  try {
    output = readFileSync(join(folder, FILES.output), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  if (output === undefined || output.trim() === "") problems.push(`the test output (${FILES.output}) is ${output === undefined ? "missing" : "empty"}`);
  else
    for (const found of findSecrets(output, secrets)) {
      const line = output.slice(0, found.at).split("\n").length;
      findings.push({ output: `the test output, line ${line}`, test: "(the test runner)", kind: found.kind });
    }

  for (const f of findings) console.log(`secrets-scan: ${f.kind} appeared in ${f.output} (${f.test})`);
  for (const p of problems) console.log(`secrets-scan: ${p}`);
  const kinds = new Set(secrets.map((s) => s.kind)).size;
  const outputs = scanned + (output ? 1 : 0);
  const verdict = findings.length > 0 ? `${findings.length} finding(s)` : problems.length > 0 ? "the scan checked too little" : "no secret appeared";
  console.log(
    `secrets-scan: ${secrets.length} secret(s) of ${kinds} kind(s) looked for in ${outputs} output(s) ` +
      `(the test output and ${scanned} log(s), audit log(s) and record(s)): ${verdict}`,
  );
  return findings.length > 0 || problems.length > 0 ? 1 : 0;
}

process.exitCode = main(process.argv[2]);
