// The OCI distribution client: manifests and blobs of one repository, reached through the registry's mirrors
// (in order) and then the registry itself, authorized with the credentials the lookup gives for each host.
//
// What is fetched is verified: a manifest's bytes must hash to the Docker-Content-Digest the registry sent and,
// when asked for by digest, to that digest; a blob's bytes to its digest. Sizes are bounded while reading.
// Credentials go only to the host they were looked up for (a mirror gets the mirror's credentials) and to the
// token realm that host names; redirects to other hosts never carry them (see http-exchange.ts).
import type { ImageReference } from "../core/image-reference.ts";
import { effectiveTag } from "../core/image-reference.ts";
import { ANONYMOUS, type CredentialLookup, type RegistryCredential } from "../credentials/credential.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { sameEndpointAuth } from "./auth-challenge.ts";
import { computeDigest, digestAlgorithm } from "./content-digest.ts";
import type { DownloadBudget } from "./download-budget.ts";
import { EndpointAgents } from "./endpoint-agents.ts";
import { HttpTransport, subject, type ExchangeContext, type HttpResponse, type RoundTrip } from "./http-exchange.ts";
import { MANIFEST_ACCEPT, OCI_IMAGE_INDEX, essence, readManifest, type PlatformManifest } from "./media-types.ts";
import { nextPage, parseReferrersIndex, readReferrersAnswer, referrersTag, type ReferrerDescriptor } from "./referrers.ts";
import { challengeOf, RegistryAuthorizer, statusError } from "./registry-auth.ts";
import { RegistryError, type EndpointFailure } from "./registry-error.ts";
import { RegistryUsageError } from "./registry-usage-error.ts";
import { endpointsFor, settingsForHost, type RegistryEndpoint, type RegistrySettingsMap } from "./registry-settings.ts";
import { TokenCache } from "./token-cache.ts";

export type { RoundTrip } from "./http-exchange.ts";

export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
export const DEFAULT_MAX_BLOB_BYTES = 4 * 1024 * 1024;
/** What credentialSource says when no credential was sent. */
export const ANONYMOUS_SOURCE = "anonymous";

export interface RegistryClientOptions {
  /** Per-registry TLS, plain HTTP and mirrors (src/config/registries-file.ts). */
  settings?: RegistrySettingsMap;
  /** Credentials per host and repository, unless a call brings its own; default: none (anonymous). */
  credentials?: CredentialLookup;
  /** Each HTTP request (connect to last body byte), ms. Default 10 s. */
  requestTimeoutMs?: number;
  /** Manifest size limit, bytes. Default 4 MiB. */
  maxManifestBytes?: number;
  /** The clock for token expiry and remembered registry features, epoch ms (tests inject one). */
  now?: () => number;
  /** Called for every HTTP exchange, token requests included, so callers can count round trips. */
  onRoundTrip?: (trip: RoundTrip) => void;
}

export interface CallOptions {
  /** The caller's deadline (the admission deadline): aborting it fails the call with code "timeout". */
  signal?: AbortSignal;
  /** Credentials for this call (a pod's pull secrets), instead of the client's `credentials`. */
  credentials?: CredentialLookup;
  /** Bytes this call may read, shared with the other calls of the same work (one image's verification). */
  budget?: DownloadBudget;
}

/** Where a result came from. */
export interface Provenance {
  /** The host that answered: a mirror, "registry-1.docker.io", "registry.example.com:5000". */
  endpoint: string;
  /** The `source` of the credential that worked, or "anonymous" when none was sent. */
  credentialSource: string;
}

export interface ManifestHead extends Provenance {
  /** Docker-Content-Digest; unverified (HEAD has no body), undefined when the registry sent none. */
  digest?: string;
  mediaType?: string;
  size?: number;
}

export interface Manifest extends Provenance {
  /** The verified digest of the body: sha256, or sha512 when asked for by a sha512 digest. */
  digest: string;
  mediaType: string;
  size: number;
  body: Buffer;
  /** For an index (multi-platform image): its entries, each reachable by digest with getManifest. */
  manifests?: PlatformManifest[];
}

