// Signature verification costs, against a real docker-registry (TLS, Bearer tokens from the test token server)
// holding images signed by the project's offline test signer (cosign `.sig` key signatures logged in a mock
// Rekor; keyless Sigstore bundles as referrers through the referrers tag schema):
//   1. registry round trips of a cold verification of a key-signed image by digest (target ≤ 3 per new image);
//   2. time per keyless bundle verification (the Sigstore verifier alone, no registry);
//   3. a warm cache hit (target ≤ 0.1 ms);
//   4. 100 concurrent verifications of one new image = 1 verification;
//   5. cached-admission throughput of `serve` with a verifying policy against `serve` with the plain policy (the
//      same rule without attestors) on the same pod (target ≥ 0.9×), by running bench/admission-throughput.ts with
//      the signed image, one policy for imprimatur and the other for its baseline, in interleaved rounds;
//   6. the same with an attestation policy (a signature, SLSA provenance and a vulnerability scan, checked with
//      conditions and CEL, judged once per cached verification) (target ≥ 0.85×);
//   7. the plain policy against the echo baseline: what the edge and the policy step cost, for reference;
//   8. with --pod-create: pod create latency through a real kube-apiserver with the verifying policy served from
//      the cache, against the do-nothing webhook (bench/pod-create-latency.ts with the signed image; target p99
//      ≤ 1.15×). It needs the Kubernetes binaries (scripts/provision-kube.sh).
//
//   node bench/signature-verification.ts [--images 10] [--hits 20000] [--keyless 300] [--seconds 6] [--pod-create] [--json]
//
// Exit 0 when every count is as expected and every verification verified (whatever the timings), 1 otherwise
// or when the run fails, 2 on usage. Loopback only; the run stops by itself.
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { leafAttestors } from "../src/core/image-policy/attestors.ts";
import { parseImageReference } from "../src/core/image-reference.ts";
import { parseTrustedRoot, type TrustRoot } from "../src/core/trust-root/trust-root-kind.ts";
import { parsePolicyText } from "../src/policy/load-policies.ts";
import { RegistryClient, type RoundTrip } from "../src/registry/registry-client.ts";
import { registrySettingsMap } from "../src/registry/registry-settings.ts";
import { ImageVerifier, type VerificationRequest } from "../src/verification/image-verifier.ts";
import { bundleToItem } from "../src/verification/signed-item.ts";
import { imageBinding, verifyItem } from "../src/verification/verify-entry.ts";
import { buildOciLayout } from "../test/support/oci-layout.ts";
import { startRegistry, type TestRegistry } from "../test/support/registry.ts";
import {
  attestationTag,
  cosignAttestationLayer,
  cosignSignatureLayer,
  inTotoStatement,
  ociManifestWithLayers,
  signatureTag,
  simpleSigningPayload,
} from "../test/support/signer/cosign-signatures.ts";
import { generateSigningKey, type SigningKey } from "../test/support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../test/support/signer/mock-sigstore.ts";
import { pushArtifact } from "../test/support/signer/oci-push.ts";
import { imageSignatureBundle } from "../test/support/signer/sigstore-bundles.ts";
import { percentile, renderTable } from "./support/report.ts";
import { samplesThrough, type FrameShare } from "./support/profile-frames.ts";
import { guardRun } from "./support/run-guard.ts";
import { numberOption } from "./support/options.ts";

const TARGET_ROUND_TRIPS = 3;
const TARGET_HIT_MS = 0.1;
const TARGET_THROUGHPUT = 0.9;
const TARGET_ATTESTATION_THROUGHPUT = 0.85;
/** Pod create p99 with the cached verifying policy, over the do-nothing webhook's on the same apiserver (issue 38). */
const TARGET_POD_CREATE_P99 = 1.15;
const SLSA = "https://slsa.dev/provenance/v1";
const VULN = "https://cosign.sigstore.dev/attestation/vuln/v1";
const CONCURRENT = 100;
/** Code a cached admission's review must not run: signature checks, JMESPath conditions, CEL. */
const JUDGING_CODE =
  /src\/core\/conditions\/(?!evaluation-deadline)|@bufbuild\/cel|jmespath|src\/verification\/(verify-entry|signature-discovery|signed-item|prehashed-signature)\.ts|@sigstore\//;
