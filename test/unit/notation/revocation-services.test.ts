// The revocation services tests run against (test/support/notation/revocation-services.ts) are what they claim: an
// OCSP responder and a CRL distribution point, checked with OpenSSL's own client and CRL reader only (never with the
// code under test), and the certificates test-pki.ts issues name them in AIA and CRL Distribution Points.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startRevocationServices, type RevocationServices } from "../../support/notation/revocation-services.ts";
import { createRoot, issue, type TestCertificate } from "../../support/notation/test-pki.ts";

interface Output {
  code: number;
  stdout: string;
  stderr: string;
}

function openssl(...args: string[]): Promise<Output> {
  return new Promise((resolve) => {
    execFile("openssl", args, { timeout: 10_000, encoding: "utf8" }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === "number" ? err.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

let dir: string;
let root: TestCertificate;
let ca: TestCertificate;
let files = 0;
/** Writes a PEM (or several, concatenated) to a new file of the test's folder, named …-name; returns its path. */
async function pem(name: string, ...certs: TestCertificate[]): Promise<string> {
  files += 1;
  const path = join(dir, `${files}-${name}`);
  await writeFile(path, certs.map((c) => c.pem).join(""));
  return path;
}

/** `openssl ocsp` as a client: the status line of `cert` and the response's text. */
async function ask(services: RevocationServices, cert: TestCertificate, ...extra: string[]): Promise<Output> {
  // prettier-ignore
  return openssl("ocsp", "-issuer", await pem("issuer.pem", ca), "-cert", await pem("cert.pem", cert), "-url", services.ocspUrl,
    "-CAfile", await pem("root.pem", root), "-resp_text", "-timeout", "5", ...extra);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "revocation-services-test-"));
  root = await createRoot({ subject: "C=US, ST=WA, O=Example, CN=Revocation Root" });
  ca = await issue(root, { subject: "C=US, ST=WA, O=Example, CN=Revocation Signing CA", isCa: true, basicConstraints: { ca: true, pathLength: 0 } });
});
after(() => rm(dir, { recursive: true, force: true }));

describe("OCSP and CRL signed by the issuer", () => {
  let services: RevocationServices;
  let leaf: TestCertificate;
  before(async () => {
    services = await startRevocationServices(ca);
    leaf = await issue(ca, { subject: "C=US, ST=WA, O=Example, CN=Builder", ocspUrls: [services.ocspUrl], crlUrls: [services.crlUrl] });
  });
  after(() => services.stop());

  test("the leaf names both services, in non-critical AIA and CRL Distribution Points extensions", async () => {
    const out = await openssl("x509", "-in", await pem("leaf.pem", leaf), "-noout", "-text");
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /Authority Information Access: \n\s+OCSP - URI:(\S+)\n/);
    assert.equal(/OCSP - URI:(\S+)/.exec(out.stdout)?.[1], services.ocspUrl);
    assert.match(out.stdout, /X509v3 CRL Distribution Points: \n\s+Full Name:\n\s+URI:(\S+)\n/);
    assert.equal(/Full Name:\n\s+URI:(\S+)/.exec(out.stdout)?.[1], services.crlUrl);
    assert.match(services.ocspUrl, /^http:\/\/127\.0\.0\.1:\d+\/ocsp$/);
  });

  test("unknown before it is registered, good after, revoked with time and reason after revoke()", async () => {
    const before = services.requests().ocsp;
    const unknown = await ask(services, leaf);
    assert.equal(unknown.code, 0, unknown.stderr);
    assert.match(unknown.stderr, /Response verify OK/);
    assert.match(unknown.stdout, /cert\.pem: unknown/);

    await services.register(leaf);
    const good = await ask(services, leaf);
    assert.match(good.stderr, /Response verify OK/);
    assert.match(good.stdout, /cert\.pem: good/);
    assert.match(good.stdout, /Responder Id: C = US, ST = WA, O = Example, CN = Revocation Signing CA/);
    assert.match(good.stdout, new RegExp(`Serial Number: ${leaf.cert.serialNumber.toUpperCase()}`));
    // thisUpdate now, nextUpdate an hour later.
    assert.match(good.stdout, /Next Update: /);

    await services.revoke(leaf, { at: new Date("2026-01-02T03:04:05.678Z"), reason: 1 });
    const revoked = await ask(services, leaf);
    assert.match(revoked.stderr, /Response verify OK/);
    assert.match(revoked.stdout, /cert\.pem: revoked/);
    assert.match(revoked.stdout, /Revocation Time: Jan {2}2 03:04:05 2026 GMT/);
    assert.match(revoked.stdout, /Reason: keyCompromise/);
    assert.equal(services.requests().ocsp, before + 3);

    // registering it again does not bring it back
    await services.register(leaf);
    assert.match((await ask(services, leaf)).stdout, /cert\.pem: revoked/);
  });

  test("a serial it knows, asked about under another issuer, is unknown; other issuers' certificates are refused", async () => {
    const stranger = await issue(root, { subject: "C=US, ST=WA, O=Example, CN=Issued By The Root" });
    await assert.rejects(services.register(stranger), /not by/);
    // The CertID names the root as issuer (its name and key hashes) with the leaf's serial, which the index holds.
    // prettier-ignore
    const out = await openssl("ocsp", "-issuer", await pem("root.pem", root), "-serial", `0x${leaf.cert.serialNumber}`, "-url", services.ocspUrl,
      "-noverify", "-resp_text", "-timeout", "5");
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /Cert Status: unknown/);
    assert.match(out.stdout, new RegExp(`Serial Number: ${leaf.cert.serialNumber.toUpperCase()}`));
  });

  test("concurrent requests are each answered", async () => {
    const answers = await Promise.all(Array.from({ length: 6 }, () => ask(services, leaf)));
    for (const out of answers) {
      assert.match(out.stderr, /Response verify OK/);
      assert.match(out.stdout, /cert\.pem: revoked/);
    }
  });

  test("the CRL verifies under the issuer and lists the revoked serial, its date and reason", async () => {
    const other = await issue(ca, { subject: "C=US, ST=WA, O=Example, CN=Other" });
    await services.register(other);
    const before = services.requests().crl;
    const response = await fetch(services.crlUrl);
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("content-type"), "application/pkix-crl");
    const path = join(dir, "downloaded.crl");
    await writeFile(path, new Uint8Array(await response.arrayBuffer()));
    const out = await openssl("crl", "-inform", "DER", "-in", path, "-CAfile", await pem("chain.pem", ca, root), "-noout", "-text");
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stderr, /verify OK/);
    assert.match(out.stdout, /Issuer: C = US, ST = WA, O = Example, CN = Revocation Signing CA/);
    assert.match(out.stdout, /X509v3 CRL Number: \n\s+\d+/);
    assert.match(out.stdout, /X509v3 Authority Key Identifier: /);
    assert.match(out.stdout, new RegExp(`Serial Number: ${leaf.cert.serialNumber.toUpperCase()}\\n\\s+Revocation Date: Jan {2}2 03:04:05 2026 GMT`));
    assert.match(out.stdout, /X509v3 CRL Reason Code: \n\s+Key Compromise/);
    assert.doesNotMatch(out.stdout, new RegExp(other.cert.serialNumber.toUpperCase()));
    assert.equal(services.requests().crl, before + 1);
    assert.deepEqual(new Uint8Array(await (await fetch(services.crlUrl)).arrayBuffer()), services.crl());
  });

  test("a GET request (RFC 6960 appendix A.1) is answered too", async () => {
    const reqPath = join(dir, "get-req.der");
    const respPath = join(dir, "get-resp.der");
    const made = await openssl("ocsp", "-issuer", await pem("issuer.pem", ca), "-cert", await pem("cert.pem", leaf), "-reqout", reqPath, "-no_nonce");
    assert.equal(made.code, 0, made.stderr);
    const b64 = (await readFile(reqPath)).toString("base64");
    const response = await fetch(`${services.ocspUrl}/${encodeURIComponent(b64)}`);
    assert.equal(response.headers.get("content-type"), "application/ocsp-response");
    await writeFile(respPath, new Uint8Array(await response.arrayBuffer()));
    // prettier-ignore
    const out = await openssl("ocsp", "-respin", respPath, "-issuer", await pem("issuer.pem", ca), "-cert", await pem("cert.pem", leaf),
      "-CAfile", await pem("root.pem", root), "-no_nonce");
    assert.match(out.stderr, /Response verify OK/);
    assert.match(out.stdout, /cert\.pem: revoked/);
  });

  test("a malformed request is answered malformedRequest; other paths and methods are refused", async () => {
    const response = await fetch(services.ocspUrl, { method: "POST", headers: { "content-type": "application/ocsp-request" }, body: "not DER" });
    assert.equal(response.status, 200);
    assert.deepEqual(new Uint8Array(await response.arrayBuffer()), Uint8Array.from([0x30, 0x03, 0x0a, 0x01, 0x01]));
    assert.equal((await fetch(services.ocspUrl.replace("/ocsp", "/elsewhere"), { method: "POST", body: "x" })).status, 404);
    assert.equal((await fetch(services.ocspUrl)).status, 405);
    assert.equal((await fetch(services.crlUrl, { method: "POST", body: "x" })).status, 405);
  });

  test("reasons OpenSSL's index cannot hold, and certificates of other issuers, are refused", async () => {
    await assert.rejects(services.revoke(leaf, { reason: 9 }), /reason 9/);
    await assert.rejects(services.revoke(leaf, { reason: 7 }), /reason 7/);
    await assert.rejects(services.revoke(root), /not by/);
  });

  test("down: 503 or a closed connection, counted; up again: answers", async () => {
    const before = services.requests();
    services.setOcspDown(true);
    const down = await ask(services, leaf);
    assert.notEqual(down.code, 0);
    assert.match(down.stderr, /503/);
    services.setOcspDown(true, "reset");
    const reset = await ask(services, leaf);
    assert.notEqual(reset.code, 0);
    services.setCrlDown(true);
    assert.equal((await fetch(services.crlUrl)).status, 503);
    services.setCrlDown(true, "reset");
    await assert.rejects(fetch(services.crlUrl));
    assert.deepEqual(services.requests(), { ocsp: before.ocsp + 2, crl: before.crl + 2 });

    services.setOcspDown(false);
    services.setCrlDown(false);
    assert.match((await ask(services, leaf)).stdout, /cert\.pem: revoked/);
    assert.equal((await fetch(services.crlUrl)).status, 200);
  });
});