export interface ResolvedDigest extends Provenance {
  /** What the tag points to (for a multi-platform image, the index's digest), verified. */
  digest: string;
  mediaType: string;
  size: number;
  manifests?: PlatformManifest[];
}

export interface Blob extends Provenance {
  digest: string;
  body: Buffer;
}

export interface Referrers extends Provenance {
  descriptors: ReferrerDescriptor[];
  /** "api": the Referrers API answered; "tag-schema": the referrers tag; "none": neither holds any. */
  source: "api" | "tag-schema" | "none";
}

/** Pages of a referrers answer followed at most. */
const MAX_REFERRER_PAGES = 10;
/**
 * How long a repository whose Referrers API was missing is assumed to lack it (saves a round trip per image).
 * Per repository and brief: one repository's 404 (say, an unknown name) says nothing of the host's others.
 */
const NO_REFERRERS_API_TTL_MS = 60_000;
const MAX_NO_REFERRERS_API = 1_024;
/** Answers of the Referrers API that mean "not here" (distribution-spec: 404; registries also send 400 or 406). */
const NO_REFERRERS_API_STATUSES = new Set([400, 404, 406]);

/** What a push adds to a request: its body, and a URL of the registry's choosing (an upload's Location). */
interface WriteRequest {
  url?: URL;
  body?: Buffer;
  contentType?: string;
}

/** A registry and repository, as in an ImageReference. */
export type RepositoryRef = Pick<ImageReference, "registry" | "repository">;

export class RegistryClient {
  readonly #settings: RegistrySettingsMap;
  readonly #lookup: CredentialLookup;
  readonly #maxManifestBytes: number;
  readonly #agents: EndpointAgents;
  readonly #transport: HttpTransport;
  readonly #auth: RegistryAuthorizer;
  /** Endpoint and repository pairs without a Referrers API, until when (bounded; oldest dropped first). */
  readonly #noReferrersApi = new Map<string, number>();
  readonly #now: () => number;

  constructor(options: RegistryClientOptions = {}) {
    this.#settings = options.settings ?? new Map();
    this.#lookup = options.credentials ?? ANONYMOUS;
    this.#maxManifestBytes = options.maxManifestBytes ?? DEFAULT_MAX_MANIFEST_BYTES;
    this.#now = options.now ?? Date.now;
    const requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#agents = new EndpointAgents(this.#settings, { connectTimeoutMs: requestTimeoutMs });
    this.#transport = new HttpTransport({ agents: this.#agents, settings: this.#settings, requestTimeoutMs, onRoundTrip: options.onRoundTrip });
    this.#auth = new RegistryAuthorizer(this.#transport, this.#settings, new TokenCache({ now: options.now }));
  }