/** The engine's review of an admission, where a judgement runs when it is not cached. */
const REVIEW_CODE = /src\/engine\//;
const WATCHDOG_MS = 240_000;
const POD_CREATE_WATCHDOG_MS = 15 * 60_000;
const PUSHER = { username: "pusher", password: "pusher-secret-1" };

const USAGE = `Usage: node bench/signature-verification.ts [options]

  --images N     new key-signed images verified one after the other, for round trips and cold time (default 10)
  --hits N       cache hits timed (default 20000)
  --keyless N    keyless bundle verifications timed (default 300)
  --seconds S    measured seconds per server of the throughput comparison (default 6; 0 skips it)
  --json         print the results as JSON only
  --cpu-prof DIR CPU profiles of both servers of the throughput comparison (admission-throughput --cpu-prof)
  --pod-create   also pod create latency through kube-apiserver with the verifying policy, against the do-nothing
                 webhook (bench/pod-create-latency.ts; needs scripts/provision-kube.sh; about 5 more minutes)
`;

interface Options {
  images: number;
  hits: number;
  keyless: number;
  seconds: number;
  json: boolean;
  cpuProf: string | undefined;
  podCreate: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      images: { type: "string", default: "10" },
      hits: { type: "string", default: "20000" },
      keyless: { type: "string", default: "300" },
      seconds: { type: "string", default: "6" },
      json: { type: "boolean", default: false },
      "cpu-prof": { type: "string" },
      "pod-create": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  return {
    images: numberOption("images", values.images, 1, 200),
    hits: numberOption("hits", values.hits, 100, 1_000_000),
    keyless: numberOption("keyless", values.keyless, 10, 10_000),
    seconds: numberOption("seconds", values.seconds, 0, 120),
    json: values.json,
    cpuProf: values["cpu-prof"],
    podCreate: values["pod-create"],
  };
}

interface Setup {
  registry: TestRegistry;
  sigstore: MockSigstore;
  key: SigningKey;
  root: TrustRoot;
  dir: string;
}

async function pushSigned(s: Setup, repository: string, tag: string): Promise<string> {
  const layout = await buildOciLayout({ tag, seed: `${repository}:${tag}` });
  try {
    await s.registry.push(layout.layoutDir, tag, repository, tag);
  } finally {
    await rm(layout.layoutDir, { recursive: true, force: true });
  }
  const payload = simpleSigningPayload({ dockerReference: `${s.registry.host}/${repository}`, digest: layout.digest });
  const layer = await cosignSignatureLayer({ payload, key: s.key, rekor: s.sigstore, hash: "sha256" });
  await pushArtifact({ url: s.registry.url, caPem: s.registry.caPem, ...PUSHER }, repository, ociManifestWithLayers([layer]), signatureTag(layout.digest));
  return layout.digest;
}

/** A signed image that also carries SLSA provenance and a fresh, clean vulnerability scan as cosign .att layers. */
async function pushAttested(s: Setup, repository: string, tag: string): Promise<string> {
  const digest = await pushSigned(s, repository, tag);
  const statement = (predicateType: string, predicate: Record<string, unknown>) =>
    inTotoStatement({ subjectName: `${s.registry.host}/${repository}`, digest, predicateType, predicate });
  const layers = await Promise.all([
    cosignAttestationLayer({ statement: statement(SLSA, SLSA_PREDICATE), key: s.key, rekor: s.sigstore }),
    cosignAttestationLayer({
      statement: statement(VULN, {
        metadata: { scanFinishedOn: new Date().toISOString() },
        scanner: { uri: "pkg:github/aquasecurity/trivy@0.58.1", result: { Results: [{ Vulnerabilities: [{ CVSS: { nvd: { V3Score: 5.3 } } }] }] } },
      }),
      key: s.key,
      rekor: s.sigstore,
    }),
  ]);
  await pushArtifact({ url: s.registry.url, caPem: s.registry.caPem, ...PUSHER }, repository, ociManifestWithLayers(layers), attestationTag(digest));
  return digest;
}

