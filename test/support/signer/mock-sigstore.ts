// Test signer: an offline, in-process Sigstore instance — a Fulcio-like CA, a CT log, a Rekor-like transparency log
// and an RFC 3161 timestamp authority — plus the trusted_root.json that trusts exactly them.
//
// Exists so tests can make real keyless signatures offline. The CT log and the TSA are @sigstore/mock's
// (initializeCTLog, initializeTSA). The CA and the log are our own, because @sigstore/mock's CA only issues URI SANs
// with a fixed 10-minute validity straight from its root, and its tlog gives each entry a random logIndex with an
// inclusion proof for index 0 of a one-leaf tree. Here the CA has a root and an intermediate (like Fulcio), issues
// URI or email SANs with any validity, and the log is a real RFC 6962 Merkle tree: entry i gets logIndex i, an
// inclusion proof against a signed checkpoint of the tree of size i+1, and a SignedEntryTimestamp.
// Two instances share nothing, so one's trust root rejects the other's signatures.

import { createHash, generateKeyPairSync, KeyObject as NodeKeyObject, randomInt, sign } from "node:crypto";
import type { KeyObject } from "node:crypto";
import { json } from "@sigstore/core";
import { initializeCTLog, initializeTSA } from "@sigstore/mock";

// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata polyfill loaded first.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
x509.cryptoProvider.set(globalThis.crypto);
const subtle = globalThis.crypto.subtle;

import { recordPrivateKey } from "../secret-ledger.ts";
import { generateSigningKey } from "./keys.ts";
import type { SigningKey } from "./keys.ts";
import type { DsseEnvelopeJson } from "../../../src/release/in-toto.ts";

export const TRUSTED_ROOT_MEDIA_TYPE = "application/vnd.dev.sigstore.trustedroot+json;version=0.1";
export const FULCIO_URL = "https://fulcio.sigstore.mock";
export const REKOR_URL = "https://rekor.sigstore.mock";
export const CTLOG_URL = "https://ctfe.sigstore.mock";
export const TSA_URL = "https://timestamp.sigstore.mock";

/** Fulcio's OIDC-issuer extensions: the legacy raw-string one and the DER UTF8String one. */
export const OID_ISSUER_V1 = "1.3.6.1.4.1.57264.1.1";
export const OID_ISSUER_V2 = "1.3.6.1.4.1.57264.1.8";
const FULCIO_OID_PREFIX = "1.3.6.1.4.1.57264.1.";
const OID_SCT_LIST = "1.3.6.1.4.1.11129.2.4.2";
const OID_SHA256 = "2.16.840.1.101.3.4.2.1";
const OID_TSA_POLICY = "1.3.6.1.4.1.57264.2";

const DAY_MS = 24 * 60 * 60 * 1000;
const CA_SIGNING = { name: "ECDSA", hash: "SHA-384" } as const;

export interface KeylessCertificateOptions {
  /** A URI (workflow identity) or an email address; `{ email }` / `{ uri }` forces the kind. */
  /** `{ dns }`: a name Sigstore does not read as an identity (a certificate Fulcio would not issue). */
  subjectAltName: string | { email: string } | { uri: string } | { dns: string };
  /** OIDC issuer URL, written both as 1.3.6.1.4.1.57264.1.1 (raw) and 1.3.6.1.4.1.57264.1.8 (UTF8String). */
  /** null: no issuer extension at all (a certificate Fulcio would not issue). */
  issuer: string | null;
  /**
   * More extensions by OID. Fulcio's 1.3.6.1.4.1.57264.1.1–.7 are written as raw strings (the legacy form),
   * .8 and above and any other OID as a DER UTF8String. A Buffer is taken as the raw extension value.
   */
  extensions?: Record<string, string | Buffer>;
  /** Default: now (or the instance clock) for 10 minutes, like Fulcio. */
  validity?: { notBefore: Date; notAfter: Date };
  /** The certified key; default a fresh ECDSA P-256 key. */
  key?: SigningKey;
  /** Leave out the embedded SCT. */
  withoutSct?: boolean;
}

