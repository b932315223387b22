// The serving certificate from `serve --tls-cert FILE --tls-key FILE` (a cert-manager Secret mounted in the pod,
// for one): checked as a pair when it is read at start and each time the files change, so a broken pair is named
// in the log and the one in use stays.
import { createPrivateKey, X509Certificate, type KeyObject } from "node:crypto";
import { createSecureContext } from "node:tls";
import type { Logger } from "pino";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { WatchedFiles } from "../fs/file-reload.ts";

/** A certificate and key read from files: the serving pair here, the state folder's CA (tls-bootstrap.ts). */
export type CertificateFilesErrorCode = "not-a-certificate" | "not-a-key" | "key-mismatch" | "unusable" | "missing-key" | "not-a-ca";

export class CertificateFilesError extends ImprimaturError<CertificateFilesErrorCode> {}

export interface ServingPair {
  cert: string;
  key: string;
}

/** The pair as TLS will use it; throws CertificateFilesError naming the file at fault. */
export function servingPair(certPem: string, keyPem: string, files: { cert: string; key: string }): ServingPair {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch (e) {
    throw new CertificateFilesError("not-a-certificate", `${files.cert} holds no PEM certificate (${(e as Error).message})`, { cause: e });
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(keyPem);
  } catch (e) {
    throw new CertificateFilesError("not-a-key", `${files.key} holds no PEM private key (${(e as Error).message})`, { cause: e });
  }
  if (!cert.checkPrivateKey(key)) throw new CertificateFilesError("key-mismatch", `${files.key} is not the key of the certificate in ${files.cert}`);
  try {
    // The whole file as TLS reads it (a chain after the leaf, for one).
    createSecureContext({ cert: certPem, key: keyPem });
  } catch (e) {
    throw new CertificateFilesError("unusable", `${files.cert} and ${files.key} are not usable for TLS (${(e as Error).message})`, { cause: e });
  }
  return { cert: certPem, key: keyPem };
}

/** Reads the pair and keeps reading it: `subscribe` hands each new good pair to the HTTPS server (TlsUpdates). */
export function watchCertificateFiles(files: { cert: string; key: string }, logger: Logger): Promise<WatchedFiles<ServingPair>> {
  return WatchedFiles.start({
    files: [files.cert, files.key],
    what: "serving certificate",
    parse: ([cert, key]) => servingPair(cert!, key!, files),
    logger,
  });
}