const SLSA_PREDICATE = {
  buildDefinition: { buildType: "https://actions.github.io/buildtypes/workflow/v1" },
  runDetails: { builder: { id: "https://github.com/actions/runner" } },
};

/** The image-verification design's example, checked on every admission: provenance and a scan under a day old. */
function attestationPolicyDoc(s: Setup): string {
  const key = { staticKey: { name: "release", key: s.key.publicKeyPem, trustRoot: "bench" } };
  return stringify({
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "built-and-scanned" },
    spec: {
      rules: [
        {
          action: "allow",
          images: [`${s.registry.host}/*`],
          attestors: [{ entries: [key] }],
          attestations: [
            {
              predicateType: SLSA,
              conditions: [
                {
                  all: [{ key: "{{ buildDefinition.buildType }}", operator: "Equals", value: SLSA_PREDICATE.buildDefinition.buildType }],
                  any: [{ key: "{{ runDetails.builder.id }}", operator: "In", value: [SLSA_PREDICATE.runDetails.builder.id] }],
                },
              ],
            },
            {
              predicateType: VULN,
              conditions: [
                {
                  all: [
                    { key: "{{ time_since('', metadata.scanFinishedOn, '') }}", operator: "LessThan", value: "24h" },
                    { key: "{{ scanner.result.Results[].Vulnerabilities[?CVSS.nvd.V3Score > `8.0`][] | length(@) }}", operator: "Equals", value: 0 },
                  ],
                },
              ],
              cel: "predicate.scanner.uri.startsWith('pkg:github/aquasecurity/trivy')",
            },
          ],
          validate: { cel: `attestations['${SLSA}'].size() > 0 && image.digest.startsWith('sha256:')` },
        },
      ],
      default: "deny",
    },
  });
}

const TRUST_ROOT_DOC = stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", metadata: { name: "bench" }, spec: { path: "bench-root.json" } });

/** The verifying policy's rule without attestors: what a verifying admission is compared with. */
function plainPolicyDoc(s: Setup): string {
  return stringify({
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "plain" },
    spec: { rules: [{ action: "allow", images: [`${s.registry.host}/*`] }], default: "deny" },
  });
}

/** Allow the registry's images signed by the bench key (logged in the mock Rekor of TrustRoot "bench"). */
function imagePolicyDoc(s: Setup): string {
  return stringify({
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "signed" },
    spec: {
      rules: [
        {
          action: "allow",
          images: [`${s.registry.host}/*`],
          attestors: [{ entries: [{ staticKey: { name: "release", key: s.key.publicKeyPem, trustRoot: "bench" } }] }],
        },
      ],
      default: "deny",
    },
  });
}

const median = (xs: number[]) => percentile(Float64Array.from(xs).sort(), 50);