export interface KeylessCertificate {
  certificatePem: string;
  certificateDer: Buffer;
  /** The intermediate then the root, PEM. */
  chainPem: string[];
  /** The certified key (privateKey signs, publicKeyPem is what the certificate holds). */
  key: SigningKey;
  privateKey: KeyObject;
}

/** A Rekor v1 API LogEntry value (the map value of `POST /api/v1/log/entries`). */
export interface RekorLogEntry {
  uuid: string;
  /** base64 of the canonicalized entry body. */
  body: string;
  integratedTime: number;
  /** hex sha256 of the log's DER public key. */
  logID: string;
  logIndex: number;
  verification: {
    signedEntryTimestamp: string;
    inclusionProof: { logIndex: number; treeSize: number; rootHash: string; hashes: string[]; checkpoint: string };
  };
}

/** A bundle's TransparencyLogEntry in protobuf-specs JSON form. */
export interface TlogEntryJson {
  logIndex: string;
  logId: { keyId: string };
  kindVersion: { kind: string; version: string };
  integratedTime: string;
  inclusionPromise?: { signedEntryTimestamp: string };
  inclusionProof?: { logIndex: string; rootHash: string; treeSize: string; hashes: string[]; checkpoint: { envelope: string } };
  canonicalizedBody: string;
}

export interface MockSigstore {
  /** trusted_root.json (protobuf-specs JSON form) trusting this instance's CA, log, CT log and TSA. */
  trustedRoot: Record<string, unknown>;
  fulcio: { rootPem: string; intermediatePem: string };
  rekor: { url: string; publicKey: KeyObject; publicKeyPem: string; logId: Buffer };
  tsa: { chainPem: string[] };
  issueKeylessCertificate(opts: KeylessCertificateOptions): Promise<KeylessCertificate>;
  /** hashedrekord v0.0.1 over `payload` (or a precomputed digest) signed by `signature`, verifier = key or cert PEM. */
  logHashedRekord(opts: {
    payload?: Buffer;
    digest?: { algorithm: "sha256" | "sha384" | "sha512"; hex: string };
    signature: Buffer;
    verifierPem: string;
  }): RekorLogEntry;
  /** dsse v0.0.1 (or intoto v0.0.2 with kind "intoto") for a DSSE envelope with one signature. */
  logDsse(opts: { envelope: DsseEnvelopeJson; verifierPem: string; kind?: "dsse" | "intoto" }): RekorLogEntry;
  /** Logs an arbitrary entry body (canonicalized here). */
  logEntry(body: object): RekorLogEntry;
  /** RFC 3161 TimeStampResp (DER) over sha256(bytes). */
  timestamp(bytes: Buffer): Promise<Buffer>;
  /** The instance's time: the fixed clock if one was given, else now. */
  now(): Date;
}

/** A DSSE envelope in its JSON form: the release signer's (src/release/in-toto.ts). */
export type { DsseEnvelopeJson } from "../../../src/release/in-toto.ts";

