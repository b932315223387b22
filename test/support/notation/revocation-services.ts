// Certificate revocation services for tests, for one issuing CA: an OCSP responder (RFC 6960) and a CRL distribution
// point (RFC 5280), both plain HTTP on 127.0.0.1, whose URLs a test puts into the certificates it issues
// (CertificateOptions.ocspUrls / crlUrls of test-pki.ts).
//
// OCSP: every request is answered by OpenSSL's own responder, `openssl ocsp -index … -CA … -rsigner … -rkey …`, run
// once per request on the request's DER (-reqin) with the response written to a file (-respout), from an OpenSSL CA
// index file (index.txt) that register() and revoke() rewrite. A node:http server on 127.0.0.1 receives the requests
// (POST of application/ocsp-request to ocspUrl, or RFC 6960 appendix A.1's GET of ocspUrl/<url-encoded base64>),
// counts them, simulates downtime, and returns openssl's response as application/ocsp-response. OpenSSL's long-running
// mode (`-port`) is not used, for two reasons: it listens on every interface ("*:port", IPv4 and IPv6) with no way to
// bind loopback only, and it checks whether index.txt changed only before it waits for the next connection, so the
// first request after a revoke() would be answered from the old index. A fresh openssl per request always reads the
// current index and costs about 10 ms.
//
// Statuses, as openssl gives them: "good" for a certificate register()ed, "revoked" (time, and reason when given) for
// one revoke()d, "unknown" for any other serial or for a certificate of another issuer. Responses are signed by the
// issuer itself (responder "issuer") or by a delegated responder certificate the issuer issues with the
// id-kp-OCSPSigning EKU and id-pkix-ocsp-nocheck (responder "delegated"); they carry the signer's certificate,
// thisUpdate now and nextUpdate an hour later, and the request's nonce when it has one.
//
// CRL: a node:http server on 127.0.0.1 serves the issuer's current DER CRL (application/pkix-crl) at crlUrl, made
// with @peculiar/x509's X509CrlGenerator and signed by the issuer: a v2 CRL with a cRLNumber that counts up and an
// authorityKeyIdentifier, thisUpdate a minute ago and nextUpdate in an hour, regenerated on each revoke() with every
// revoked serial, its revocation date and its reason code (when given).
//
// Downtime: setOcspDown(true) / setCrlDown(true) make the server answer every request with HTTP 503 Service
// Unavailable and an empty body (the default), or with how = "reset" close the connection without any answer (a
// client sees ECONNRESET / "socket hang up"); the port keeps accepting connections either way. requests() counts
// every HTTP request each server received, those answered 503 or 4xx included (not connections closed by "reset"
// before a request was read: each request is counted once it is read).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AsnConvert } from "@peculiar/asn1-schema";
import * as asn1X509 from "@peculiar/asn1-x509";
// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata polyfill loaded first.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { installExitHooks, liveChildren, liveDirs } from "../child-cleanup.ts";
import { issue, OCSP_SIGNING, privateKeyPem, signingAlgorithmOf, toWebCrypto, type TestCertificate } from "./test-pki.ts";

export interface RevocationServicesOptions {
  /**
   * Who signs the OCSP responses: the issuer's own key and certificate (default), or a delegated responder
   * certificate the issuer issues (EKU id-kp-OCSPSigning, id-pkix-ocsp-nocheck, an ec-p256 key).
   */
  responder?: "issuer" | "delegated";
}

export interface RevokeOptions {
  /** Revocation time (whole seconds: UTCTime in the index and the CRL). Default: now. */
  at?: Date;
  /**
   * CRLReason code (RFC 5280 section 5.3.1): 0-6 or 8. Given (0 included), it is the OCSP response's revocationReason
   * and the CRL entry's reasonCode; absent, neither has one. 9 (privilegeWithdrawn) and 10 (aACompromise) are refused:
   * OpenSSL's index file cannot say them (openssl drops an unknown reason name and answers without a reason).
   */
  reason?: number;
}

export type OutageMode = "503" | "reset";

