import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { X509Certificate, createPrivateKey } from "node:crypto";
import { mkdtemp, readFile, rm, stat, unlink, writeFile } from "node:fs/promises";
import { createServer, request } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CertificateFilesError } from "../../../src/tls/certificate-files.ts";
import { createCertificateAuthority, ensureServingCertificate, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";

// Loaded after tls-bootstrap.ts, which installs the Reflect metadata shim the library needs.
const x509 = await import("@peculiar/x509");

const DAY_MS = 24 * 60 * 60 * 1000;
let root: string;

before(async () => {
  root = await mkdtemp(join(tmpdir(), "imprimatur-tls-"));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

async function mode(path: string): Promise<number> {
  return (await stat(path)).mode & 0o777;
}

/** GET https://{host}:{port}/ trusting only `ca`; resolves with the body or rejects with the TLS error. */
function get(host: string, port: number, ca: string | undefined, extra: { servername?: string } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path: "/", method: "GET", agent: false, family: 4, ...(ca !== undefined ? { ca: [ca] } : {}), ...extra }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve(body));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

test("first call creates a P-256 CA and serving certificate with private modes", async () => {
  const stateDir = join(root, "create", "state");
  const m = await ensureServingCertificate(stateDir, ["webhook.imprimatur.svc", "10.96.0.10", " ", "fd00::10"]);
  assert.equal(m.created, true);

  assert.equal(await mode(stateDir), 0o700);
  assert.equal(await mode(join(stateDir, "ca.key")), 0o600);
  assert.equal(await mode(join(stateDir, "tls.key")), 0o600);
  assert.equal(await readFile(join(stateDir, "ca.crt"), "utf8"), m.caCertPem);
  assert.equal(await readFile(join(stateDir, "ca.key"), "utf8"), m.caKeyPem);
  assert.equal(await readFile(join(stateDir, "tls.crt"), "utf8"), m.certPem);
  assert.equal(await readFile(join(stateDir, "tls.key"), "utf8"), m.keyPem);

  for (const pem of [m.keyPem, m.caKeyPem!]) {
    assert.match(pem, /^-----BEGIN PRIVATE KEY-----\n/);
    const key = createPrivateKey(pem);
    assert.equal(key.asymmetricKeyType, "ec");
    assert.equal(key.asymmetricKeyDetails?.namedCurve, "prime256v1");
  }

  const ca = new X509Certificate(m.caCertPem);
  const leaf = new X509Certificate(m.certPem);
  const now = Date.now();
  assert.equal(ca.ca, true);
  assert.ok(ca.validToDate.getTime() - now > 3649 * DAY_MS && ca.validToDate.getTime() - now <= 3650 * DAY_MS);
  assert.equal(leaf.ca, false);
  assert.ok(leaf.validToDate.getTime() - now > 364 * DAY_MS && leaf.validToDate.getTime() - now <= 365 * DAY_MS);
  assert.ok(leaf.validFromDate.getTime() <= now);
  assert.ok(leaf.checkIssued(ca));
  assert.ok(leaf.verify(ca.publicKey));
  assert.ok(leaf.checkPrivateKey(createPrivateKey(m.keyPem)));
  assert.deepEqual(leaf.keyUsage, ["1.3.6.1.5.5.7.3.1"]);

  for (const host of ["webhook.imprimatur.svc", "localhost"]) assert.equal(leaf.checkHost(host), host);
  for (const ip of ["10.96.0.10", "127.0.0.1", "::1", "fd00::10"]) assert.equal(leaf.checkIP(ip), ip);
  assert.equal(leaf.checkHost("other.example"), undefined);

  const parsedLeaf = new x509.X509Certificate(m.certPem);
  assert.equal(parsedLeaf.getExtension(x509.BasicConstraintsExtension)?.ca, false);
  assert.equal(parsedLeaf.getExtension(x509.KeyUsagesExtension)?.usages, x509.KeyUsageFlags.digitalSignature);
  const san = parsedLeaf.getExtension(x509.SubjectAlternativeNameExtension)?.names.toJSON() ?? [];
  assert.deepEqual(
    san
      .filter((n) => n.type === "dns")
      .map((n) => n.value)
      .sort(),
    ["localhost", "webhook.imprimatur.svc"],
  );
  assert.equal(san.filter((n) => n.type === "ip").length, 4);
  const parsedCa = new x509.X509Certificate(m.caCertPem);
  assert.equal(parsedCa.getExtension(x509.BasicConstraintsExtension)?.ca, true);
  assert.ok((parsedCa.getExtension(x509.KeyUsagesExtension)!.usages & x509.KeyUsageFlags.keyCertSign) !== 0);
});

test("a later call reuses the files, and re-issues the serving certificate (same CA) for a new host", async () => {
  const stateDir = join(root, "reuse");
  const first = await ensureServingCertificate(stateDir, ["webhook.imprimatur.svc"]);
  assert.equal(first.created, true);

  const second = await ensureServingCertificate(stateDir, ["webhook.imprimatur.svc"]);
  assert.equal(second.created, false);
  assert.equal(second.caCertPem, first.caCertPem);
  assert.equal(second.caKeyPem, first.caKeyPem);
  assert.equal(second.certPem, first.certPem);
  assert.equal(second.keyPem, first.keyPem);

  // Defaults, case and a trailing dot do not count as new hosts.
  const same = await ensureServingCertificate(stateDir, ["Webhook.Imprimatur.SVC.", "localhost", "127.0.0.1"]);
  assert.equal(same.certPem, first.certPem);

  const third = await ensureServingCertificate(stateDir, ["webhook.imprimatur.svc", "imprimatur.example.com", "192.0.2.7"]);
  assert.equal(third.created, false);
  assert.equal(third.caCertPem, first.caCertPem);
  assert.notEqual(third.certPem, first.certPem);
  assert.equal(await readFile(join(stateDir, "tls.crt"), "utf8"), third.certPem);
  const leaf = new X509Certificate(third.certPem);
  assert.ok(leaf.verify(new X509Certificate(first.caCertPem).publicKey));
  assert.equal(leaf.checkHost("imprimatur.example.com"), "imprimatur.example.com");
  assert.equal(leaf.checkIP("192.0.2.7"), "192.0.2.7");
  assert.equal(leaf.checkHost("webhook.imprimatur.svc"), "webhook.imprimatur.svc");
});

test("a serving certificate that expires within 30 days, or is missing, is re-issued", async () => {
  const stateDir = join(root, "expiring");
  const first = await ensureServingCertificate(stateDir, []);
  const shortLived = await issueCertificate(
    { certPem: first.caCertPem, keyPem: first.caKeyPem! },
    { commonName: "short", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1", "::1"], days: 10 },
  );
  await writeFile(join(stateDir, "tls.crt"), shortLived.certPem);
  await writeFile(join(stateDir, "tls.key"), shortLived.keyPem);

  const renewed = await ensureServingCertificate(stateDir, []);
  assert.equal(renewed.created, false);
  assert.equal(renewed.caCertPem, first.caCertPem);
  assert.notEqual(renewed.certPem, shortLived.certPem);
  assert.ok(new X509Certificate(renewed.certPem).validToDate.getTime() - Date.now() > 364 * DAY_MS);

  await unlink(join(stateDir, "tls.key"));
  const again = await ensureServingCertificate(stateDir, []);
  assert.equal(again.created, false);
  assert.notEqual(again.certPem, renewed.certPem);
  assert.ok(new X509Certificate(again.certPem).checkPrivateKey(createPrivateKey(await readFile(join(stateDir, "tls.key"), "utf8"))));
});

test("a CA certificate without its key is an error naming the file", async () => {
  const stateDir = join(root, "lost-key");
  await ensureServingCertificate(stateDir, []);
  await unlink(join(stateDir, "ca.key"));
  await assert.rejects(ensureServingCertificate(stateDir, []), (err: Error) => {
    assert.ok(err.message.includes(join(stateDir, "ca.key")), err.message);
    assert.ok(err instanceof CertificateFilesError);
    assert.equal(err.code, "missing-key");
    return true;
  });
});

test("a CA on disk that is no CA, has another key or is no PEM is refused by code, naming the file", async () => {
  const stateDir = join(root, "bad-ca");
  const m = await ensureServingCertificate(stateDir, []);
  const caCert = join(stateDir, "ca.crt");
  const caKey = join(stateDir, "ca.key");
  const refused = (code: string, file: string) => (err: unknown) => {
    assert.ok(err instanceof CertificateFilesError);
    assert.equal(err.code, code);
    assert.ok(err.message.startsWith(file), err.message);
    return true;
  };

  await writeFile(caCert, m.certPem);
  await writeFile(caKey, m.keyPem);
  await assert.rejects(ensureServingCertificate(stateDir, []), refused("not-a-ca", caCert));

  const other = await createCertificateAuthority("other");
  await writeFile(caCert, m.caCertPem);
  await writeFile(caKey, other.keyPem);
  await assert.rejects(ensureServingCertificate(stateDir, []), refused("key-mismatch", caKey));

  await writeFile(caKey, "not a key");
  await assert.rejects(ensureServingCertificate(stateDir, []), refused("not-a-key", caKey));

  await writeFile(caCert, "not a certificate");
  await assert.rejects(ensureServingCertificate(stateDir, []), refused("not-a-certificate", caCert));
});

test("issueCertificate makes client certificates and rejects bad names", async () => {
  const ca = await createCertificateAuthority("test-ca");
  const client = await issueCertificate(ca, { commonName: "system:kube-apiserver", client: true });
  const cert = new X509Certificate(client.certPem);
  assert.deepEqual(cert.keyUsage, ["1.3.6.1.5.5.7.3.2"]);
  assert.equal(cert.subjectAltName, undefined);
  assert.match(cert.subject, /CN=system:kube-apiserver/);
  assert.ok(cert.verify(new X509Certificate(ca.certPem).publicKey));

  await assert.rejects(issueCertificate(ca, { commonName: "x", ipAddresses: ["not-an-ip"] }), {
    name: "TlsError",
    code: "invalid-ip-address",
    message: /not an IP address/,
  });
  await assert.rejects(issueCertificate(ca, { commonName: "x", dnsNames: ["bad name"] }), {
    name: "TlsError",
    code: "invalid-dns-name",
    message: /not a valid DNS name/,
  });
  await assert.rejects(ensureServingCertificate(join(root, "bad-host"), ["https://example.com"]), {
    code: "invalid-dns-name",
    message: /not a valid DNS name/,
  });
  await assert.rejects(issueCertificate(ca, { commonName: "x", days: 0 }), { name: "TlsError", code: "invalid-validity" });
  await assert.rejects(issueCertificate(ca, { commonName: "x", now: 1_000, notAfter: 1_000 }), {
    code: "invalid-validity",
    message: /would not be valid after issuance/,
  });
  await assert.rejects(createCertificateAuthority("x", { validityMs: -1 }), {
    name: "TlsError",
    code: "invalid-validity",
    message: /CA validity must be a positive duration/,
  });
});

test("a real TLS server with the material is trusted via ca.crt alone, on 127.0.0.1 and localhost", async () => {
  const stateDir = join(root, "handshake");
  const m = await ensureServingCertificate(stateDir, ["webhook.imprimatur.svc"]);
  const server = createServer({ cert: m.certPem, key: m.keyPem }, (_req, res) => res.end("ok"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  try {
    const caFromDisk = await readFile(join(stateDir, "ca.crt"), "utf8");
    assert.equal(await get("127.0.0.1", port, caFromDisk), "ok");
    assert.equal(await get("localhost", port, caFromDisk), "ok");
    assert.equal(await get("127.0.0.1", port, caFromDisk, { servername: "webhook.imprimatur.svc" }), "ok");

    // The trust really comes from ca.crt and from the SANs.
    await assert.rejects(get("127.0.0.1", port, undefined), (err: NodeJS.ErrnoException) => {
      assert.match(String(err.code), /UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED|UNABLE_TO_GET_ISSUER/);
      return true;
    });
    await assert.rejects(get("127.0.0.1", port, caFromDisk, { servername: "elsewhere.example" }), { code: "ERR_TLS_CERT_ALTNAME_INVALID" });
    const otherCa = await createCertificateAuthority("other");
    await assert.rejects(get("127.0.0.1", port, otherCa.certPem));
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  // openssl is an independent check of the chain, purpose and names when it is installed.
  const version = spawnSync("openssl", ["version"], { encoding: "utf8" });
  if (version.error === undefined && version.status === 0) {
    const caFile = join(stateDir, "ca.crt");
    const certFile = join(stateDir, "tls.crt");
    for (const check of [
      ["-verify_hostname", "localhost"],
      ["-verify_ip", "127.0.0.1"],
      ["-verify_ip", "::1"],
      ["-verify_hostname", "webhook.imprimatur.svc"],
    ]) {
      const result = spawnSync("openssl", ["verify", "-purpose", "sslserver", ...check, "-CAfile", caFile, certFile], { encoding: "utf8" });
      assert.equal(result.status, 0, `${check.join(" ")}: ${result.stdout}${result.stderr}`);
      assert.match(result.stdout, /: OK/);
    }
    const wrongName = spawnSync("openssl", ["verify", "-verify_hostname", "elsewhere.example", "-CAfile", caFile, certFile], { encoding: "utf8" });
    assert.notEqual(wrongName.status, 0);
  }
});