export async function createMockSigstore(opts: { clock?: Date; name?: string } = {}): Promise<MockSigstore> {
  const now = () => (opts.clock ? new Date(opts.clock.getTime()) : new Date());
  const name = opts.name ?? `mock-${randomInt(1_000_000)}`;
  // Trust starts a day before the clock so certificates issued "now" fall inside every validity window.
  const start = new Date(now().getTime() - DAY_MS);

  const ca = await createCa(name, start);
  const ctKeys = generateKeyPairSync("ec", { namedCurve: "P-256" });
  recordPrivateKey(ctKeys.privateKey, "the mock CT log's key");
  const ctlog = await initializeCTLog(ctKeys, opts.clock);
  // @sigstore/mock's TSA certificates start at the real current time, so a clock in the past fails their validity.
  // The TSA reads its clock Date on every request; timestamp() sets it to a whole second first, because the mock
  // writes genTime's fraction DER-style (".12Z") and @sigstore/core only parses three fraction digits or none.
  const tsaClock = new Date(now().getTime());
  const tsaKeys = generateKeyPairSync("ec", { namedCurve: "P-256" });
  recordPrivateKey(tsaKeys.privateKey, "the mock TSA's key");
  const tsa = await initializeTSA(tsaKeys, tsaClock);
  const tsaChain = [
    Buffer.from(tsa.intCertificate.buffer, tsa.intCertificate.byteOffset, tsa.intCertificate.byteLength),
    Buffer.from(tsa.rootCertificate.buffer, tsa.rootCertificate.byteOffset, tsa.rootCertificate.byteLength),
  ];
  const log = createLog(REKOR_URL, now);

  const b64 = (bytes: Buffer) => bytes.toString("base64");
  const trustedRoot = {
    mediaType: TRUSTED_ROOT_MEDIA_TYPE,
    tlogs: [
      {
        baseUrl: REKOR_URL,
        hashAlgorithm: "SHA2_256",
        publicKey: { rawBytes: b64(log.publicKeyDer), keyDetails: "PKIX_ECDSA_P256_SHA_256", validFor: { start: start.toISOString() } },
        logId: { keyId: b64(log.logId) },
      },
    ],
    certificateAuthorities: [
      {
        subject: { organization: "sigstore.mock", commonName: `${name} fulcio` },
        uri: FULCIO_URL,
        certChain: { certificates: [{ rawBytes: b64(ca.intermediateDer) }, { rawBytes: b64(ca.rootDer) }] },
        validFor: { start: start.toISOString() },
      },
    ],
    ctlogs: [
      {
        baseUrl: CTLOG_URL,
        hashAlgorithm: "SHA2_256",
        publicKey: { rawBytes: b64(ctlog.publicKey), keyDetails: "PKIX_ECDSA_P256_SHA_256", validFor: { start: start.toISOString() } },
        logId: { keyId: b64(Buffer.from(ctlog.logID.buffer, ctlog.logID.byteOffset, ctlog.logID.byteLength)) },
      },
    ],
    timestampAuthorities: [
      {
        subject: { organization: "sigstore.mock", commonName: `${name} tsa` },
        uri: TSA_URL,
        certChain: { certificates: tsaChain.map((der) => ({ rawBytes: b64(der) })) },
        validFor: { start: start.toISOString() },
      },
    ],
  };

  const issueKeylessCertificate = async (certOpts: KeylessCertificateOptions): Promise<KeylessCertificate> => {
    const key = certOpts.key ?? generateSigningKey("ecdsa-p256");
    const publicKey = await importPublicKey(key);
    const issued = now();
    // X.509 times have whole seconds; rounding down keeps a log entry made in the same second inside the validity.
    const notBefore = certOpts.validity?.notBefore ?? new Date(Math.floor(issued.getTime() / 1000) * 1000);
    const notAfter = certOpts.validity?.notAfter ?? new Date(notBefore.getTime() + 10 * 60 * 1000);
    const extensions: x509.Extension[] = [
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.codeSigning], false),
      // Fulcio certificates have an empty subject, so the SAN extension is critical (RFC 5280 4.2.1.6).
      new x509.SubjectAlternativeNameExtension([sanName(certOpts.subjectAltName)], true),
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
      new x509.AuthorityKeyIdentifierExtension(ca.intermediateKeyId),
    ];
    if (certOpts.issuer !== null)
      extensions.push(
        new x509.Extension(OID_ISSUER_V1, false, bytes(Buffer.from(certOpts.issuer, "utf8"))),
        new x509.Extension(OID_ISSUER_V2, false, bytes(utf8String(certOpts.issuer))),
      );
    for (const [oid, value] of Object.entries(certOpts.extensions ?? {})) {
      extensions.push(new x509.Extension(oid, false, bytes(extensionValue(oid, value))));
    }
    const serialNumber = createHash("sha256")
      .update(`${name}:${issued.getTime()}:${randomInt(1 << 30)}`)
      .digest("hex")
      .slice(0, 30);
    const template = {
      serialNumber: `01${serialNumber}`,
      subject: "",
      issuer: ca.intermediateSubject,
      notBefore,
      notAfter,
      publicKey,
      signingKey: ca.intermediateKeys.privateKey,
      signingAlgorithm: CA_SIGNING,
    };
    if (certOpts.withoutSct !== true) {
      // The CT log signs the TBS as it will be once the SCT list extension is removed again (RFC 6962 3.2).
      const precert = await x509.X509CertificateGenerator.create({ ...template, extensions });
      const sct = Buffer.from(await ctlog.log(precert.rawData, ca.intermediateSpkiHash.buffer.slice(0) as ArrayBuffer));
      extensions.push(new x509.Extension(OID_SCT_LIST, false, bytes(octetString(sctList([sct])))));
    }
    const cert = await x509.X509CertificateGenerator.create({ ...template, extensions });
    const certificateDer = Buffer.from(cert.rawData);
    return {
      certificatePem: cert.toString("pem") + "\n",
      certificateDer,
      chainPem: [ca.intermediatePem, ca.rootPem],
      key,
      privateKey: key.privateKey,
    };
  };

  const logHashedRekord: MockSigstore["logHashedRekord"] = (entry) => {
    const digest = entry.digest ?? {
      algorithm: "sha256" as const,
      hex: createHash("sha256")
        .update(entry.payload ?? Buffer.alloc(0))
        .digest("hex"),
    };
    if (entry.digest === undefined && entry.payload === undefined) throw new Error("logHashedRekord needs payload or digest");
    return log.append({
      apiVersion: "0.0.1",
      kind: "hashedrekord",
      spec: {
        data: { hash: { algorithm: digest.algorithm, value: digest.hex } },
        signature: { content: entry.signature.toString("base64"), publicKey: { content: Buffer.from(entry.verifierPem).toString("base64") } },
      },
    });
  };

  const logDsse: MockSigstore["logDsse"] = ({ envelope, verifierPem, kind = "dsse" }) => {
    if (envelope.signatures.length !== 1) throw new Error("logDsse: the mock logs envelopes with exactly one signature");
    const signature = envelope.signatures[0]!;
    const payloadHash = createHash("sha256").update(Buffer.from(envelope.payload, "base64")).digest("hex");
    const envelopeHash = createHash("sha256").update(json.canonicalize(envelope)).digest("hex");
    const verifier = Buffer.from(verifierPem).toString("base64");
    if (kind === "intoto") {
      // intoto v0.0.2 stores the envelope without its payload, and each signature base64-encoded once more.
      return log.append({
        apiVersion: "0.0.2",
        kind: "intoto",
        spec: {
          content: {
            envelope: { payloadType: envelope.payloadType, signatures: [{ sig: Buffer.from(signature.sig).toString("base64"), publicKey: verifier }] },
            hash: { algorithm: "sha256", value: envelopeHash },
            payloadHash: { algorithm: "sha256", value: payloadHash },
          },
        },
      });
    }
    return log.append({
      apiVersion: "0.0.1",
      kind: "dsse",
      spec: {
        envelopeHash: { algorithm: "sha256", value: envelopeHash },
        payloadHash: { algorithm: "sha256", value: payloadHash },
        signatures: [{ signature: signature.sig, verifier }],
      },
    });
  };

  const timestamp = async (bytes: Buffer): Promise<Buffer> => {
    tsaClock.setTime(Math.floor(now().getTime() / 1000) * 1000);
    const response = await tsa.timestamp({
      artifactHash: createHash("sha256").update(bytes).digest(),
      hashAlgorithmOID: OID_SHA256,
      nonce: randomInt(1, 2 ** 31 - 1),
      policyOID: OID_TSA_POLICY,
      certReq: true,
    });
    return Buffer.from(response.buffer, response.byteOffset, response.byteLength);
  };

  return {
    trustedRoot,
    fulcio: { rootPem: ca.rootPem, intermediatePem: ca.intermediatePem },
    rekor: { url: REKOR_URL, publicKey: log.publicKey, publicKeyPem: log.publicKey.export({ format: "pem", type: "spki" }).toString(), logId: log.logId },
    tsa: { chainPem: tsaChain.map((der) => new x509.X509Certificate(der).toString("pem") + "\n") },
    issueKeylessCertificate,
    logHashedRekord,
    logDsse,
    logEntry: (body) => log.append(body),
    timestamp,
    now,
  };
}