export interface RevocationServices {
  /** The CA whose certificates these services answer for. */
  readonly issuer: TestCertificate;
  /** The certificate whose key signs the OCSP responses: the issuer itself, or the delegated responder. */
  readonly responder: TestCertificate;
  /** The OCSP responder's URL: http://127.0.0.1:PORT/ocsp (POST there, or GET ocspUrl/<request>). */
  readonly ocspUrl: string;
  /** The CRL's URL: http://127.0.0.1:PORT/issuer.crl (GET). */
  readonly crlUrl: string;
  /** The temp folder (os.tmpdir()/imprimatur-revocation-*) with index.txt and the responder's files; stop() removes it. */
  readonly dir: string;
  /** Certificates of this issuer that OCSP answers "good" for, until revoked (a revoked one stays revoked). */
  register(...certs: TestCertificate[]): Promise<void>;
  /** Revokes a certificate of this issuer (registered or not), in both OCSP and the CRL; again: new time and reason. */
  revoke(cert: TestCertificate, opts?: RevokeOptions): Promise<void>;
  /** While down, each request is answered 503 (default) or its connection closed unanswered ("reset"). */
  setOcspDown(down: boolean, how?: OutageMode): void;
  setCrlDown(down: boolean, how?: OutageMode): void;
  /** HTTP requests each server received since start (the start-up self-check is not counted). */
  requests(): { ocsp: number; crl: number };
  /** The DER of the CRL now served. */
  crl(): Uint8Array;
  /** Stops both servers and any openssl still running, removes the temp folder; safe to call twice, never hangs. */
  stop(): Promise<void>;
}

const MINUTE = 60_000;
const OPENSSL_TIMEOUT_MS = 10_000;
const START_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 3_000;
const MAX_REQUEST_BYTES = 64 * 1024;
/** OCSPResponse ::= SEQUENCE { responseStatus ENUMERATED }: malformedRequest (1) and internalError (2), unsigned. */
const MALFORMED_REQUEST = Uint8Array.from([0x30, 0x03, 0x0a, 0x01, 0x01]);
const INTERNAL_ERROR = Uint8Array.from([0x30, 0x03, 0x0a, 0x01, 0x02]);
/** The reason names of OpenSSL's index file (apps/ca.c), by CRLReason code. */
const INDEX_REASONS = new Map<number, string>([
  [0, "unspecified"],
  [1, "keyCompromise"],
  [2, "CACompromise"],
  [3, "affiliationChanged"],
  [4, "superseded"],
  [5, "cessationOfOperation"],
  [6, "certificateHold"],
  [8, "removeFromCRL"],
]);

interface Entry {
  /** Serial as OpenSSL's index writes it (BN_bn2hex): upper case, an even number of digits. */
  serial: string;
  notAfter: Date;
  subject: string;
  revoked?: { at: Date; reason?: number };
}

interface Outage {
  down: boolean;
  how: OutageMode;
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** YYMMDDHHMMSSZ (UTCTime) before 2050, YYYYMMDDHHMMSSZ after, as OpenSSL's index writes times. */
function indexTime(date: Date): string {
  const iso = date.toISOString();
  const digits = iso.slice(0, 19).replace(/[-T:]/g, "");
  return (date.getUTCFullYear() < 2050 ? digits.slice(2) : digits) + "Z";
}

function indexSerial(hex: string): string {
  const digits = BigInt(`0x${hex}`).toString(16).toUpperCase();
  return digits.length % 2 === 0 ? digits : `0${digits}`;
}

function wholeSeconds(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      () => {
        clearTimeout(timer);
        resolve(undefined);
      },
    );
  });
}

