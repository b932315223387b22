// Tag → digest resolution against a real docker-registry (TLS, Bearer tokens from the test token server), as
// a ratio to one HTTPS round trip to that registry measured in the same run: a cold resolution (fresh client:
// ping, token, manifest), a warm client asked for a new tag (manifest only), a DigestResolver cache hit, and
// 100 concurrent /mutate admissions of one new tag through an in-process server (one registry lookup), next to
// 100 admissions of a tag already cached. Everything runs on 127.0.0.1; the registry, its token server and the
// image pushes come from the end-to-end harness in test/support (a benchmark may use the test harnesses).
//
//   node bench/digest-resolution.ts [--images 20] [--rounds 5] [--json]
//
// Exit 0 when every round-trip and lookup count is as expected (whatever the latencies), 1 otherwise or when
// the run fails, 2 on usage.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Client, Pool } from "undici";
import { stringify } from "yaml";
import { DEFAULT_SERVER_CONFIG } from "../src/config/server-config.ts";
import { parseImageReference, type ImageReference } from "../src/core/image-reference.ts";
import type { CredentialLookup } from "../src/credentials/credential.ts";
import { loadAuthFile } from "../src/credentials/docker-config.ts";
import { CredentialKeyring } from "../src/credentials/keyring.ts";
import { DigestResolver } from "../src/registry/digest-resolver.ts";
import { RegistryClient, type RoundTrip } from "../src/registry/registry-client.ts";
import { registrySettingsMap, type RegistrySettingsMap } from "../src/registry/registry-settings.ts";
import { podReview } from "../test/support/admission.ts";
import { startTestApp, type TestApp } from "../test/support/in-process-app.ts";
import { buildOciLayout } from "../test/support/oci-layout.ts";
import { startRegistry, type TestRegistry } from "../test/support/registry.ts";

const REPOSITORY = "bench/app";
const CONCURRENT_ADMISSIONS = 100;
const BASELINE_REQUESTS_PER_ROUND = 100;
/** Cache hits per tag and round: enough for a stable median of a few microseconds. */
const CACHED_PASSES = 200;
const PUSH_CONCURRENCY = 4;
/** The run stops by itself (exit 1) if it ever takes this long; a normal run takes 10 to 20 s. */
const WATCHDOG_MS = 120_000;

const USAGE = `Usage: node bench/digest-resolution.ts [--images N] [--rounds N] [--json]

  --images N   distinct tags resolved cold and warm per round (default 20)
  --rounds N   rounds of every measurement, plus one warm-up round not counted (default 5)
  --json       print the results as JSON only
`;

function options() {
  try {
    const { values } = parseArgs({
      options: { images: { type: "string", default: "20" }, rounds: { type: "string", default: "5" }, json: { type: "boolean", default: false } },
      strict: true,
    });
    const images = Number(values.images);
    const rounds = Number(values.rounds);
    if (!Number.isInteger(images) || images < 1 || images > 200) throw new Error("--images must be an integer in 1..200");
    if (!Number.isInteger(rounds) || rounds < 1 || rounds > 20) throw new Error("--rounds must be an integer in 1..20");
    return { images, rounds, json: values.json };
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
}

// ---------------------------------------------------------------------------------------------
// Statistics and checks

function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}
const median = (xs: readonly number[]) => percentile(xs, 50);

interface Check {
  what: string;
  expected: number;
  got: number;
}
const failures: Check[] = [];
let checksRun = 0;
function expectCount(what: string, expected: number, got: number): void {
  checksRun++;
  if (got !== expected) failures.push({ what, expected, got });
}
function expectTrue(what: string, ok: boolean): void {
  expectCount(what, 1, ok ? 1 : 0);
}