  /** HEAD of a manifest by tag or digest: cheap, but nothing in it is verified. */
  async headManifest(ref: ImageReference, options: CallOptions = {}): Promise<ManifestHead> {
    const reference = manifestReference(ref);
    return this.#acrossEndpoints(ref, options, async (endpoint, context) => {
      const { response, credentialSource } = await this.#send(endpoint, context, "HEAD", `manifests/${reference}`, options);
      if (response.status !== 200) throw await statusError(response, context, endpoint.host, `HEAD manifest ${reference}`);
      await response.discard();
      const result: ManifestHead = { endpoint: endpoint.host, credentialSource };
      const digest = response.header("docker-content-digest");
      if (digest !== undefined) {
        if (digestAlgorithm(digest) === undefined) throw badDigestHeader(context, endpoint);
        if (ref.digest !== undefined && digest !== ref.digest) {
          throw new RegistryError(
            "digest-mismatch",
            `${subject(context)}: asked ${endpoint.host} for ${ref.digest}, its Docker-Content-Digest says ${digest}`,
            { ...context, endpoint: endpoint.host },
          );
        }
        result.digest = digest;
      }
      const mediaType = essence(response.header("content-type"));
      if (mediaType !== undefined) result.mediaType = mediaType;
      const length = response.header("content-length");
      if (length !== undefined && /^\d+$/.test(length)) result.size = Number(length);
      return result;
    });
  }

  /** A manifest by digest (when the reference has one) or by tag, verified against its digest. */
  async getManifest(ref: ImageReference, options: CallOptions = {}): Promise<Manifest> {
    const reference = manifestReference(ref);
    return this.#acrossEndpoints(ref, options, async (endpoint, context) => {
      const { response, credentialSource } = await this.#send(endpoint, context, "GET", `manifests/${reference}`, options);
      if (response.status !== 200) throw await statusError(response, context, endpoint.host, `manifest ${reference}`);
      const body = await response.bytes(this.#maxManifestBytes, `manifest ${reference}`, options.budget);
      const digest = verifyManifestDigest(body, response, ref.digest, context, endpoint);
      const read = readManifest(body, response.header("content-type"));
      if (!read.ok)
        throw new RegistryError("protocol", `${subject(context)}: manifest ${reference} from ${endpoint.host}: ${read.error}`, {
          ...context,
          endpoint: endpoint.host,
        });
      const manifest: Manifest = { digest, mediaType: read.mediaType, size: body.length, body, endpoint: endpoint.host, credentialSource };
      if (read.manifests) manifest.manifests = read.manifests;
      return manifest;
    });
  }

  /**
   * The digest an image's tag points to, from one verified GET (a HEAD's digest cannot be checked). For a
   * multi-platform image this is the index's digest, with its platform manifests listed. A reference with a
   * digest resolves to that digest once the registry has served bytes that hash to it.
   */
  async resolveDigest(image: ImageReference, options: CallOptions = {}): Promise<ResolvedDigest> {
    const { body: _body, ...resolved } = await this.getManifest(image, options);
    return resolved;
  }

  /** A blob, verified against its digest; at most maxBytes (default 4 MiB). Redirects are followed. */
  async getBlob(repo: RepositoryRef, digest: string, options: CallOptions & { maxBytes?: number } = {}): Promise<Blob> {
    const algorithm = digestAlgorithm(digest);
    if (algorithm === undefined) throw new RegistryUsageError("invalid-digest", `getBlob: ${JSON.stringify(digest)} is not a sha256 or sha512 digest`);
    const maxBytes = options.maxBytes ?? DEFAULT_MAX_BLOB_BYTES;
    return this.#acrossEndpoints(repo, options, async (endpoint, context) => {
      const { response, credentialSource } = await this.#send(endpoint, context, "GET", `blobs/${digest}`, options);
      if (response.status !== 200) throw await statusError(response, context, endpoint.host, `blob ${digest}`);
      const body = await response.bytes(maxBytes, `blob ${digest}`, options.budget);
      const computed = computeDigest(body, algorithm);
      if (computed !== digest) {
        throw new RegistryError(
          "digest-mismatch",
          `${subject(context)}: blob ${digest} from ${endpoint.host} hashes to ${computed}: the registry's body does not match its digest: tampered or broken`,
          {
            ...context,
            endpoint: endpoint.host,
          },
        );
      }
      return { digest, body, endpoint: endpoint.host, credentialSource };
    });
  }

  /**
   * The manifests that refer to `subjectDigest` (OCI 1.1): from the Referrers API, following pages; where the
   * API is missing for the repository (400, 404, 406, or an answer that is not an OCI image index: registries
   * differ, docker-registry 2.8 has none), from the referrers tag schema's index. No referrers at all is an
   * empty list, not an error; from a mirror it is not final (the mirror may not have them yet), so the registry
   * itself is asked. `artifactType` filters, on the registry or here.
   */
  async listReferrers(repo: RepositoryRef, subjectDigest: string, options: CallOptions & { artifactType?: string } = {}): Promise<Referrers> {
    if (digestAlgorithm(subjectDigest) === undefined)
      throw new RegistryUsageError("invalid-digest", `listReferrers: ${JSON.stringify(subjectDigest)} is not a sha256 or sha512 digest`);
    const filter = (list: ReferrerDescriptor[]) => (options.artifactType === undefined ? list : list.filter((d) => d.artifactType === options.artifactType));
    const found = (referrers: Referrers) => referrers.descriptors.length > 0;
    return this.#acrossEndpoints(
      repo,
      options,
      async (endpoint, context) => {
        const fromApi = await this.#referrersApi(endpoint, context, subjectDigest, options);
        if (fromApi) return { ...fromApi, descriptors: fromApi.filtered ? fromApi.descriptors : filter(fromApi.descriptors) };
        // The referrers tag schema: an image index at tag <alg>-<hex>, kept up to date by the clients that push.
        const tag = referrersTag(subjectDigest);
        const { response, credentialSource } = await this.#send(endpoint, context, "GET", `manifests/${tag}`, options);
        if (response.status === 404) {
          await response.discard();
          return { descriptors: [], source: "none", endpoint: endpoint.host, credentialSource };
        }
        if (response.status !== 200) throw await statusError(response, context, endpoint.host, `referrers tag ${tag}`);
        const body = await response.bytes(this.#maxManifestBytes, `referrers tag ${tag}`, options.budget);
        verifyManifestDigest(body, response, undefined, context, endpoint);
        const parsed = parseReferrersIndex(body);
        if (!parsed.ok)
          throw new RegistryError("protocol", `${subject(context)}: referrers tag ${tag} from ${endpoint.host}: ${parsed.error}`, {
            ...context,
            endpoint: endpoint.host,
          });
        return { descriptors: filter(parsed.descriptors), source: "tag-schema", endpoint: endpoint.host, credentialSource };
      },
      found,
    );
  }

  /** The Referrers API's answer, all pages; undefined when the repository has no such API (remembered briefly). */
  async #referrersApi(
    endpoint: RegistryEndpoint,
    context: ExchangeContext,
    subjectDigest: string,
    options: CallOptions & { artifactType?: string },
  ): Promise<(Referrers & { filtered: boolean }) | undefined> {
    const what = `referrers of ${subjectDigest}`;
    const bad = (error: string) =>
      new RegistryError("protocol", `${subject(context)}: ${what} from ${endpoint.host}: ${error}`, { ...context, endpoint: endpoint.host });
    const apiKey = `${endpoint.host}/${context.repository}`;
    if ((this.#noReferrersApi.get(apiKey) ?? 0) > this.#now()) return undefined;
    const noApi = async (response: HttpResponse | undefined) => {
      await response?.discard();
      this.#noReferrersApi.delete(apiKey);
      if (this.#noReferrersApi.size >= MAX_NO_REFERRERS_API) this.#noReferrersApi.delete(this.#noReferrersApi.keys().next().value!);
      this.#noReferrersApi.set(apiKey, this.#now() + NO_REFERRERS_API_TTL_MS);
      return undefined;
    };
    const query = options.artifactType === undefined ? "" : `?artifactType=${encodeURIComponent(options.artifactType)}`;
    let path = `referrers/${subjectDigest}${query}`;
    const descriptors: ReferrerDescriptor[] = [];
    let filtered = true;
    for (let page = 0; ; page++) {
      if (page === MAX_REFERRER_PAGES) throw bad(`more than ${MAX_REFERRER_PAGES} pages`);
      const { response, credentialSource } = await this.#send(endpoint, context, "GET", path, options);
      if (page === 0 && NO_REFERRERS_API_STATUSES.has(response.status)) return noApi(response);
      if (response.status !== 200) throw await statusError(response, context, endpoint.host, what);
      if (!/\bartifactType\b/.test(response.header("oci-filters-applied") ?? "")) filtered = false;
      const answer = readReferrersAnswer(await response.bytes(this.#maxManifestBytes, what, options.budget), response.header("content-type"));
      if ("notAnIndex" in answer) {
        if (page === 0) return noApi(undefined);
        throw bad(`page ${page + 1} is ${answer.notAnIndex}`);
      }
      if (!answer.ok) throw bad(answer.error);
      descriptors.push(...answer.descriptors);
      const next = nextPage(response.header("link"), context.repository, new URL(`/v2/${context.repository}/${path}`, endpoint.origin));
      if (next === undefined) return { descriptors, filtered, source: "api", endpoint: endpoint.host, credentialSource };
      if ("refused" in next) throw bad(next.refused);
      path = next.path;
    }
  }

  /**
   * Pushes a blob to the registry itself (never to a mirror) unless it holds it already: a HEAD, then a POST that
   * opens an upload and one PUT of the whole body with its digest (the distribution spec's monolithic upload).
   * Credentials are asked for push as well as pull. Returns whether bytes were sent.
   */
  async pushBlob(repo: RepositoryRef, digest: string, body: Buffer, options: CallOptions = {}): Promise<{ uploaded: boolean }> {
    const algorithm = digestAlgorithm(digest);
    if (algorithm === undefined) throw new RegistryUsageError("invalid-digest", `pushBlob: ${JSON.stringify(digest)} is not a sha256 or sha512 digest`);
    if (computeDigest(body, algorithm) !== digest) throw new RegistryUsageError("body-digest-mismatch", `pushBlob: the body does not hash to ${digest}`);
    const { endpoint, context } = this.#pushTarget(repo);
    const head = await this.#send(endpoint, context, "HEAD", `blobs/${digest}`, options, {});
    await head.response.discard();
    if (head.response.status === 200) return { uploaded: false };
    if (head.response.status !== 404) throw await statusError(head.response, context, endpoint.host, `HEAD blob ${digest}`);

    const opened = await this.#send(endpoint, context, "POST", "blobs/uploads/", options, {});
    const location = opened.response.header("location");
    if (opened.response.status !== 202 || location === undefined) {
      if (opened.response.status === 202) await opened.response.discard();
      throw opened.response.status === 202
        ? new RegistryError("protocol", `${subject(context)}: ${endpoint.host} opened an upload without a Location`, { ...context, endpoint: endpoint.host })
        : await statusError(opened.response, context, endpoint.host, `opening the upload of blob ${digest}`);
    }
    await opened.response.discard();
    let url: URL;
    try {
      url = new URL(location, endpoint.origin);
    } catch {
      throw new RegistryError("protocol", `${subject(context)}: ${endpoint.host} opened an upload at an invalid Location`, {
        ...context,
        endpoint: endpoint.host,
      });
    }
    url.searchParams.set("digest", digest);
    const put = await this.#send(endpoint, context, "PUT", "", options, { url, body, contentType: "application/octet-stream" });
    if (put.response.status !== 201) throw await statusError(put.response, context, endpoint.host, `uploading blob ${digest}`);
    await put.response.discard();
    return { uploaded: true };
  }

  /**
   * Puts a manifest under a tag (or its digest) in the registry itself; returns its digest, checked against the
   * Docker-Content-Digest the registry answers with.
   */
  async pushManifest(repo: RepositoryRef, reference: string, mediaType: string, body: Buffer, options: CallOptions = {}): Promise<string> {
    const { endpoint, context } = this.#pushTarget(repo);
    const digest = computeDigest(body, "sha256");
    const put = await this.#send(endpoint, context, "PUT", `manifests/${reference}`, options, { body, contentType: mediaType });
    if (put.response.status !== 201) throw await statusError(put.response, context, endpoint.host, `pushing manifest ${reference}`);
    await put.response.discard();
    const announced = put.response.header("docker-content-digest");
    if (announced !== undefined && announced !== digest) {
      throw new RegistryError("digest-mismatch", `${subject(context)}: pushed manifest ${digest}, ${endpoint.host} says it stored ${announced}`, {
        ...context,
        endpoint: endpoint.host,
      });
    }
    return digest;
  }

  /** Pushes go to the registry itself: a mirror serves pulls only. */
  #pushTarget(repo: RepositoryRef): { endpoint: RegistryEndpoint; context: ExchangeContext } {
    const endpoints = endpointsFor(this.#settings, repo.registry);
    return { endpoint: endpoints[endpoints.length - 1]!, context: { registry: repo.registry, repository: repo.repository } };
  }

  /** Closes every connection. The client cannot be used afterwards. */
  async close(): Promise<void> {
    await this.#agents.close();
  }

  /**
   * Runs `attempt` on each mirror in order and then the registry; the first success wins, except a mirror's
   * answer that `finalFromMirror` says is not final (the registry is then asked, and its answer or error stands).
   */
  async #acrossEndpoints<T>(
    repo: RepositoryRef,
    options: CallOptions,
    attempt: (endpoint: RegistryEndpoint, context: ExchangeContext) => Promise<T>,
    finalFromMirror: (result: T) => boolean = () => true,
  ): Promise<T> {
    const context: ExchangeContext = { registry: repo.registry, repository: repo.repository };
    const failures: EndpointFailure[] = [];
    for (const endpoint of endpointsFor(this.#settings, repo.registry)) {
      try {
        const result = await attempt(endpoint, context);
        if (!endpoint.mirror || finalFromMirror(result)) return result;
      } catch (e) {
        // A mirror that fails for any reason (gone, stale, refusing, even serving bad bytes) is skipped: the
        // registry is still asked, and its answer is verified the same way. The caller's deadline is not asked again.
        // Nor is a spent download budget: asking the registry too would read more.
        if (!(e instanceof RegistryError) || options.signal?.aborted || e.code === "download-limit") throw e;
        failures.push({ endpoint: endpoint.host, code: e.code, message: withoutSubject(e.message, context) });
        if (endpoint.mirror) continue;
        if (failures.length === 1) throw e;
        const tried = failures.map((f) => `${f.endpoint}: ${f.message}`).join("; ");
        throw new RegistryError(e.code, `${subject(context)}: every endpoint failed, mirrors first: ${tried}`, {
          ...context,
          endpoint: endpoint.host,
          retryable: e.retryable,
          credentialSources: e.credentialSources,
          status: e.status,
          attempts: failures,
          cause: e,
        });
      }
    }
    throw new ImprimaturError("internal", "unreachable: endpointsFor always ends with the registry itself");
  }

  /**
   * One authorized request to an endpoint: each credential the lookup gives for the endpoint's host in turn
   * (anonymous when it gives none) until one is not refused (401/403). A refused cached token is dropped and
   * replaced once; a challenge that differs from the cached ping is learned and retried once.
   */
  async #send(
    endpoint: RegistryEndpoint,
    context: ExchangeContext,
    method: "GET" | "HEAD" | "POST" | "PUT",
    path: string,
    options: CallOptions,
    write?: WriteRequest,
  ): Promise<{ response: HttpResponse; credentialSource: string }> {
    const { signal } = options;
    const url = write?.url ?? new URL(`/v2/${context.repository}/${path}`, endpoint.origin);
    const namedBy = settingsForHost(this.#settings, endpoint.host) ?? { host: endpoint.host };
    const lookup = options.credentials ?? this.#lookup;
    const credentials: Array<RegistryCredential | undefined> = [...lookup(endpoint.credentialHost, context.repository)];
    if (credentials.length === 0) credentials.push(undefined);
    const refusals: string[] = [];

    for (const credential of credentials) {
      const source = credential?.source ?? ANONYMOUS_SOURCE;
      let auth = await this.#auth.endpointAuth(endpoint, context, signal);
      let fresh = false;
      let retried = false;
      for (;;) {
        const authorization = await this.#auth.authorize({
          endpoint,
          auth,
          credential,
          repository: context.repository,
          ...(write ? { actions: "pull,push" as const } : {}),
          fresh,
          signal,
          context,
        });
        if (!authorization.ok) {
          refusals.push(`${source} (${authorization.reason})`);
          break;
        }
        const response = await this.#transport.exchange({
          method,
          url,
          headers: write
            ? { ...(write.contentType ? { "content-type": write.contentType } : {}) }
            : path.startsWith("manifests/")
              ? { accept: MANIFEST_ACCEPT }
              : path.startsWith("referrers/")
                ? { accept: OCI_IMAGE_INDEX }
                : {},
          ...(write?.body ? { body: write.body } : {}),
          authorization: authorization.header === undefined ? undefined : { value: authorization.header, origin: endpoint.origin },
          namedBy,
          followRedirects: true,
          signal,
          context,
        });
        if (response.status !== 401 && response.status !== 403) {
          return { response, credentialSource: authorization.header === undefined ? ANONYMOUS_SOURCE : source };
        }
        await response.discard();
        if (response.status === 401 && !retried) {
          retried = true;
          if (authorization.cached) {
            this.#auth.forget(authorization.cached.key, authorization.cached.token);
            fresh = true;
            continue;
          }
          const challenge = challengeOf(response);
          if (challenge.ok && !sameEndpointAuth(challenge.auth, auth)) {
            auth = challenge.auth;
            this.#auth.remember(endpoint, auth);
            continue;
          }
        }
        refusals.push(`${source} (refused by ${endpoint.host}: HTTP ${response.status})`);
        break;
      }
    }

    const sources = credentials.map((c) => c?.source ?? ANONYMOUS_SOURCE);
    const hint =
      credentials[0] === undefined
        ? `no credentials are configured for ${endpoint.credentialHost}, and anonymous access was refused`
        : `tried ${refusals.join(", ")}`;
    throw new RegistryError("unauthorized", `${subject(context)}: unauthorized at ${endpoint.host}: ${hint}`, {
      ...context,
      endpoint: endpoint.host,
      credentialSources: sources,
    });
  }
}

