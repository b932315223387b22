// Who is calling: a kube-apiserver presenting a client certificate issued by the CA given with --client-ca, or a
// bearer token listed in the --caller-tokens file. With either configured, a caller that presents nothing is
// refused unless --allow-unauthenticated says otherwise; presented credentials that do not check out are always
// refused (a wrong token is not the same as no token). With neither configured, every caller is let in and
// marked unauthenticated: the local, single-cluster setup. The CA and the tokens may be replaced while serving
// (`serve` rereads their files): a CA or token rotation needs no restart.
//
// A client CA often issues more than webhook callers' certificates (a cluster CA signs every kubelet's), so the
// callers it may name are listed (--client-ca-allowed-names, matched against the subject CN as kube-apiserver's
// --requestheader-allowed-names is); only a CA dedicated to the callers may go without the list.
// Credentials are checked on every request, the TLS session's too: a certificate verified at the handshake by a
// CA since removed from the file no longer names a caller on a connection kept alive.
import { X509Certificate } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { DetailedPeerCertificate, TLSSocket } from "node:tls";
import { UNAUTHENTICATED, type Caller } from "../audit/caller.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { tokenDigest, type CallerTokens } from "./caller-tokens.ts";

export interface CallerCredentials {
  /** PEM of the CA whose client certificates are accepted; TLS then asks callers for one. */
  clientCaPem?: string;
  tokens?: CallerTokens;
}

export interface CallerAuthOptions extends CallerCredentials {
  /** The common names (CN) a client certificate may carry; undefined: any (a CA that issues callers' certificates only). */
  allowedNames?: readonly string[];
  /** With a CA or tokens configured: still let in callers that present no credentials (marked unauthenticated). */
  allowUnauthenticated?: boolean;
  /** Later CAs and tokens (their files changed): each replaces the one configured at start. */
  updates?: CallerUpdates;
}

export interface CallerUpdates {
  /** Calls `listener` with each new CA or token set; returns the unsubscribe. */
  subscribe(listener: (next: CallerCredentials) => void): () => void;
}

export class ClientCaError extends ImprimaturError<"no-certificate" | "bad-certificate"> {}

/**
 * The CA bundle of a --client-ca file: one or more PEM certificates (two during a CA rotation). A block that does
 * not parse is named by its line.
 */
export function parseClientCa(pem: string, file: string): string {
  const blocks = [...pem.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]*?(-----END CERTIFICATE-----|$)/g)];
  if (blocks.length === 0) throw new ClientCaError("no-certificate", `${file} holds no PEM certificate`);
  for (const block of blocks) {
    try {
      new X509Certificate(block[0]);
    } catch (e) {
      const line = pem.slice(0, block.index).split("\n").length;
      throw new ClientCaError("bad-certificate", `${file}:${line}: not a readable certificate (${(e as Error).message})`, { cause: e });
    }
  }
  return pem;
}

/** What a caller authenticated with, to tell later whether it still holds (its CA or token may be removed). */
export type PresentedCredential = { kind: "client-certificate"; caFingerprint: string } | { kind: "token"; digest: string };

export type Authentication = { ok: true; caller: Caller; presented: readonly PresentedCredential[] } | { ok: false; reason: string };

/** The SHA-256 fingerprints of the certificates of a --client-ca bundle, in Node's notation (AB:CD:…). */
function fingerprints(pem: string): ReadonlySet<string> {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return new Set(blocks.map((block) => new X509Certificate(block).fingerprint256));
}

export class CallerAuthenticator {
  private caPem: string | undefined;
  private caFingerprints: ReadonlySet<string>;
  private tokens: CallerTokens | undefined;
  private readonly allowedNames: ReadonlySet<string> | undefined;
  private readonly allowUnauthenticated: boolean;
  private readonly clientCaListeners = new Set<(pem: string) => void>();
  private readonly changeListeners = new Set<() => void>();

  constructor(opts: CallerAuthOptions = {}) {
    this.caPem = opts.clientCaPem;
    this.caFingerprints = fingerprints(opts.clientCaPem ?? "");
    this.tokens = opts.tokens;
    this.allowedNames = opts.allowedNames === undefined ? undefined : new Set(opts.allowedNames);
    this.allowUnauthenticated = opts.allowUnauthenticated === true || (opts.clientCaPem === undefined && opts.tokens === undefined);
    opts.updates?.subscribe((next) => this.replace(next));
  }

  /** The CA whose client certificates are accepted now. */
  get clientCaPem(): string | undefined {
    return this.caPem;
  }

  /**
   * Replaces the CA or the tokens. Only what was configured at start is replaced: a server started without a CA
   * does not begin to ask for client certificates.
   */
  replace(next: CallerCredentials): void {
    let changed = false;
    if (next.tokens !== undefined && this.tokens !== undefined && next.tokens !== this.tokens) {
      this.tokens = next.tokens;
      changed = true;
    }
    if (next.clientCaPem !== undefined && this.caPem !== undefined && next.clientCaPem !== this.caPem) {
      this.caPem = next.clientCaPem;
      this.caFingerprints = fingerprints(next.clientCaPem);
      for (const listener of this.clientCaListeners) listener(next.clientCaPem);
      changed = true;
    }
    if (changed) for (const listener of this.changeListeners) listener();
  }