/** A Rekor LogEntry as a bundle TransparencyLogEntry (JSON form); kind and version come from the body. */
export function rekorEntryToTlogEntry(entry: RekorLogEntry, opts: { inclusionPromise?: boolean; inclusionProof?: boolean } = {}): TlogEntryJson {
  const body = JSON.parse(Buffer.from(entry.body, "base64").toString("utf8")) as { kind: string; apiVersion: string };
  const proof = entry.verification.inclusionProof;
  return {
    logIndex: String(entry.logIndex),
    logId: { keyId: Buffer.from(entry.logID, "hex").toString("base64") },
    kindVersion: { kind: body.kind, version: body.apiVersion },
    integratedTime: String(entry.integratedTime),
    ...(opts.inclusionPromise !== false ? { inclusionPromise: { signedEntryTimestamp: entry.verification.signedEntryTimestamp } } : {}),
    ...(opts.inclusionProof !== false
      ? {
          inclusionProof: {
            logIndex: String(proof.logIndex),
            rootHash: Buffer.from(proof.rootHash, "hex").toString("base64"),
            treeSize: String(proof.treeSize),
            hashes: proof.hashes.map((hash) => Buffer.from(hash, "hex").toString("base64")),
            checkpoint: { envelope: proof.checkpoint },
          },
        }
      : {}),
    canonicalizedBody: entry.body,
  };
}