describe("OCSP signed by a delegated responder", () => {
  let services: RevocationServices;
  let leaf: TestCertificate;
  before(async () => {
    services = await startRevocationServices(ca, { responder: "delegated" });
    leaf = await issue(ca, { subject: "C=US, ST=WA, O=Example, CN=Builder", ocspUrls: [services.ocspUrl] });
    await services.register(leaf);
  });
  after(() => services.stop());

  test("the CRL is there before anything is revoked, and empty", async () => {
    const path = join(dir, "empty.crl");
    await writeFile(path, services.crl());
    const out = await openssl("crl", "-inform", "DER", "-in", path, "-CAfile", await pem("chain.pem", ca, root), "-noout", "-text");
    assert.match(out.stderr, /verify OK/);
    assert.match(out.stdout, /No Revoked Certificates/);
  });

  test("the responder certificate is issued by the CA, for OCSP signing, with ocsp-nocheck", async () => {
    assert.notEqual(services.responder, ca);
    const out = await openssl("x509", "-in", await pem("responder.pem", services.responder), "-noout", "-text");
    assert.match(out.stdout, /Issuer: C = US, ST = WA, O = Example, CN = Revocation Signing CA/);
    assert.match(out.stdout, /X509v3 Extended Key Usage: \n\s+OCSP Signing\n/);
    assert.match(out.stdout, /OCSP No Check: \n/);
  });

  test("good, then revoked, verified through the chain to the root", async () => {
    const good = await ask(services, leaf);
    assert.equal(good.code, 0, good.stderr);
    assert.match(good.stderr, /Response verify OK/);
    assert.match(good.stdout, /cert\.pem: good/);
    assert.match(good.stdout, /Responder Id: O = Imprimatur Tests, CN = Test OCSP Responder/);
    await services.revoke(leaf, { reason: 4 });
    const revoked = await ask(services, leaf);
    assert.match(revoked.stderr, /Response verify OK/);
    assert.match(revoked.stdout, /cert\.pem: revoked/);
    assert.match(revoked.stdout, /Reason: superseded/);
  });

  test("verified with the responder certificate trusted directly (-VAfile)", async () => {
    const out = await ask(services, leaf, "-VAfile", await pem("va.pem", services.responder));
    assert.match(out.stderr, /Response verify OK/);
    assert.match(out.stdout, /cert\.pem: revoked/);
  });
});