  /** Calls `listener` after each new CA or token set (connections made with removed credentials are closed then); returns the unsubscribe. */
  onChange(listener: () => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  /** Whether every credential a caller authenticated with is still configured: its certificate's CA, its token. */
  holds(presented: readonly PresentedCredential[]): boolean {
    return presented.every((p) => (p.kind === "token" ? this.tokens?.has(p.digest) === true : this.caFingerprints.has(p.caFingerprint)));
  }

  /** Calls `listener` with each new client CA (the HTTPS server checks new connections against it); returns the unsubscribe. */
  onClientCaChange(listener: (pem: string) => void): () => void {
    this.clientCaListeners.add(listener);
    return () => this.clientCaListeners.delete(listener);
  }

  /** Whether callers must authenticate (a CA or tokens are configured, and unauthenticated callers are not allowed). */
  get required(): boolean {
    return !this.allowUnauthenticated;
  }

  /** Decided from the TLS session and the headers only: the body is not read for a refused caller. */
  authenticate(req: IncomingMessage): Authentication {
    const byCertificate = this.clientCaPem === undefined ? undefined : this.certificateCaller(req.socket as TLSSocket);
    if (byCertificate && !byCertificate.ok) return byCertificate;
    const byToken = this.tokens === undefined ? undefined : this.tokenCaller(req.headers.authorization);
    if (byToken && !byToken.ok) return byToken;
    // Both valid: the certificate names the caller (it is bound to the TLS session); both must go on holding.
    if (byCertificate && byToken) return { ...byCertificate, presented: [...byCertificate.presented, ...byToken.presented] };
    const found = byCertificate ?? byToken;
    if (found) return found;
    if (this.allowUnauthenticated) return { ok: true, caller: UNAUTHENTICATED, presented: [] };
    return { ok: false, reason: `no credentials: present a ${this.expected()}` };
  }

  private expected(): string {
    const ways = [this.clientCaPem !== undefined ? "client certificate" : "", this.tokens !== undefined ? "bearer token" : ""];
    return ways.filter(Boolean).join(" or ");
  }

  /** Undefined when no bearer token is presented. */
  private tokenCaller(header: string | undefined): Authentication | undefined {
    if (header === undefined) return undefined;
    const match = /^Bearer +(\S+) *$/i.exec(header);
    if (!match) return { ok: false, reason: "the Authorization header is not a bearer token" };
    // A map lookup by digest: the time it takes says nothing about how close a wrong token came.
    const digest = tokenDigest(match[1]!);
    const known = this.tokens!.get(digest);
    if (!known) return { ok: false, reason: "the bearer token is not one of the caller tokens" };
    return { ok: true, caller: { authentication: "token", name: known.name, cluster: known.cluster }, presented: [{ kind: "token", digest }] };
  }

  /**
   * Undefined when the caller presented no certificate. The certificate's subject names the caller: its common
   * name (CN) is the caller's name, its first organization (O) the cluster (the CN when it has none).
   */
  private certificateCaller(socket: TLSSocket): Authentication | undefined {
    // With the issuers: TLS verified the chain up to a certificate of the client CA bundle of the handshake.
    const cert: DetailedPeerCertificate | undefined = typeof socket.getPeerCertificate === "function" ? socket.getPeerCertificate(true) : undefined;
    if (!cert || Object.keys(cert).length === 0) return undefined;
    if (!socket.authorized)
      return { ok: false, reason: `the client certificate is not accepted: ${String(socket.authorizationError ?? "not issued by the client CA")}` };
    const caFingerprint = anchorOf(cert).fingerprint256;
    if (!this.caFingerprints.has(caFingerprint)) return { ok: false, reason: "the client certificate's CA is no longer one of the client CAs" };
    const name = first(cert.subject?.CN);
    if (!name) return { ok: false, reason: "the client certificate has no common name (CN) to name the caller" };
    if (this.allowedNames && !this.allowedNames.has(name))
      return { ok: false, reason: `the client certificate's common name ${JSON.stringify(name)} is not one of the allowed caller names` };
    return {
      ok: true,
      caller: { authentication: "client-certificate", name, cluster: first(cert.subject?.O) ?? name },
      presented: [{ kind: "client-certificate", caFingerprint }],
    };
  }
}

/** The last certificate of a verified chain: the one of the client CA bundle the chain was verified against. */
function anchorOf(cert: DetailedPeerCertificate): DetailedPeerCertificate {
  let top = cert;
  // Node ends the chain with a certificate that is its own issuer; the bound guards against a cycle.
  for (let depth = 0; depth < 16 && top.issuerCertificate && top.issuerCertificate !== top; depth++) top = top.issuerCertificate;
  return top;
}

/** Node gives a repeated subject attribute as an array. */
function first(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  return v === undefined || v === "" ? undefined : v;
}