async function main(): Promise<number> {
  let opts: Options;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`signature-verification: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const say = (line: string) => {
    if (!opts.json) process.stderr.write(`${line}\n`);
  };
  let registry: TestRegistry | undefined;
  const children: Array<ReturnType<typeof spawn>> = [];
  const unguard = guardRun("signature-verification", WATCHDOG_MS + (opts.podCreate ? POD_CREATE_WATCHDOG_MS : 0), (signal) => {
    for (const c of children) c.kill(signal);
    void registry?.stop();
  });
  const failures: string[] = [];
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-bench-signatures-"));
  try {
    say("Starting docker-registry (TLS, token auth) and a mock Sigstore ...");
    registry = await startRegistry({ auth: "token", publicRepositories: ["bench/**"], users: [PUSHER] });
    const sigstore = await createMockSigstore({ name: "bench" });
    const parsedRoot = parseTrustedRoot(sigstore.trustedRoot);
    if ("error" in parsedRoot) throw new Error(parsedRoot.error);
    const s: Setup = { registry, sigstore, key: generateSigningKey("ecdsa-p256"), root: { name: "bench", ...parsedRoot }, dir };
    const attestors = parsePolicyText(imagePolicyDoc(s), "bench.yaml").policies.ImagePolicy[0]!.rules[0]!.attestors!;
    const trustRoots = new Map([["bench", s.root]]);

    // Images 0..N+1 are tags of one repository (the client's token for it is then cached); one more repository
    // shows what a repository the client has not seen yet adds (a token).
    say(`Pushing ${opts.images + 3} signed images ...`);
    const digests: string[] = [];
    for (let i = 0; i < opts.images + 2; i++) digests.push(await pushSigned(s, "bench/app", `v${i}`));
    const otherDigest = await pushSigned(s, "bench/other", "v0");

    // 1. Cold verifications: a fresh client and verifier; the first image also pays the ping and the token.
    const trips: RoundTrip[] = [];
    const client = new RegistryClient({ settings: registrySettingsMap(registry.settings()), onRoundTrip: (t) => trips.push(t) });
    const verifier = new ImageVerifier({ client, trustRoots: () => trustRoots });
    const requestFor = (image: string, digest: string): VerificationRequest => {
      const parsed = parseImageReference(image);
      if (!parsed.ok) throw new Error(parsed.error);
      return { image: { ...parsed.ref, digest }, policy: "signed", rule: 0, attestors, lookup: () => [] };
    };
    const request = (i: number) => requestFor(`${registry!.host}/bench/app:v${i}`, digests[i]!);
    const cold: Array<{ trips: number; ms: number }> = [];
    for (let i = 0; i < opts.images; i++) {
      const before = trips.length;
      const t0 = performance.now();
      const r = await verifier.verify(request(i), Date.now() + 10_000);
      cold.push({ trips: trips.length - before, ms: performance.now() - t0 });
      if (r.status !== "verified") failures.push(`image ${i}: ${r.status}: ${"reason" in r ? r.reason : ""}`);
    }
    const firstTrips = cold[0]!.trips;
    const laterTrips = cold.slice(1).map((c) => c.trips);
    const maxLater = laterTrips.length > 0 ? Math.max(...laterTrips) : firstTrips;
    const beforeOther = trips.length;
    const other = await verifier.verify(requestFor(`${registry.host}/bench/other:v0`, otherDigest), Date.now() + 10_000);
    if (other.status !== "verified") failures.push(`bench/other: ${other.status}`);
    const newRepositoryTrips = trips.length - beforeOther;

    // 3. Warm cache hits.
    const hitTimes: number[] = [];
    const hitRequest = request(0);
    for (let i = 0; i < opts.hits; i++) {
      const t0 = performance.now();
      await verifier.verify(hitRequest, Date.now() + 10_000);
      hitTimes.push(performance.now() - t0);
    }
    const hitMedian = median(hitTimes);
    const hitMean = hitTimes.reduce((a, b) => a + b, 0) / hitTimes.length;

    // 4. 100 concurrent verifications of one new image.
    const concurrentIndex = opts.images;
    const beforeVerifications = verifier.verifications;
    const beforeTrips = trips.length;
    const results = await Promise.all(Array.from({ length: CONCURRENT }, () => verifier.verify(request(concurrentIndex), Date.now() + 10_000)));
    const concurrentVerifications = verifier.verifications - beforeVerifications;
    const concurrentTrips = trips.length - beforeTrips;
    if (concurrentVerifications !== 1) failures.push(`${CONCURRENT} concurrent verifications ran ${concurrentVerifications} times, not once`);
    if (results.some((r) => r.status !== "verified")) failures.push("a concurrent verification did not verify");
    await client.close();

    // 2. Keyless bundle verification, the verifier alone.
    const cert = await sigstore.issueKeylessCertificate({
      subjectAltName: "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1",
      issuer: "https://token.actions.githubusercontent.com",
    });
    const bundle = await imageSignatureBundle({ name: `${registry.host}/bench/app`, digest: digests[0]!, keyless: cert, rekor: sigstore, version: "0.3" });
    const keylessEntry = leafAttestors(
      parsePolicyText(
        `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: k}\nspec:\n  rules: [{action: allow, images: ["*"], attestors: [{entries: [{keyless: {subject: "https://github.com/acme/*", issuer: "https://token.actions.githubusercontent.com", trustRoot: bench}}]}]}]\n`,
        "k.yaml",
      ).policies.ImagePolicy[0]!.rules[0]!.attestors!,
    )[0]!;
    const keylessTimes: number[] = [];
    for (let i = 0; i < opts.keyless; i++) {
      const t0 = performance.now();
      const outcome = verifyItem(bundleToItem(bundle.bytes, "bench", undefined), keylessEntry, { trustRoot: s.root, binding: imageBinding(digests[0]!) });
      keylessTimes.push(performance.now() - t0);
      if (!outcome.ok) {
        failures.push(`keyless: ${outcome.reason}`);
        break;
      }
    }
    const keylessMedian = median(keylessTimes.slice(Math.floor(keylessTimes.length / 10))); // after JIT warm-up

    // 5–7. Cached-admission throughput through serve: against serve with the plain policy, and that against echo.
    let throughput:
      | {
          ratio: number;
          verdict: string;
          imprimaturRps: number;
          baselineRps: number;
          imprimaturMicrosPerRequest: number | undefined;
          baselineMicrosPerRequest: number | undefined;
          pinning: string;
          generatorSaturated: string[];
          imprimaturProfile: string | undefined;
        }
      | undefined;
    let reference: typeof throughput;
    let attestations: typeof throughput;
    let hitProfile: FrameShare | undefined;
    let podCreate: PodCreateResult | undefined;
    const image = `${registry.host}/bench/app:v${opts.images + 1}@${digests[opts.images + 1]}`;
    const serveWith = (policies: string, as = "serve-arg") => [
      `--${as}=--policies`,
      `--${as}=${join(dir, policies)}`,
      `--${as}=--registries`,
      `--${as}=${join(dir, "registries.yaml")}`,
    ];
    if (opts.seconds > 0 || opts.podCreate) {
      await writeFile(join(dir, "bench-root.json"), JSON.stringify(sigstore.trustedRoot));
      await writeFile(join(dir, "signed.yaml"), `${TRUST_ROOT_DOC}---\n${imagePolicyDoc(s)}`);
      await writeFile(join(dir, "plain.yaml"), plainPolicyDoc(s));
      await writeFile(
        join(dir, "registries.yaml"),
        // The registry and its token server listen on loopback, which serve reaches only when the registries file allows it.
        stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "RegistryConfig", registries: registry.configEntries() }),
      );
    }
    if (opts.seconds > 0) {
      say(`Admission throughput with a verifying policy (${image}) ...`);
      // The plain policy as the baseline: the same pod, the same rule, no attestors.
      const againstPlain = serveWith("plain.yaml", "baseline-serve-arg");
      const measure = async (extra: string[]) => {
        const report = await runChild(
          ["bench/admission-throughput.ts", "--json", "--seconds", String(opts.seconds), ...extra, ...(opts.cpuProf ? ["--cpu-prof", opts.cpuProf] : [])],
          children,
        );
        const parsed = JSON.parse(report) as {
          ratio: number;
          verdict: string;
          ok: boolean;
          failures: string[];
          imprimatur: { requestsPerSecond: number; serverCpuMicrosPerRequest?: number };
          baseline: { requestsPerSecond: number; serverCpuMicrosPerRequest?: number };
          pinning: string;
          generatorSaturated: string[];
          cpuProfileFiles?: Record<string, string>;
        };
        if (!parsed.ok) failures.push(...parsed.failures.map((f) => `throughput: ${f}`));
        return {
          ratio: parsed.ratio,
          verdict: parsed.verdict,
          imprimaturRps: parsed.imprimatur.requestsPerSecond,
          baselineRps: parsed.baseline.requestsPerSecond,
          imprimaturMicrosPerRequest: parsed.imprimatur.serverCpuMicrosPerRequest,
          baselineMicrosPerRequest: parsed.baseline.serverCpuMicrosPerRequest,
          pinning: parsed.pinning,
          generatorSaturated: parsed.generatorSaturated,
          imprimaturProfile: parsed.cpuProfileFiles?.imprimatur,
        };
      };
      throughput = await measure(["--image", image, ...serveWith("signed.yaml"), ...againstPlain]);
      // 6. An attestation policy: statements verified once and cached, and what their checks concluded kept with them.
      const attestedDigest = await pushAttested(s, "bench/attested", "v1");
      await writeFile(join(dir, "attested.yaml"), `${TRUST_ROOT_DOC}---\n${attestationPolicyDoc(s)}`);
      say("Admission throughput with an attestation policy ...");
      attestations = await measure(["--image", `${registry.host}/bench/attested:v1@${attestedDigest}`, ...serveWith("attested.yaml"), ...againstPlain]);
      // With --cpu-prof: what of the attestation server's time went through verification, JMESPath or CEL code.
      // Only the first admission verifies and judges; every later one is a cache hit.
      if (attestations.imprimaturProfile) hitProfile = await samplesThrough(attestations.imprimaturProfile, REVIEW_CODE, JUDGING_CODE);
      // The plain policy against the echo server: the edge and the policy step, for reference.
      say("Admission throughput with the plain policy, against the echo server ...");
      reference = await measure(["--image", image, ...serveWith("plain.yaml")]);
    }
    // 8. Pod create through kube-apiserver with the verifying policy (every admission after the first a cache hit),
    // against the do-nothing webhook on the same apiserver.
    if (opts.podCreate) {
      say(`Pod create latency with the verifying policy (${image}) ...`);
      podCreate = podCreateResult(await runChild(["bench/pod-create-latency.ts", "--json", "--image", image, ...serveWith("signed.yaml")], children));
      if (!podCreate.ok) failures.push(...podCreate.failures.map((f) => `pod create: ${f}`));
    }

    const summary = {
      benchmark: "signature-verification",
      date: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? "unknown",
      cold: {
        firstImageRoundTrips: firstTrips,
        newRepositoryRoundTrips: newRepositoryTrips,
        newImageRoundTrips: laterTrips,
        maxNewImageRoundTrips: maxLater,
        target: TARGET_ROUND_TRIPS,
        medianMs: median(cold.slice(1).map((c) => c.ms)),
        firstMs: cold[0]!.ms,
      },
      keyless: { verifications: keylessTimes.length, medianMs: keylessMedian },
      cacheHit: {
        hits: hitTimes.length,
        medianMs: hitMedian,
        meanMs: hitMean,
        p99Ms: percentile(Float64Array.from(hitTimes).sort(), 99),
        target: TARGET_HIT_MS,
      },
      concurrent: { admissions: CONCURRENT, verifications: concurrentVerifications, roundTrips: concurrentTrips },
      ...(throughput ? { throughput: { ...throughput, target: TARGET_THROUGHPUT } } : {}),
      ...(reference ? { plainAgainstEcho: reference } : {}),
      ...(attestations ? { throughputWithAttestations: { ...attestations, target: TARGET_ATTESTATION_THROUGHPUT } } : {}),
      ...(hitProfile ? { attestationServerProfile: hitProfile } : {}),
      ...(podCreate ? { podCreate: { ...podCreate, targetP99: TARGET_POD_CREATE_P99 } } : {}),
      verdicts: {
        roundTrips: maxLater <= TARGET_ROUND_TRIPS ? "PASS" : "BELOW TARGET",
        cacheHit: hitMedian <= TARGET_HIT_MS ? "PASS" : "BELOW TARGET",
        concurrent: concurrentVerifications === 1 ? "PASS" : "FAILED",
        ...(throughput ? { throughput: throughput.ratio >= TARGET_THROUGHPUT ? "PASS" : "BELOW TARGET" } : {}),
        ...(attestations ? { attestationThroughput: attestations.ratio >= TARGET_ATTESTATION_THROUGHPUT ? "PASS" : "BELOW TARGET" } : {}),
        ...(podCreate ? { podCreate: podCreate.p99Ratio <= TARGET_POD_CREATE_P99 ? "PASS" : "BELOW TARGET" } : {}),
      },
      ok: failures.length === 0,
      failures,
    };
    if (opts.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
    else {
      const ms = (n: number) => `${n.toFixed(3)} ms`;
      process.stdout.write(
        [
          "",
          `signature-verification  ${summary.date}  node ${summary.node}  ${summary.cpus} CPUs (${summary.cpuModel})`,
          "",
          renderTable([
            ["measure", "result", "target", "verdict"],
            ["round trips, first image on a new client (ping, token)", String(firstTrips), "", ""],
            ["round trips per new key-signed image", `${maxLater} (max of ${laterTrips.length})`, `<= ${TARGET_ROUND_TRIPS}`, summary.verdicts.roundTrips],
            ["round trips, first image of a repository not seen yet (token)", String(newRepositoryTrips), "", ""],
            ["cold verification of a new image, median", ms(summary.cold.medianMs), "", ""],
            ["keyless bundle verification (verifier alone), median", ms(keylessMedian), "", ""],
            [`cache hit, median of ${hitTimes.length}`, ms(hitMedian), `<= ${TARGET_HIT_MS} ms`, summary.verdicts.cacheHit],
            [
              `${CONCURRENT} concurrent verifications of one new image`,
              `${concurrentVerifications} verification, ${concurrentTrips} round trips`,
              "1",
              summary.verdicts.concurrent,
            ],
            ...(reference
              ? [
                  [
                    "admissions, plain policy / echo server",
                    `${reference.ratio.toFixed(2)}x (${Math.round(reference.imprimaturRps)} / ${Math.round(reference.baselineRps)} req/s; ${serverCost(reference)})`,
                    "",
                    "",
                  ],
                ]
              : []),
            ...(throughput
              ? [
                  [
                    "cached verifying admissions / plain policy",
                    `${throughput.ratio.toFixed(2)}x (${Math.round(throughput.imprimaturRps)} / ${Math.round(throughput.baselineRps)} req/s; ${serverCost(throughput)})`,
                    `>= ${TARGET_THROUGHPUT}x`,
                    summary.verdicts.throughput!,
                  ],
                ]
              : []),
            ...(attestations
              ? [
                  [
                    "cached attestation admissions / plain policy",
                    `${attestations.ratio.toFixed(2)}x (${Math.round(attestations.imprimaturRps)} / ${Math.round(attestations.baselineRps)} req/s; ${serverCost(attestations)})`,
                    `>= ${TARGET_ATTESTATION_THROUGHPUT}x`,
                    summary.verdicts.attestationThroughput!,
                  ],
                ]
              : []),
            ...(podCreate
              ? [
                  [
                    "pod create, cached verifying policy / do-nothing webhook",
                    `p50 ${podCreate.p50Ratio.toFixed(2)}x, p99 ${podCreate.p99Ratio.toFixed(2)}x (p99 ${podCreate.imprimatur.p99.toFixed(2)} / ${podCreate.minimal.p99.toFixed(2)} ms; no webhook ${podCreate.none.p99.toFixed(2)} ms; ${podCreate.creates} creates each)`,
                    `p99 <= ${TARGET_POD_CREATE_P99}x`,
                    summary.verdicts.podCreate!,
                  ],
                ]
              : []),
          ]),
          ...(throughput ? [`throughput pinning: ${throughput.pinning}`] : []),
          ...(hitProfile
            ? [
                `attestation server's CPU profile: ${hitProfile.matching} of ${hitProfile.samples} samples in reviews ran signature checks, JMESPath or CEL` +
                  (hitProfile.functions.length > 0 ? ` (${hitProfile.functions.join(", ")})` : ""),
              ]
            : []),
          ...[throughput, attestations, reference].flatMap((t) =>
            t && t.generatorSaturated.length > 0 ? [`note: the load generator was near a full core while driving ${t.generatorSaturated.join(" and ")}`] : [],
          ),
          "",
          failures.length > 0 ? `FAILED (${failures.length}): ${failures.slice(0, 3).join("; ")}` : "every verification verified; counts as expected",
          "",
        ].join("\n"),
      );
    }
    return failures.length === 0 ? 0 : 1;
  } finally {
    unguard();
    await registry?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

interface PodCreateResult {
  /** Latency of a pod create, ms: with imprimatur's verifying policy, with the do-nothing webhook, with no webhook. */
  imprimatur: { p50: number; p99: number };
  minimal: { p50: number; p99: number };
  none: { p50: number; p99: number };
  /** imprimatur over the do-nothing webhook. */
  p50Ratio: number;
  p99Ratio: number;
  creates: number;
  ok: boolean;
  failures: string[];
}

/** What bench/pod-create-latency.ts --json reported, as imprimatur against the do-nothing webhook. */
function podCreateResult(json: string): PodCreateResult {
  const report = JSON.parse(json) as {
    ok: boolean;
    failures: string[];
    createsPerPath: number;
    paths: Record<"none" | "minimal" | "imprimatur", { latencyMs: { p50: number; p99: number } }>;
  };
  const at = (path: "none" | "minimal" | "imprimatur") => ({ p50: report.paths[path].latencyMs.p50, p99: report.paths[path].latencyMs.p99 });
  const [imprimatur, minimal] = [at("imprimatur"), at("minimal")];
  return {
    imprimatur,
    minimal,
    none: at("none"),
    p50Ratio: imprimatur.p50 / minimal.p50,
    p99Ratio: imprimatur.p99 / minimal.p99,
    creates: report.createsPerPath,
    ok: report.ok,
    failures: report.failures,
  };
}

/** Server CPU per admission of both servers, as admission-throughput measured it. */
function serverCost(t: { imprimaturMicrosPerRequest: number | undefined; baselineMicrosPerRequest: number | undefined }): string {
  const us = (n: number | undefined) => (n === undefined ? "n/a" : n.toFixed(0));
  return `server CPU ${us(t.imprimaturMicrosPerRequest)} / ${us(t.baselineMicrosPerRequest)} µs per admission`;
}

/** Runs a node script from the repository root; its stdout, or an error with its stderr. */
function runChild(args: string[], children: Array<ReturnType<typeof spawn>>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: new URL("..", import.meta.url), stdio: ["ignore", "pipe", "pipe"] });
    children.push(child);
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (err += c.toString()));
    child.on("close", (code) =>
      code === 0 || (code === 1 && out.trim().startsWith("{")) ? resolve(out) : reject(new Error(`${args[0]} exited ${code}: ${err.slice(-2000)}`)),
    );
  });
}

process.exitCode = await main();