// ---------------------------------------------------------------------------------------------
// CA

interface Ca {
  rootPem: string;
  rootDer: Buffer;
  intermediatePem: string;
  intermediateDer: Buffer;
  intermediateSubject: string;
  intermediateKeys: CryptoKeyPair;
  intermediateKeyId: string;
  /** sha256 of the intermediate's DER SPKI: the CT "issuer key hash". */
  intermediateSpkiHash: Uint8Array;
}

async function createCa(name: string, start: Date): Promise<Ca> {
  const algorithm = { name: "ECDSA", namedCurve: "P-384" };
  const rootKeys = (await subtle.generateKey(algorithm, true, ["sign", "verify"])) as CryptoKeyPair;
  const intermediateKeys = (await subtle.generateKey(algorithm, true, ["sign", "verify"])) as CryptoKeyPair;
  recordPrivateKey(NodeKeyObject.from(rootKeys.privateKey), "the mock Fulcio root key");
  recordPrivateKey(NodeKeyObject.from(intermediateKeys.privateKey), "the mock Fulcio intermediate key");
  const notAfter = new Date(start.getTime() + 10 * 365 * DAY_MS);
  const rootSubject = `CN=${name} root, O=sigstore.mock`;
  const intermediateSubject = `CN=${name} intermediate, O=sigstore.mock`;
  const rootSki = await x509.SubjectKeyIdentifierExtension.create(rootKeys.publicKey);
  const root = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: rootSubject,
    notBefore: start,
    notAfter,
    keys: rootKeys,
    signingAlgorithm: CA_SIGNING,
    extensions: [
      new x509.BasicConstraintsExtension(true, 1, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      rootSki,
    ],
  });
  const intermediateSki = await x509.SubjectKeyIdentifierExtension.create(intermediateKeys.publicKey);
  const intermediate = await x509.X509CertificateGenerator.create({
    serialNumber: "02",
    subject: intermediateSubject,
    issuer: root.subject,
    notBefore: start,
    notAfter,
    publicKey: intermediateKeys.publicKey,
    signingKey: rootKeys.privateKey,
    signingAlgorithm: CA_SIGNING,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.codeSigning], false),
      intermediateSki,
      new x509.AuthorityKeyIdentifierExtension(rootSki.keyId),
    ],
  });
  const spki = new Uint8Array(await subtle.exportKey("spki", intermediateKeys.publicKey));
  return {
    rootPem: root.toString("pem") + "\n",
    rootDer: Buffer.from(root.rawData),
    intermediatePem: intermediate.toString("pem") + "\n",
    intermediateDer: Buffer.from(intermediate.rawData),
    intermediateSubject: intermediate.subject,
    intermediateKeys,
    intermediateKeyId: intermediateSki.keyId,
    intermediateSpkiHash: new Uint8Array(createHash("sha256").update(spki).digest()),
  };
}