/** Round trips seen by onRoundTrip, split into token requests (to the token realm) and requests to the registry. */
class TripCounter {
  readonly trips: RoundTrip[] = [];
  readonly #tokenOrigin: string;
  constructor(tokenOrigin: string) {
    this.#tokenOrigin = tokenOrigin;
  }
  readonly record = (trip: RoundTrip): void => {
    this.trips.push(trip);
  };
  get total(): number {
    return this.trips.length;
  }
  tokens(from = 0): number {
    return this.trips.slice(from).filter((t) => t.url.startsWith(this.#tokenOrigin)).length;
  }
  manifestGets(from = 0): number {
    return this.trips.slice(from).filter((t) => t.method === "GET" && t.status === 200 && /\/manifests\//.test(t.url)).length;
  }
  /** "GET /v2/ → 401"-style lines, the token realm named as such (its query, which carries the scope, is never kept). */
  describe(from = 0): string[] {
    return this.trips.slice(from).map((t) => `${t.method} ${t.url.startsWith(this.#tokenOrigin) ? "token realm" : new URL(t.url).pathname} → ${t.status}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Setup: a registry, N + rounds + 1 tags (each a distinct image, so each has its own digest)

interface Image {
  tag: string;
  ref: ImageReference;
  name: string;
  digest: string;
}

async function pushImages(registry: TestRegistry, tags: string[], layoutDir: string): Promise<Map<string, Image>> {
  const images = new Map<string, Image>();
  for (const tag of tags) {
    const layout = buildOciLayout({ tag, seed: `digest-resolution-${tag}`, dir: layoutDir });
    const name = `${registry.host}/${REPOSITORY}:${tag}`;
    const parsed = parseImageReference(name);
    if (!parsed.ok) throw new Error(`bench image reference ${name} does not parse: ${parsed.error}`);
    images.set(tag, { tag, ref: parsed.ref, name, digest: layout.digest });
  }
  // skopeo is a process per push; a few at a time keeps the setup short on 2 cores.
  const queue = [...tags];
  await Promise.all(
    Array.from({ length: PUSH_CONCURRENCY }, async () => {
      for (let tag = queue.shift(); tag !== undefined; tag = queue.shift()) await registry.push(layoutDir, tag, REPOSITORY, tag);
    }),
  );
  return images;
}

interface Context {
  registry: TestRegistry;
  settings: RegistrySettingsMap;
  credentials: CredentialLookup;
  tokenOrigin: string;
  warmupImage: Image;
}

function client(ctx: Context, counter: TripCounter): RegistryClient {
  return new RegistryClient({ settings: ctx.settings, credentials: ctx.credentials, onRoundTrip: counter.record });
}

async function resolveChecked(c: RegistryClient, image: Image, what: string): Promise<void> {
  const resolved = await c.resolveDigest(image.ref);
  expectTrue(`${what}: ${image.name} resolves to its pushed digest`, resolved.digest === image.digest);
}

// ---------------------------------------------------------------------------------------------
// Phases 1–4: one HTTPS round trip, cold, warm, cached

/** GET /v2/ on one warm keep-alive connection, anonymous: the registry's 401 challenge. */
async function baselineRound(ctx: Context, http: Client, requests: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < requests; i++) {
    const started = performance.now();
    const r = await http.request({ method: "GET", path: "/v2/" });
    await r.body.dump();
    ms.push(performance.now() - started);
    if (r.statusCode !== 401) expectCount("baseline GET /v2/ status", 401, r.statusCode);
  }
  return ms;
}

interface ResolutionSamples {
  ms: number[];
  roundTrips: number[];
  tokenRequests: number[];
  /** The round trips of the first image, for the report. */
  pattern: string[];
}

/** A fresh client per image: nothing cached, so ping, token and manifest (and two TLS handshakes). */
async function coldRound(ctx: Context, images: Image[]): Promise<ResolutionSamples> {
  const out: ResolutionSamples = { ms: [], roundTrips: [], tokenRequests: [], pattern: [] };
  for (const image of images) {
    const counter = new TripCounter(ctx.tokenOrigin);
    const c = client(ctx, counter);
    const tokensBefore = ctx.registry.tokenServer!.counters.requests;
    try {
      const started = performance.now();
      await resolveChecked(c, image, "cold");
      out.ms.push(performance.now() - started);
    } finally {
      await c.close();
    }
    out.roundTrips.push(counter.total);
    out.tokenRequests.push(counter.tokens());
    expectCount(`cold ${image.tag}: round trips (GET /v2/, token, manifest)`, 3, counter.total);
    expectCount(`cold ${image.tag}: token requests seen by the token server`, 1, ctx.registry.tokenServer!.counters.requests - tokensBefore);
    if (out.pattern.length === 0) out.pattern = counter.describe();
  }
  return out;
}

/** One client whose ping and pull token for the repository are cached; each tag is new to it. */
async function warmRound(ctx: Context, images: Image[]): Promise<ResolutionSamples> {
  const out: ResolutionSamples = { ms: [], roundTrips: [], tokenRequests: [], pattern: [] };
  const counter = new TripCounter(ctx.tokenOrigin);
  const c = client(ctx, counter);
  try {
    await resolveChecked(c, ctx.warmupImage, "warm-up of the warm client");
    for (const image of images) {
      const from = counter.total;
      const started = performance.now();
      await resolveChecked(c, image, "warm");
      out.ms.push(performance.now() - started);
      out.roundTrips.push(counter.total - from);
      out.tokenRequests.push(counter.tokens(from));
      expectCount(`warm ${image.tag}: round trips (manifest GET only)`, 1, counter.total - from);
      expectCount(`warm ${image.tag}: manifest GETs`, 1, counter.manifestGets(from));
      if (out.pattern.length === 0) out.pattern = counter.describe(from);
    }
  } finally {
    await c.close();
  }
  return out;
}

/** DigestResolver hits: every tag was resolved before the rounds, so no call may reach the registry. */
async function cachedRound(resolver: DigestResolver, counter: TripCounter, credentials: CredentialLookup, images: Image[]): Promise<number[]> {
  const us: number[] = [];
  const tripsBefore = counter.total;
  const lookupsBefore = resolver.lookups;
  for (let pass = 0; pass < CACHED_PASSES; pass++) {
    for (const image of images) {
      const started = performance.now();
      const r = await resolver.resolve(image.ref, credentials, Date.now() + 10_000);
      us.push((performance.now() - started) * 1000);
      if (!r.ok || r.digest !== image.digest) expectTrue(`cached ${image.tag}: resolves to its pushed digest`, false);
    }
  }
  expectCount("cached: round trips", 0, counter.total - tripsBefore);
  expectCount("cached: registry lookups", 0, resolver.lookups - lookupsBefore);
  return us;
}

// ---------------------------------------------------------------------------------------------
// Phase 5: 100 concurrent /mutate admissions through an in-process server

interface Batch {
  wallMs: number;
  latenciesMs: number[];
  lookups: number;
  manifestGets: number;
  roundTrips: number;
}

async function admissionBatch(app: TestApp, pool: Pool, counter: TripCounter, image: Image): Promise<Batch> {
  const reviews = Array.from({ length: CONCURRENT_ADMISSIONS }, () => podReview({ images: [image.name] }));
  const bodies = reviews.map((r) => JSON.stringify(r));
  const lookupsBefore = app.app.resolver.lookups;
  const tripsBefore = counter.total;
  const pinned = `${image.name}@${image.digest}`;
  const started = performance.now();
  const latenciesMs = await Promise.all(
    bodies.map(async (body, i) => {
      const sent = performance.now();
      const r = await pool.request({ method: "POST", path: "/mutate?timeout=10s", headers: { "content-type": "application/json" }, body });
      const answer = (await r.body.json()) as { response?: { uid?: string; allowed?: boolean; patch?: string } };
      const latency = performance.now() - sent;
      const patch = answer.response?.patch ? JSON.parse(Buffer.from(answer.response.patch, "base64").toString("utf8")) : [];
      const ok = r.statusCode === 200 && answer.response?.uid === reviews[i]!.request.uid && answer.response.allowed === true && patch[0]?.value === pinned;
      if (!ok) expectTrue(`admission of ${image.tag}: HTTP 200, allowed, pinned to its pushed digest`, false);
      return latency;
    }),
  );
  const wallMs = performance.now() - started;
  return {
    wallMs,
    latenciesMs,
    lookups: app.app.resolver.lookups - lookupsBefore,
    manifestGets: counter.manifestGets(tripsBefore),
    roundTrips: counter.total - tripsBefore,
  };
}

// ---------------------------------------------------------------------------------------------
// The run

const opts = options();
const watchdog = setTimeout(() => {
  process.stderr.write(`digest-resolution: still running after ${WATCHDOG_MS / 1000} s; stopping (the registry harness kills its processes on exit)\n`);
  process.exit(1);
}, WATCHDOG_MS);
watchdog.unref();
const progress = (line: string) => {
  if (!opts.json) process.stderr.write(`  … ${line}\n`);
};

const cleanups: Array<() => Promise<unknown>> = [];
let exitCode: number;
try {
  const setupStarted = performance.now();
  progress("starting docker-registry (TLS, token auth) and its token server");
  const registry = await startRegistry({ auth: "token" });
  cleanups.push(() => registry.stop());
  const work = await mkdtemp(join(tmpdir(), "imprimatur-bench-digests-"));
  cleanups.push(() => rm(work, { recursive: true, force: true }));

  const imageTags = Array.from({ length: opts.images }, (_, i) => `image-${i}`);
  const burstTags = Array.from({ length: opts.rounds + 1 }, (_, r) => `burst-${r}`); // one per round, plus the warm-up round
  progress(`pushing ${imageTags.length + burstTags.length + 1} images with skopeo`);
  const images = await pushImages(registry, ["warmup", ...imageTags, ...burstTags], join(work, "layout"));
  const ctx: Context = {
    registry,
    settings: registrySettingsMap(registry.settings()),
    credentials: CredentialKeyring.of((await loadAuthFile(registry.authFile)).entries).lookup,
    tokenOrigin: registry.tokenServer!.url,
    warmupImage: images.get("warmup")!,
  };
  const measured = imageTags.map((t) => images.get(t)!);

  // Phase 1's connection: one keep-alive TLS connection, opened before anything is timed.
  const http = new Client(registry.url, { connect: { ca: registry.caPem }, pipelining: 1 });
  cleanups.push(() => http.close());

  // Phase 4's resolver: its own client and a TTL longer than the run, so every hit stays a hit.
  const cachedCounter = new TripCounter(ctx.tokenOrigin);
  const cachedClient = client(ctx, cachedCounter);
  cleanups.push(() => cachedClient.close());
  const resolver = new DigestResolver(
    { resolveDigest: (ref, o) => cachedClient.resolveDigest(ref, { signal: o.signal, credentials: o.lookup }) },
    { ttlMs: 10 * 60_000, maxEntries: 10_000 },
  );
  for (const image of measured) {
    const r = await resolver.resolve(image.ref, ctx.credentials, Date.now() + 10_000);
    expectTrue(`resolver fill: ${image.name} resolves to its pushed digest`, r.ok && r.digest === image.digest);
  }

  // Phase 5's server: pins every image of the registry, with its credentials; its round trips are counted.
  await writeFile(
    join(work, "policies.yaml"),
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "pin" },
      spec: { rules: [{ action: "allow", images: [`${registry.host}/*`], digestMutate: true }], default: "allow" },
    }),
  );
  const appCounter = new TripCounter(ctx.tokenOrigin);
  const app = await startTestApp({
    policies: join(work, "policies.yaml"),
    config: DEFAULT_SERVER_CONFIG,
    registries: ctx.settings,
    staticCredentials: ctx.credentials,
    onRegistryRoundTrip: appCounter.record,
  });
  cleanups.push(() => app.close());
  const pool = new Pool(app.base, { connect: { ca: app.ca }, connections: CONCURRENT_ADMISSIONS, pipelining: 1 });
  cleanups.push(() => pool.close());
  // Opens the 100 connections and caches the app's ping and pull token: later batches measure one lookup only.
  const appWarmup = await admissionBatch(app, pool, appCounter, ctx.warmupImage);
  expectCount("server warm-up: registry lookups for 100 concurrent admissions of a new tag", 1, appWarmup.lookups);
  expectCount("server warm-up: manifest GETs", 1, appWarmup.manifestGets);
  const setupMs = performance.now() - setupStarted;

  const samples = { baseline: [] as number[], cold: [] as number[], warm: [] as number[], cached: [] as number[] };
  const counts = { coldTrips: [] as number[], coldTokens: [] as number[], warmTrips: [] as number[], warmTokens: [] as number[] };
  let coldPattern: string[] = [];
  let warmPattern: string[] = [];
  const batches = { newTag: [] as Batch[], cachedTag: [] as Batch[] };
  const measureStarted = performance.now();

  // Round 0 warms the JIT and the connections and is not counted; its counts are checked all the same.
  for (let round = 0; round <= opts.rounds; round++) {
    const counted = round > 0;
    progress(counted ? `round ${round} of ${opts.rounds}` : "warm-up round");
    const subset = counted ? measured : measured.slice(0, Math.min(3, measured.length));
    const phases: Array<() => Promise<void>> = [
      async () => {
        const ms = await baselineRound(ctx, http, counted ? BASELINE_REQUESTS_PER_ROUND : 20);
        if (counted) samples.baseline.push(...ms);
      },
      async () => {
        const r = await coldRound(ctx, subset);
        if (counted) {
          samples.cold.push(...r.ms);
          counts.coldTrips.push(...r.roundTrips);
          counts.coldTokens.push(...r.tokenRequests);
          coldPattern = r.pattern;
        }
      },
      async () => {
        const r = await warmRound(ctx, subset);
        if (counted) {
          samples.warm.push(...r.ms);
          counts.warmTrips.push(...r.roundTrips);
          counts.warmTokens.push(...r.tokenRequests);
          warmPattern = r.pattern;
        }
      },
      async () => {
        const us = await cachedRound(resolver, cachedCounter, ctx.credentials, subset);
        if (counted) samples.cached.push(...us);
      },
    ];
    // Alternating the order spreads whatever else the machine does over every phase alike.
    for (const phase of round % 2 ? phases.reverse() : phases) await phase();

    // A new tag for the server, then the same tag again, now cached: the batch pair differs by the one lookup.
    const burst = images.get(burstTags[round]!)!;
    const fresh = await admissionBatch(app, pool, appCounter, burst);
    const cached = await admissionBatch(app, pool, appCounter, burst);
    expectCount(`round ${round}: registry lookups for ${CONCURRENT_ADMISSIONS} concurrent admissions of a new tag`, 1, fresh.lookups);
    expectCount(`round ${round}: manifest GETs for them`, 1, fresh.manifestGets);
    expectCount(`round ${round}: registry round trips for them (ping and token cached)`, 1, fresh.roundTrips);
    expectCount(`round ${round}: registry lookups for ${CONCURRENT_ADMISSIONS} concurrent admissions of a cached tag`, 0, cached.lookups);
    expectCount(`round ${round}: registry round trips for them`, 0, cached.roundTrips);
    if (counted) {
      batches.newTag.push(fresh);
      batches.cachedTag.push(cached);
    }
  }
  const measureMs = performance.now() - measureStarted;

  const baselineMs = median(samples.baseline);
  const latency = (ms: number[]) => ({ samples: ms.length, medianMs: median(ms), p90Ms: percentile(ms, 90) });
  const range = (xs: number[]) => ({ min: Math.min(...xs), max: Math.max(...xs) });
  const batchSummary = (bs: Batch[]) => ({
    batches: bs.length,
    wallMsMedian: median(bs.map((b) => b.wallMs)),
    wallMsRange: range(bs.map((b) => b.wallMs)),
    p50Ms: percentile(
      bs.flatMap((b) => b.latenciesMs),
      50,
    ),
    p99Ms: percentile(
      bs.flatMap((b) => b.latenciesMs),
      99,
    ),
    lookupsPerBatch: range(bs.map((b) => b.lookups)),
    manifestGetsPerBatch: range(bs.map((b) => b.manifestGets)),
    roundTripsPerBatch: range(bs.map((b) => b.roundTrips)),
  });
  const newTag = batchSummary(batches.newTag);
  const cachedTag = batchSummary(batches.cachedTag);
  const report = {
    machine: { cores: cpus().length, node: process.version },
    images: opts.images,
    rounds: opts.rounds,
    setupMs: Math.round(setupMs),
    measureMs: Math.round(measureMs),
    baseline: { what: "GET /v2/ → 401, warm keep-alive TLS connection", ...latency(samples.baseline) },
    cold: {
      what: "fresh RegistryClient per image",
      ...latency(samples.cold),
      ratioToBaseline: median(samples.cold) / baselineMs,
      roundTripsPerImage: range(counts.coldTrips),
      tokenRequestsPerImage: range(counts.coldTokens),
      roundTrips: coldPattern,
    },
    warm: {
      what: "one client, ping and token cached, tag new to it",
      ...latency(samples.warm),
      ratioToBaseline: median(samples.warm) / baselineMs,
      roundTripsPerImage: range(counts.warmTrips),
      tokenRequestsPerImage: range(counts.warmTokens),
      roundTrips: warmPattern,
    },
    cached: {
      what: "DigestResolver hit",
      samples: samples.cached.length,
      medianUs: median(samples.cached),
      p90Us: percentile(samples.cached, 90),
      ratioToBaseline: median(samples.cached) / 1000 / baselineMs,
      roundTrips: 0,
    },
    concurrentAdmissions: {
      admissionsPerBatch: CONCURRENT_ADMISSIONS,
      newTag,
      cachedTag,
      newToCachedWallRatio: newTag.wallMsMedian / cachedTag.wallMsMedian,
    },
    checks: { run: checksRun, failed: failures },
    ok: failures.length === 0,
  };

  if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    const f = (x: number, d = 2) => x.toFixed(d);
    const out = (line: string) => process.stdout.write(`${line}\n`);
    const counted = (r: { min: number; max: number }) => (r.min === r.max ? String(r.min) : `${r.min}–${r.max}`);
    out(
      `Digest resolution (${opts.images} images × ${opts.rounds} rounds, docker-registry with TLS and token auth on 127.0.0.1, ${report.machine.cores} cores, Node ${report.machine.node})`,
    );
    out(`  baseline, one HTTPS round trip: median ${f(baselineMs, 3)} ms, p90 ${f(report.baseline.p90Ms, 3)} ms (${report.baseline.samples} × GET /v2/ → 401)`);
    out(
      `  cold (fresh client):            median ${f(report.cold.medianMs)} ms, p90 ${f(report.cold.p90Ms)} ms = ${f(report.cold.ratioToBaseline, 1)}× baseline; ${counted(report.cold.roundTripsPerImage)} round trips/image, ${counted(report.cold.tokenRequestsPerImage)} token request(s): ${coldPattern.join(", ")}`,
    );
    out(
      `  warm client, new tag:           median ${f(report.warm.medianMs)} ms, p90 ${f(report.warm.p90Ms)} ms = ${f(report.warm.ratioToBaseline, 1)}× baseline; ${counted(report.warm.roundTripsPerImage)} round trip/image: ${warmPattern.join(", ")}`,
    );
    out(
      `  cached (DigestResolver hit):    median ${f(report.cached.medianUs)} µs, p90 ${f(report.cached.p90Us)} µs = ${f(report.cached.ratioToBaseline, 3)}× baseline; 0 round trips (${report.cached.samples} hits)`,
    );
    out(`  ${CONCURRENT_ADMISSIONS} concurrent /mutate admissions (median of ${opts.rounds} batches; latency over all admissions):`);
    out(
      `    new tag:    wall ${f(newTag.wallMsMedian, 1)} ms (${f(newTag.wallMsRange.min, 1)}–${f(newTag.wallMsRange.max, 1)}), p50 ${f(newTag.p50Ms, 1)} ms, p99 ${f(newTag.p99Ms, 1)} ms; ${counted(newTag.lookupsPerBatch)} registry lookup, ${counted(newTag.manifestGetsPerBatch)} manifest GET, ${counted(newTag.roundTripsPerBatch)} round trip per batch`,
    );
    out(
      `    cached tag: wall ${f(cachedTag.wallMsMedian, 1)} ms (${f(cachedTag.wallMsRange.min, 1)}–${f(cachedTag.wallMsRange.max, 1)}), p50 ${f(cachedTag.p50Ms, 1)} ms, p99 ${f(cachedTag.p99Ms, 1)} ms; ${counted(cachedTag.lookupsPerBatch)} lookups, ${counted(cachedTag.roundTripsPerBatch)} round trips per batch`,
    );
    out(`    new/cached wall time: ${f(report.concurrentAdmissions.newToCachedWallRatio)}×`);
    out(`  setup ${f(setupMs / 1000, 1)} s, measurement ${f(measureMs / 1000, 1)} s`);
    out(`  counts: ${checksRun} checked — ${failures.length === 0 ? "all as expected" : `${failures.length} NOT as expected`}`);
    for (const c of failures.slice(0, 20)) out(`    ${c.what}: expected ${c.expected}, got ${c.got}`);
  }
  exitCode = failures.length === 0 ? 0 : 1;
} catch (e) {
  process.stderr.write(`digest-resolution failed: ${(e as Error).stack ?? e}\n`);
  exitCode = 1;
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  clearTimeout(watchdog);
}
process.exit(exitCode);
