// Who is calling: a kube-apiserver presenting a client certificate issued by the CA given with --client-ca, or a
// bearer token listed in the --caller-tokens file. With either configured, a caller that presents nothing is
// refused unless --allow-unauthenticated says otherwise; presented credentials that do not check out are always
// refused (a wrong token is not the same as no token). With neither configured, every caller is let in and
// marked unauthenticated: the local, single-cluster setup. The CA and the tokens may be replaced while serving
// (`serve` rereads their files): a CA or token rotation needs no restart.
import { X509Certificate } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { PeerCertificate, TLSSocket } from "node:tls";
import { UNAUTHENTICATED, type Caller } from "../audit/caller.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { tokenDigest, type CallerTokens } from "./caller-tokens.ts";

export interface CallerCredentials {
  /** PEM of the CA whose client certificates are accepted; TLS then asks callers for one. */
  clientCaPem?: string;
  tokens?: CallerTokens;
}

export interface CallerAuthOptions extends CallerCredentials {
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

export type Authentication = { ok: true; caller: Caller } | { ok: false; reason: string };

export class CallerAuthenticator {
  private caPem: string | undefined;
  private tokens: CallerTokens | undefined;
  private readonly allowUnauthenticated: boolean;
  private readonly clientCaListeners = new Set<(pem: string) => void>();

  constructor(opts: CallerAuthOptions = {}) {
    this.caPem = opts.clientCaPem;
    this.tokens = opts.tokens;
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
    if (next.tokens !== undefined && this.tokens !== undefined) this.tokens = next.tokens;
    if (next.clientCaPem !== undefined && this.caPem !== undefined && next.clientCaPem !== this.caPem) {
      this.caPem = next.clientCaPem;
      for (const listener of this.clientCaListeners) listener(next.clientCaPem);
    }
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
    const byCertificate = this.clientCaPem === undefined ? undefined : certificateCaller(req.socket as TLSSocket);
    if (byCertificate && !byCertificate.ok) return byCertificate;
    const byToken = this.tokens === undefined ? undefined : this.tokenCaller(req.headers.authorization);
    if (byToken && !byToken.ok) return byToken;
    // Both valid: the certificate names the caller (it is bound to the TLS session).
    const found = byCertificate ?? byToken;
    if (found) return found;
    if (this.allowUnauthenticated) return { ok: true, caller: UNAUTHENTICATED };
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
    const known = this.tokens!.get(tokenDigest(match[1]!));
    if (!known) return { ok: false, reason: "the bearer token is not one of the caller tokens" };
    return { ok: true, caller: { authentication: "token", name: known.name, cluster: known.cluster } };
  }
}

/**
 * Undefined when the caller presented no certificate. The certificate's subject names the caller: its common
 * name (CN) is the caller's name, its first organization (O) the cluster (the CN when it has none).
 */
function certificateCaller(socket: TLSSocket): Authentication | undefined {
  const cert: PeerCertificate | undefined = typeof socket.getPeerCertificate === "function" ? socket.getPeerCertificate() : undefined;
  if (!cert || Object.keys(cert).length === 0) return undefined;
  if (!socket.authorized)
    return { ok: false, reason: `the client certificate is not accepted: ${String(socket.authorizationError ?? "not issued by the client CA")}` };
  const name = first(cert.subject?.CN);
  if (!name) return { ok: false, reason: "the client certificate has no common name (CN) to name the caller" };
  return { ok: true, caller: { authentication: "client-certificate", name, cluster: first(cert.subject?.O) ?? name } };
}

/** Node gives a repeated subject attribute as an array. */
function first(value: string | string[] | undefined): string | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  return v === undefined || v === "" ? undefined : v;
}