async function importPublicKey(key: SigningKey): Promise<CryptoKey> {
  const der = bytes(key.publicKeyDer);
  const details = key.publicKey.asymmetricKeyDetails;
  switch (key.publicKey.asymmetricKeyType) {
    case "ec": {
      const curves: Record<string, string> = { prime256v1: "P-256", secp384r1: "P-384", secp521r1: "P-521" };
      return subtle.importKey("spki", der, { name: "ECDSA", namedCurve: curves[details?.namedCurve ?? ""] ?? "P-256" }, true, ["verify"]);
    }
    case "rsa":
      return subtle.importKey("spki", der, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, true, ["verify"]);
    case "ed25519":
      return subtle.importKey("spki", der, { name: "Ed25519" }, true, ["verify"]);
    default:
      throw new Error(`cannot certify a ${key.publicKey.asymmetricKeyType} key`);
  }
}

function sanName(san: KeylessCertificateOptions["subjectAltName"]): x509.JsonGeneralName {
  if (typeof san !== "string") {
    if ("dns" in san) return { type: "dns", value: san.dns };
    return "email" in san ? { type: "email", value: san.email } : { type: "url", value: san.uri };
  }
  return !san.includes("://") && san.includes("@") ? { type: "email", value: san } : { type: "url", value: san };
}

function extensionValue(oid: string, value: string | Buffer): Buffer {
  if (Buffer.isBuffer(value)) return value;
  if (oid.startsWith(FULCIO_OID_PREFIX)) {
    const arc = Number(oid.slice(FULCIO_OID_PREFIX.length));
    // Fulcio's first extensions (.1–.7) hold the bare string; later ones (.8+) a DER UTF8String.
    if (Number.isInteger(arc) && arc <= 7) return Buffer.from(value, "utf8");
  }
  return utf8String(value);
}

// ---------------------------------------------------------------------------------------------
// Minimal DER

/** A copy on its own ArrayBuffer, which WebCrypto's BufferSource type wants. */
function bytes(buffer: Buffer): Uint8Array<ArrayBuffer> {
  return new Uint8Array(buffer);
}

