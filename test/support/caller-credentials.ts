// Client credentials for `serve --client-ca / --caller-tokens` tests: a client CA and certificates issued by it
// with a chosen subject (CN = caller, O = cluster), made with the openssl command line as an operator would.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { recordPrivateKey, recordSecret } from "./secret-ledger.ts";

const run = promisify(execFile);

export interface ClientCa {
  dir: string;
  certPem: string;
  certPath: string;
  /** A client certificate (extendedKeyUsage clientAuth) for `subject`, e.g. "/CN=apiserver-a/O=cluster-a". */
  issue(subject: string): Promise<{ certPem: string; keyPem: string; certPath: string; keyPath: string }>;
  remove(): Promise<void>;
}

export async function createClientCa(commonName = "imprimatur test client CA"): Promise<ClientCa> {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-client-ca-"));
  const certPath = join(dir, "ca.crt");
  const keyPath = join(dir, "ca.key");
  await run(
    "openssl",
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"].concat([
      "-subj",
      `/CN=${commonName}`,
      "-keyout",
      keyPath,
      "-out",
      certPath,
    ]),
  );
  recordPrivateKey(await readFile(keyPath, "utf8"), "a client CA key");
  let n = 0;
  return {
    dir,
    certPath,
    certPem: await readFile(certPath, "utf8"),
    async issue(subject) {
      const base = join(dir, `client-${++n}`);
      const ext = `${base}.ext`;
      await writeFile(ext, "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n");
      await run("openssl", [
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-subj",
        subject,
        "-keyout",
        `${base}.key`,
        "-out",
        `${base}.csr`,
      ]);
      await run("openssl", [
        "x509",
        "-req",
        "-in",
        `${base}.csr`,
        "-CA",
        certPath,
        "-CAkey",
        keyPath,
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        ext,
        "-out",
        `${base}.crt`,
      ]);
      const keyPem = await readFile(`${base}.key`, "utf8");
      recordPrivateKey(keyPem, "a client certificate's key");
      return { certPem: await readFile(`${base}.crt`, "utf8"), keyPem, certPath: `${base}.crt`, keyPath: `${base}.key` };
    },
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

/** A random bearer token. */
export function randomToken(): string {
  const token = randomBytes(24).toString("base64url");
  recordSecret("a caller token", token);
  return token;
}

/** A CallerTokens file whose callers, each with its token itself, speak for cluster prod. */
export function callerTokensYaml(entries: Array<{ name: string; token: string }>): string {
  const callers = entries.map((e) => `  - name: ${e.name}\n    cluster: prod\n    token: ${e.token}\n`).join("");
  return `apiVersion: imprimatur.dev/v1alpha1\nkind: CallerTokens\ncallers:\n${callers}`;
}

/** Replaces a file the way an operator's tooling would: a new file renamed over the old one. */
export async function replaceFile(file: string, text: string): Promise<void> {
  await writeFile(`${file}.new`, text);
  await rename(`${file}.new`, file);
}