test("an RSA issuer signs responses and CRLs that verify", async () => {
  const rsaRoot = await createRoot({ subject: "C=US, O=Example, CN=RSA Root", keyType: "rsa-2048" });
  const rsaCa = await issue(rsaRoot, { subject: "C=US, O=Example, CN=RSA CA", isCa: true, keyType: "rsa-2048" });
  const services = await startRevocationServices(rsaCa);
  try {
    const leaf = await issue(rsaCa, { subject: "C=US, O=Example, CN=RSA Leaf" });
    await services.revoke(leaf, { reason: 0 });
    // prettier-ignore
    const out = await openssl("ocsp", "-issuer", await pem("rsa-ca.pem", rsaCa), "-cert", await pem("cert.pem", leaf), "-url", services.ocspUrl,
      "-CAfile", await pem("rsa-root.pem", rsaRoot), "-resp_text", "-timeout", "5");
    assert.match(out.stderr, /Response verify OK/);
    assert.match(out.stdout, /cert\.pem: revoked/);
    assert.match(out.stdout, /Reason: unspecified/);
    const path = join(dir, "rsa.crl");
    await writeFile(path, services.crl());
    const crl = await openssl("crl", "-inform", "DER", "-in", path, "-CAfile", await pem("rsa-chain.pem", rsaCa, rsaRoot), "-noout", "-text");
    assert.match(crl.stderr, /verify OK/);
    assert.match(crl.stdout, /Signature Algorithm: sha256WithRSAEncryption/);
    assert.match(crl.stdout, /CRL Reason Code: \n\s+Unspecified/);
  } finally {
    await services.stop();
  }
});

test("stop() removes everything, closes the ports, and can be called twice", async () => {
  const services = await startRevocationServices(ca);
  assert.ok(existsSync(join(services.dir, "index.txt")));
  assert.match(services.dir, /imprimatur-revocation-/);
  await Promise.all([services.stop(), services.stop()]);
  await services.stop();
  assert.equal(existsSync(services.dir), false);
  await assert.rejects(fetch(services.crlUrl));
  await assert.rejects(fetch(services.ocspUrl, { method: "POST", body: "x" }));
});

test("test-pki serial numbers are positive, 16 bytes and distinct", async () => {
  const serials = new Set<string>();
  for (let i = 0; i < 20; i++) {
    const cert = await issue(ca, { subject: `C=US, O=Example, CN=Serial ${i}` });
    assert.match(cert.cert.serialNumber, /^[0-7][0-9a-f]{31}$/);
    assert.notEqual(cert.cert.serialNumber, "0".repeat(32));
    serials.add(cert.cert.serialNumber);
  }
  assert.equal(serials.size, 20);
});