/** The digest when the reference has one (it wins over a tag, as in Docker), else the tag. */
function manifestReference(ref: ImageReference): string {
  return ref.digest ?? (effectiveTag(ref) as string);
}

/**
 * The body's digest, checked against the Docker-Content-Digest header (when sent) and the requested digest
 * (when asked by digest). Hashes with the requested digest's algorithm, sha256 otherwise.
 */
function verifyManifestDigest(
  body: Buffer,
  response: HttpResponse,
  requested: string | undefined,
  context: ExchangeContext,
  endpoint: RegistryEndpoint,
): string {
  const algorithm = requested !== undefined ? (digestAlgorithm(requested) ?? "sha256") : "sha256";
  const computed = computeDigest(body, algorithm);
  const mismatch = (promised: string, by: string, actual: string): RegistryError =>
    new RegistryError(
      "digest-mismatch",
      `${subject(context)}: the manifest from ${endpoint.host} hashes to ${actual}, but ${by} is ${promised}: the registry's body does not match its digest: tampered or broken`,
      { ...context, endpoint: endpoint.host },
    );
  const announced = response.header("docker-content-digest");
  if (announced !== undefined) {
    const announcedAlgorithm = digestAlgorithm(announced);
    if (announcedAlgorithm === undefined) throw badDigestHeader(context, endpoint);
    const actual = announcedAlgorithm === algorithm ? computed : computeDigest(body, announcedAlgorithm);
    if (actual !== announced) throw mismatch(announced, "its Docker-Content-Digest", actual);
  }
  if (requested !== undefined && computed !== requested) throw mismatch(requested, "the requested digest", computed);
  return computed;
}

function badDigestHeader(context: ExchangeContext, endpoint: RegistryEndpoint): RegistryError {
  return new RegistryError("protocol", `${subject(context)}: ${endpoint.host} sent a Docker-Content-Digest that is not a sha256 or sha512 digest`, {
    ...context,
    endpoint: endpoint.host,
  });
}

function withoutSubject(message: string, context: ExchangeContext): string {
  const prefix = `${subject(context)}: `;
  return message.startsWith(prefix) ? message.slice(prefix.length) : message;
}
