// OCSP responses and CRLs over HTTP for notary entries that check revocation (src/notation/notation-revocation.ts
// judges the bytes). The URLs come from certificates of chains that ended in a trusted store, and are reached the way
// registries are: through the same guarded connections (local addresses refused unless the host is listed with
// allowLocalAddresses in the registries file: a certificate must not aim the server at its own machine or the
// cloud's metadata service), with the Notary Project's timeouts (OCSP 2 s, CRL 5 s per URL), bounded sizes, no
// redirects, and each connection closed after its answer. Answers are kept briefly (OCSP a minute, a CRL five), and
// concurrent asks for one URL share one request: one signing chain serves many images.
import { request } from "undici";
import type { RevocationFetcher } from "../notation/notation-revocation.ts";
import { EndpointAgents } from "../registry/endpoint-agents.ts";
import { InFlight } from "../registry/in-flight.ts";
import { hostOf, type RegistrySettingsMap } from "../registry/registry-settings.ts";

export interface RevocationFetcherOptions {
  /** The registries file's settings: which hosts may be on local addresses, and their CAs. */
  registries?: RegistrySettingsMap;
  ocspTimeoutMs?: number;
  crlTimeoutMs?: number;
  maxOcspBytes?: number;
  maxCrlBytes?: number;
}

const OCSP_TIMEOUT_MS = 2_000;
const CRL_TIMEOUT_MS = 5_000;
const MAX_OCSP_BYTES = 64 * 1024;
const MAX_CRL_BYTES = 16 * 1024 * 1024;

export class HttpRevocationFetcher implements RevocationFetcher {
  readonly #agents: EndpointAgents;
  readonly #options: Required<Omit<RevocationFetcherOptions, "registries">>;
  readonly #ocsp = new InFlight<Uint8Array>({ ttlMs: 60_000 });
  readonly #crl = new InFlight<Uint8Array>({ ttlMs: 300_000 });

  constructor(options: RevocationFetcherOptions = {}) {
    this.#options = {
      ocspTimeoutMs: options.ocspTimeoutMs ?? OCSP_TIMEOUT_MS,
      crlTimeoutMs: options.crlTimeoutMs ?? CRL_TIMEOUT_MS,
      maxOcspBytes: options.maxOcspBytes ?? MAX_OCSP_BYTES,
      maxCrlBytes: options.maxCrlBytes ?? MAX_CRL_BYTES,
    };
    this.#agents = new EndpointAgents(options.registries ?? new Map(), { connectTimeoutMs: this.#options.ocspTimeoutMs });
  }

  ocsp(url: string, ocspRequest: Uint8Array): Promise<Uint8Array> {
    const key = `${url}\u0000${Buffer.from(ocspRequest).toString("base64")}`;
    return this.#ocsp.run(key, () =>
      this.#fetch(url, {
        method: "POST",
        body: ocspRequest,
        contentType: "application/ocsp-request",
        accept: "application/ocsp-response",
        timeoutMs: this.#options.ocspTimeoutMs,
        maxBytes: this.#options.maxOcspBytes,
      }),
    );
  }

  crl(url: string): Promise<Uint8Array> {
    return this.#crl.run(url, () => this.#fetch(url, { method: "GET", timeoutMs: this.#options.crlTimeoutMs, maxBytes: this.#options.maxCrlBytes }));
  }

  close(): Promise<void> {
    return this.#agents.close();
  }

  async #fetch(
    url: string,
    how: { method: "GET" | "POST"; body?: Uint8Array; contentType?: string; accept?: string; timeoutMs: number; maxBytes: number },
  ): Promise<Uint8Array> {
    const target = new URL(url);
    if (target.protocol !== "http:" && target.protocol !== "https:") throw new Error(`not an HTTP URL`);
    const headers: Record<string, string> = {};
    if (how.contentType) headers["content-type"] = how.contentType;
    if (how.accept) headers.accept = how.accept;
    const signal = AbortSignal.timeout(how.timeoutMs);
    try {
      const answer = await request(target, {
        method: how.method,
        headers,
        body: how.body ? Buffer.from(how.body) : null,
        signal,
        reset: true,
        dispatcher: this.#agents.forHost(hostOf(target)),
      });
      if (answer.statusCode < 200 || answer.statusCode > 299) {
        await answer.body.dump();
        throw new Error(`HTTP ${answer.statusCode}`);
      }
      const declared = Number(answer.headers["content-length"] ?? NaN);
      if (declared > how.maxBytes) {
        await answer.body.dump();
        throw new Error(`the answer is ${declared} bytes, more than the ${how.maxBytes} allowed`);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of answer.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > how.maxBytes) {
          answer.body.destroy();
          throw new Error(`the answer is more than the ${how.maxBytes} bytes allowed`);
        }
        chunks.push(chunk);
      }
      return new Uint8Array(Buffer.concat(chunks));
    } catch (e) {
      if (signal.aborted) throw new Error(`no answer within ${how.timeoutMs} ms`, { cause: e });
      const cause = (e as { cause?: { message?: string } }).cause?.message;
      throw new Error(`${(e as Error).message}${cause && !(e as Error).message.includes(cause) ? ` (${cause})` : ""}`, { cause: e });
    }
  }
}