function derLength(length: number): Buffer {
  if (length < 0x80) return Buffer.from([length]);
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function utf8String(value: string): Buffer {
  const content = Buffer.from(value, "utf8");
  return Buffer.concat([Buffer.from([0x0c]), derLength(content.length), content]);
}

function octetString(content: Buffer): Buffer {
  return Buffer.concat([Buffer.from([0x04]), derLength(content.length), content]);
}

/** RFC 6962 SignedCertificateTimestampList: u16 total length, then each SCT with its own u16 length. */
function sctList(scts: Buffer[]): Buffer {
  const items = scts.map((sct) => {
    // @sigstore/mock's SCTs already carry their u16 length prefix (pkijs' toStream); strip it to re-frame uniformly.
    const bare = sct.length >= 2 && sct.readUInt16BE(0) === sct.length - 2 ? sct.subarray(2) : sct;
    const length = Buffer.alloc(2);
    length.writeUInt16BE(bare.length);
    return Buffer.concat([length, bare]);
  });
  const body = Buffer.concat(items);
  const total = Buffer.alloc(2);
  total.writeUInt16BE(body.length);
  return Buffer.concat([total, body]);
}

// ---------------------------------------------------------------------------------------------
// Transparency log (Rekor v1 API shapes, RFC 6962 tree)

interface Log {
  publicKey: KeyObject;
  publicKeyDer: Buffer;
  logId: Buffer;
  append(body: object): RekorLogEntry;
}

function createLog(url: string, now: () => Date): Log {
  const keys = generateKeyPairSync("ec", { namedCurve: "P-256" });
  recordPrivateKey(keys.privateKey, "the mock Rekor's key");
  const publicKeyDer = keys.publicKey.export({ format: "der", type: "spki" });
  const logId = createHash("sha256").update(publicKeyDer).digest();
  const origin = new URL(url).host;
  const treeId = randomInt(2 ** 47);
  const leaves: Buffer[] = [];

  const append = (bodyObject: object): RekorLogEntry => {
    const body = Buffer.from(json.canonicalize(bodyObject), "utf8");
    const logIndex = leaves.length;
    leaves.push(leafHash(body));
    const integratedTime = Math.floor(now().getTime() / 1000);
    // The SET signs the canonical JSON of exactly these four fields (Rekor's VerificationPayload).
    const setPayload = { body: body.toString("base64"), integratedTime, logIndex, logID: logId.toString("hex") };
    const signedEntryTimestamp = sign("sha256", Buffer.from(json.canonicalize(setPayload), "utf8"), keys.privateKey).toString("base64");
    const treeSize = leaves.length;
    const rootHash = merkleRoot(leaves);
    const note = `${origin} - ${treeId}\n${treeSize}\n${rootHash.toString("base64")}\nTimestamp: ${BigInt(integratedTime) * 1_000_000_000n}\n`;
    // A signed note: the note, a blank line, then "— <name> base64(4-byte key hint || signature)".
    const noteSignature = sign("sha256", Buffer.from(note, "utf8"), keys.privateKey);
    const checkpoint = `${note}\n\u2014 ${origin} ${Buffer.concat([logId.subarray(0, 4), noteSignature]).toString("base64")}\n`;
    return {
      uuid: leafHash(body).toString("hex"),
      body: body.toString("base64"),
      integratedTime,
      logID: logId.toString("hex"),
      logIndex,
      verification: {
        signedEntryTimestamp,
        inclusionProof: {
          logIndex,
          treeSize,
          rootHash: rootHash.toString("hex"),
          hashes: inclusionPath(logIndex, leaves).map((hash) => hash.toString("hex")),
          checkpoint,
        },
      },
    };
  };
  return { publicKey: keys.publicKey, publicKeyDer, logId, append };
}

function leafHash(data: Buffer): Buffer {
  return createHash("sha256")
    .update(Buffer.from([0x00]))
    .update(data)
    .digest();
}

function nodeHash(left: Buffer, right: Buffer): Buffer {
  return createHash("sha256")
    .update(Buffer.from([0x01]))
    .update(left)
    .update(right)
    .digest();
}

/** The largest power of two smaller than n (n > 1). */
function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** RFC 6962 2.1 MTH over leaf hashes. */
function merkleRoot(leaves: Buffer[]): Buffer {
  if (leaves.length === 0) return createHash("sha256").digest();
  if (leaves.length === 1) return leaves[0]!;
  const k = split(leaves.length);
  return nodeHash(merkleRoot(leaves.slice(0, k)), merkleRoot(leaves.slice(k)));
}

/** RFC 6962 2.1.1 PATH(m, D[n]), leaf to root. */
function inclusionPath(m: number, leaves: Buffer[]): Buffer[] {
  if (leaves.length <= 1) return [];
  const k = split(leaves.length);
  if (m < k) return [...inclusionPath(m, leaves.slice(0, k)), merkleRoot(leaves.slice(k))];
  return [...inclusionPath(m - k, leaves.slice(k)), merkleRoot(leaves.slice(0, k))];
}