export async function startRevocationServices(issuer: TestCertificate, opts: RevocationServicesOptions = {}): Promise<RevocationServices> {
  installExitHooks();
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-revocation-"));
  liveDirs.add(dir);
  const children = new Set<ChildProcess>();
  const entries = new Map<string, Entry>();
  const outage = { ocsp: { down: false, how: "503" } as Outage, crl: { down: false, how: "503" } as Outage };
  const counts = { ocsp: 0, crl: 0 };
  let requestSeq = 0;
  let indexGeneration = 0;
  let crlNumber = 0;
  let crlDer = new Uint8Array();
  let stopping: Promise<void> | undefined;
  let lastResponderError = "";
  // register() and revoke() change the index and the CRL one at a time, in call order.
  let updates: Promise<void> = Promise.resolve();
  const servers: Server[] = [];

  const issuerPem = join(dir, "issuer.pem");
  const responderPem = join(dir, "responder.pem");
  const responderKey = join(dir, "responder.key");
  const indexFile = join(dir, "index.txt");

  function run(args: string[]): Promise<Run> {
    return new Promise((resolve) => {
      if (stopping !== undefined) {
        resolve({ code: -1, stdout: "", stderr: "revocation services stopped" });
        return;
      }
      const child = spawn("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
      children.add(child);
      liveChildren.add(child);
      const stdout: Buffer[] = [];
      const stderr: Buffer[] = [];
      let note = "";
      const timer = setTimeout(() => {
        note = `\nopenssl ${args[0]} timed out after ${OPENSSL_TIMEOUT_MS} ms`;
        child.kill("SIGKILL");
      }, OPENSSL_TIMEOUT_MS);
      child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
      child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
      child.on("error", (err) => {
        note += `\nopenssl: ${err.message}`;
      });
      child.on("close", (code) => {
        clearTimeout(timer);
        children.delete(child);
        liveChildren.delete(child);
        resolve({
          code: note !== "" || code === null ? -1 : code,
          stdout: Buffer.concat(stdout).toString("utf8"),
          stderr: Buffer.concat(stderr).toString("utf8") + note,
        });
      });
    });
  }

  async function writeIndex(): Promise<void> {
    const lines = [...entries.values()].map((e) => {
      const status = e.revoked === undefined ? "V" : "R";
      const reason = e.revoked?.reason === undefined ? "" : `,${INDEX_REASONS.get(e.revoked.reason)}`;
      const revokedAt = e.revoked === undefined ? "" : indexTime(e.revoked.at) + reason;
      return [status, indexTime(e.notAfter), revokedAt, e.serial, "unknown", e.subject].join("\t") + "\n";
    });
    // Written aside and renamed into place, so that an openssl reading it never sees half a file.
    indexGeneration += 1;
    const next = `${indexFile}.${indexGeneration}`;
    await writeFile(next, lines.join(""));
    await rename(next, indexFile);
  }

  async function writeCrl(): Promise<void> {
    crlNumber += 1;
    const now = Date.now();
    const keyId =
      issuer.cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId ?? Buffer.from(await issuer.cert.publicKey.getKeyIdentifier()).toString("hex");
    const crlEntries: x509.X509CrlEntryParams[] = [];
    for (const e of entries.values()) {
      if (e.revoked === undefined) continue;
      const extensions: x509.Extension[] = [];
      // Written here rather than with the generator's `reason`, which leaves out 0 (unspecified).
      if (e.revoked.reason !== undefined)
        extensions.push(
          new x509.Extension(asn1X509.id_ce_cRLReasons, false, AsnConvert.serialize(new asn1X509.CRLReason(e.revoked.reason as asn1X509.CRLReasons))),
        );
      crlEntries.push({ serialNumber: e.serial, revocationDate: e.revoked.at, extensions });
    }
    const crl = await x509.X509CrlGenerator.create({
      issuer: issuer.cert.subjectName,
      thisUpdate: new Date(now - MINUTE),
      nextUpdate: new Date(now + 60 * MINUTE),
      signingAlgorithm: signingAlgorithmOf(issuer.keyType),
      signingKey: await toWebCrypto(issuer.privateKey, issuer.keyType, "sign"),
      extensions: [
        new x509.AuthorityKeyIdentifierExtension(keyId, false),
        new x509.Extension(asn1X509.id_ce_cRLNumber, false, AsnConvert.serialize(new asn1X509.CRLNumber(crlNumber))),
      ],
      entries: crlEntries,
    });
    crlDer = new Uint8Array(crl.rawData);
  }

  function checkIssuer(cert: TestCertificate): void {
    if (cert.cert.issuer !== issuer.cert.subject)
      throw new Error(`revocation services: ${cert.cert.subject} is issued by ${cert.cert.issuer}, not by ${issuer.cert.subject}`);
  }

  function entryOf(cert: TestCertificate): Entry {
    const serial = indexSerial(cert.cert.serialNumber);
    return {
      serial,
      notAfter: cert.cert.notAfter,
      // Informational only (openssl ocsp looks certificates up by serial); a slash-separated DN without tabs.
      subject:
        "/" +
        cert.cert.subject
          .replace(/[\t\r\n]/g, " ")
          .split(", ")
          .join("/"),
    };
  }

  function update(change: () => Promise<void>): Promise<void> {
    const result = updates.then(change);
    updates = result.catch(() => undefined);
    return result;
  }

  async function answerOcsp(der: Uint8Array): Promise<Uint8Array> {
    requestSeq += 1;
    const reqFile = join(dir, `req-${requestSeq}.der`);
    const respFile = join(dir, `resp-${requestSeq}.der`);
    await writeFile(reqFile, der);
    try {
      // prettier-ignore
      const result = await run([
        "ocsp", "-index", indexFile, "-CA", issuerPem, "-rsigner", responderPem, "-rkey", responderKey,
        "-nmin", "60", "-reqin", reqFile, "-respout", respFile,
      ]);
      if (result.code === 0) return new Uint8Array(await readFile(respFile));
      lastResponderError = result.stderr.trim();
      if (result.stderr.includes("Error reading OCSP request")) return MALFORMED_REQUEST;
      if (stopping === undefined) process.stderr.write(`[revocation-services] openssl ocsp failed (${result.code}): ${lastResponderError}\n`);
      return INTERNAL_ERROR;
    } finally {
      await rm(reqFile, { force: true });
      await rm(respFile, { force: true });
    }
  }

  function readBody(req: IncomingMessage): Promise<Uint8Array | undefined> {
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_REQUEST_BYTES) chunks.push(chunk);
      });
      req.on("end", () => resolve(size <= MAX_REQUEST_BYTES ? new Uint8Array(Buffer.concat(chunks)) : undefined));
      req.on("error", () => resolve(undefined));
    });
  }

  function status(res: ServerResponse, code: number, text: string): void {
    res.writeHead(code, { "content-type": "text/plain", connection: "close" });
    res.end(text === "" ? undefined : `${text}\n`);
  }

  /** True when the outage answered the request. */
  function outageAnswered(state: Outage, req: IncomingMessage, res: ServerResponse): boolean {
    if (!state.down) return false;
    if (state.how === "reset") req.socket.destroy();
    else status(res, 503, "");
    return true;
  }

  async function onOcsp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    counts.ocsp += 1;
    if (outageAnswered(outage.ocsp, req, res)) return;
    const url = req.url ?? "";
    let der: Uint8Array | undefined;
    if (req.method === "POST" && (url === "/ocsp" || url === "/ocsp/")) {
      der = await readBody(req);
      if (der === undefined) return status(res, 413, "request too large");
    } else if (req.method === "GET" && url.startsWith("/ocsp/") && url.length > "/ocsp/".length) {
      try {
        der = new Uint8Array(Buffer.from(decodeURIComponent(url.slice("/ocsp/".length)), "base64"));
      } catch {
        return status(res, 400, "bad URL encoding");
      }
    } else if (url === "/ocsp" || url.startsWith("/ocsp/")) {
      return status(res, 405, "POST an OCSP request to this URL, or GET it base64-encoded below it");
    } else {
      return status(res, 404, "not found");
    }
    const answer = await answerOcsp(der);
    res.writeHead(200, { "content-type": "application/ocsp-response", "content-length": answer.length });
    res.end(answer);
  }

  function onCrl(req: IncomingMessage, res: ServerResponse): void {
    counts.crl += 1;
    if (outageAnswered(outage.crl, req, res)) return;
    if (req.url !== "/issuer.crl") return status(res, 404, "not found");
    if (req.method !== "GET" && req.method !== "HEAD") return status(res, 405, "GET the CRL");
    res.writeHead(200, { "content-type": "application/pkix-crl", "content-length": crlDer.length });
    res.end(req.method === "HEAD" ? undefined : crlDer);
  }

  function listen(handler: (req: IncomingMessage, res: ServerResponse) => void | Promise<void>): Promise<number> {
    const server = createServer((req, res) => {
      Promise.resolve(handler(req, res)).catch((err: unknown) => {
        if (!res.headersSent) status(res, 500, String(err));
        else res.destroy();
      });
    });
    servers.push(server);
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port));
    });
  }

  async function stop(): Promise<void> {
    stopping ??= (async () => {
      for (const child of children) child.kill("SIGKILL");
      await Promise.all(
        servers.map((server) =>
          withTimeout(
            new Promise<void>((resolve) => {
              server.close(() => resolve());
              server.closeAllConnections();
            }),
            STOP_TIMEOUT_MS,
          ),
        ),
      );
      await withTimeout(
        Promise.all(
          [...children].map(
            (child) =>
              new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("close", () => resolve()))),
          ),
        ),
        STOP_TIMEOUT_MS,
      );
      await withTimeout(rm(dir, { recursive: true, force: true }), STOP_TIMEOUT_MS);
      liveDirs.delete(dir);
    })();
    return stopping;
  }

  try {
    let responder = issuer;
    if (opts.responder === "delegated") {
      responder = await issue(issuer, {
        subject: "O=Imprimatur Tests, CN=Test OCSP Responder",
        extendedKeyUsage: { usages: [OCSP_SIGNING], critical: false },
        keyUsage: { flags: x509.KeyUsageFlags.digitalSignature, critical: true },
        ocspNoCheck: true,
      });
    }
    await writeFile(issuerPem, issuer.pem);
    await writeFile(responderPem, responder.pem);
    await writeFile(responderKey, privateKeyPem(responder), { mode: 0o600 });
    // openssl's index loader wants every valid certificate's subject unique unless the attribute file says otherwise.
    await writeFile(`${indexFile}.attr`, "unique_subject = no\n");
    await writeIndex();
    await writeCrl();
    const ocspPort = await listen(onOcsp);
    const crlPort = await listen(onCrl);
    const ocspUrl = `http://127.0.0.1:${ocspPort}/ocsp`;
    const crlUrl = `http://127.0.0.1:${crlPort}/issuer.crl`;

    // Ready once openssl's responder answers a real request over HTTP: openssl's own client asks for serial 1, which
    // is never in the index (test-pki's serials have 32 hex digits), and must hear "unknown".
    const deadline = Date.now() + START_TIMEOUT_MS;
    let check: Run;
    for (;;) {
      // prettier-ignore
      check = await run(["ocsp", "-issuer", issuerPem, "-serial", "0x01", "-url", ocspUrl, "-noverify", "-no_nonce", "-timeout", "5"]);
      if (check.code === 0 && /: unknown/.test(check.stdout)) break;
      if (Date.now() > deadline || check.stderr.includes("ENOENT"))
        throw new Error(
          `revocation services: the OCSP responder did not answer (waited up to ${START_TIMEOUT_MS} ms)\n` +
            `client (exit ${check.code}): ${check.stdout}${check.stderr}\nresponder: ${lastResponderError || "(no error)"}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    counts.ocsp = 0;

    const services: RevocationServices = {
      issuer,
      responder,
      ocspUrl,
      crlUrl,
      dir,
      register(...certs) {
        return update(async () => {
          for (const cert of certs) checkIssuer(cert);
          for (const cert of certs) {
            const entry = entryOf(cert);
            if (entries.get(entry.serial)?.revoked === undefined) entries.set(entry.serial, entry);
          }
          await writeIndex();
        });
      },
      revoke(cert, revokeOpts = {}) {
        return update(async () => {
          checkIssuer(cert);
          const reason = revokeOpts.reason;
          if (reason !== undefined && !INDEX_REASONS.has(reason))
            throw new Error(`revocation services: reason ${reason} is not one OpenSSL's index can hold (0-6, 8)`);
          const entry = entryOf(cert);
          entry.revoked = { at: wholeSeconds(revokeOpts.at ?? new Date()), ...(reason === undefined ? {} : { reason }) };
          entries.set(entry.serial, entry);
          await writeIndex();
          await writeCrl();
        });
      },
      setOcspDown(down, how = "503") {
        outage.ocsp = { down, how };
      },
      setCrlDown(down, how = "503") {
        outage.crl = { down, how };
      },
      requests: () => ({ ...counts }),
      crl: () => crlDer,
      stop,
    };
    return services;
  } catch (err) {
    await stop();
    throw err;
  }
}
