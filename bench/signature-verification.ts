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
//      ≤ 1.15×). It needs the Kubernetes binaries (scripts/provision-kube.sh);
//   9. Notary Project (Notation) signatures beside the cosign ones: round trips and time of a cold verification of
//      a new Notation-signed image (JWS and COSE envelopes by a test PKI's code-signing leaf, pushed as notation 1.x
//      does to a registry without the Referrers API: the referrers tag schema) under a rule with only a `notary`
//      entry; one envelope's verification alone (JWS, COSE, and JWS with an RFC 3161 timestamp verified against a
//      TSA root), no registry; a warm cache hit of that rule.
//
//   node bench/signature-verification.ts [--images 10] [--hits 20000] [--keyless 300] [--notation 8] [--envelopes 200]
//                                        [--seconds 6] [--pod-create] [--json]
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
import { leafAttestors, type NotaryAttestor } from "../src/core/image-policy/attestors.ts";
import { parseImageReference } from "../src/core/image-reference.ts";
import { verifyNotationSignature, type NotationTrust } from "../src/notation/notation-verification.ts";
import { parseTrustedRoot, type TrustRoot } from "../src/core/trust-root/trust-root-kind.ts";
import { parsePolicyText } from "../src/policy/load-policies.ts";
import { RegistryClient, type RoundTrip } from "../src/registry/registry-client.ts";
import { registrySettingsMap } from "../src/registry/registry-settings.ts";
import { ImageVerifier, type VerificationRequest } from "../src/verification/image-verifier.ts";
import { bundleToItem } from "../src/verification/signed-item.ts";
import { imageBinding, verifyItem } from "../src/verification/verify-entry.ts";
import { notationEnvelope, type EnvelopeFormat, type NotationSigner, type NotationSubject } from "../test/support/notation/notation-fixtures.ts";
import { pushNotationSignatures } from "../test/support/notation/notation-push.ts";
import { codeSigningChain } from "../test/support/notation/test-pki.ts";
import { createTestTsa, type TestTsa } from "../test/support/notation/test-tsa.ts";
import { buildImage, buildOciLayout } from "../test/support/oci-layout.ts";
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
  --notation N   new Notation-signed images verified one after the other, per envelope format (JWS, COSE) (default 8)
  --envelopes N  Notation envelope verifications timed, of each kind (JWS, COSE, JWS with a timestamp) (default 200)
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
  notation: number;
  envelopes: number;
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
      notation: { type: "string", default: "8" },
      envelopes: { type: "string", default: "200" },
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
    notation: numberOption("notation", values.notation, 2, 100),
    envelopes: numberOption("envelopes", values.envelopes, 10, 10_000),
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

/**
 * An image signed with one Notary Project signature, as notation 1.x leaves it on a registry without the Referrers
 * API: the signature manifest by digest and the referrers tag schema's index. The image is pushed over HTTP from its
 * blobs (no skopeo: a few milliseconds an image), so its descriptor is known without reading it back.
 */
async function pushNotationSigned(s: Setup, signer: NotationSigner, repository: string, tag: string, format: EnvelopeFormat): Promise<NotationSubject> {
  const image = buildImage({ seed: `${repository}:${tag}` });
  const subject: NotationSubject = { ...image.top };
  const target = { url: s.registry.url, caPem: s.registry.caPem, ...PUSHER };
  const manifest = image.blobs.find((b) => b.digest === subject.digest)!.bytes;
  const blobs = new Map(image.blobs.filter((b) => b.digest !== subject.digest).map((b) => [b.digest, b.bytes]));
  await pushArtifact(target, repository, { manifest, mediaType: subject.mediaType, blobs }, tag);
  await pushNotationSignatures(target, repository, subject, [notationEnvelope(subject, signer, format)]);
  return subject;
}

/** A JWS envelope over `subject` countersigned by `tsa`: the token in the unprotected header, over the signature's bytes. */
async function timestampedJws(subject: NotationSubject, signer: NotationSigner, tsa: TestTsa): Promise<Uint8Array> {
  const jws = JSON.parse(Buffer.from(notationEnvelope(subject, signer, "jws").body).toString()) as { signature: string; header: Record<string, unknown> };
  const token = await tsa.timestamp(Buffer.from(jws.signature, "base64url"));
  jws.header["io.cncf.notary.timestampSignature"] = Buffer.from(token).toString("base64");
  return Buffer.from(JSON.stringify(jws));
}

const NOTARY_IDENTITY = "x509.subject: C=US, ST=WA, O=Acme";

/** Allow the registry's images signed by a leaf of `caPem` with the Acme subject: one rule, one notary entry. */
function notaryPolicyDoc(host: string, caPem: string, tsaPem?: string): string {
  const notary = { name: "release", certs: caPem, trustedIdentities: [NOTARY_IDENTITY], ...(tsaPem ? { tsaCerts: tsaPem } : {}) };
  return stringify({
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "notation" },
    spec: { rules: [{ action: "allow", images: [`${host}/*`], attestors: [{ entries: [{ notary }] }] }], default: "deny" },
  });
}

/** What a notary entry with its stores in the policy trusts, as the verifier makes it of the entry (verify-notary-entry.ts). */
function notationTrustOf(leaf: NotaryAttestor): NotationTrust {
  const der = (store: NotaryAttestor["ca"]) => ("der" in store ? store.der : []);
  return {
    ca: der(leaf.ca),
    signingAuthority: der(leaf.signingAuthority),
    tsa: der(leaf.tsa),
    storeName: `the certificates of ${leaf.label}`,
    identities: leaf.identities,
    level: leaf.level,
    verifyTimestamp: leaf.verifyTimestamp,
  };
}

/** A round trip as the reports name it: what was asked (by the URL's shape) and the status. */
function tripLabel(trip: RoundTrip, imageDigest: string): string {
  const path = new URL(trip.url).pathname;
  const m = /^\/v2\/.+\/(manifests|blobs|referrers)\/([^/]+)$/.exec(path);
  let what: string;
  if (path === "/v2/") what = "ping";
  else if (!m) what = "token";
  else if (m[1] === "referrers") what = "Referrers API";
  else if (m[1] === "blobs") what = "blob";
  else if (m[2]!.endsWith(".sig") || m[2]!.endsWith(".att")) what = `cosign ${m[2]!.slice(-4)} tag`;
  else if (m[2] === imageDigest) what = "image manifest";
  else if (m[2]!.startsWith("sha256:")) what = "referrer manifest";
  else if (m[2] === imageDigest.replace(":", "-")) what = "referrers tag";
  else what = `manifest ${m[2]}`;
  return `${what} ${trip.status}`;
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
    const s: Setup = { registry, sigstore, key: generateSigningKey("ecdsa-p256"), root: { name: "bench", sigstore: parsedRoot }, dir };
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
    const cold: Array<{ trips: number; ms: number; asked: string[] }> = [];
    for (let i = 0; i < opts.images; i++) {
      const before = trips.length;
      const t0 = performance.now();
      const r = await verifier.verify(request(i), Date.now() + 10_000);
      cold.push({ trips: trips.length - before, ms: performance.now() - t0, asked: trips.slice(before).map((t) => tripLabel(t, digests[i]!)) });
      if (r.status !== "verified") failures.push(`image ${i}: ${r.status}: ${"reason" in r ? r.reason : ""}`);
    }
    const firstTrips = cold[0]!.trips;
    const laterTrips = cold.slice(1).map((c) => c.trips);
    const maxLater = laterTrips.length > 0 ? Math.max(...laterTrips) : firstTrips;
    const beforeOther = trips.length;
    const other = await verifier.verify(requestFor(`${registry.host}/bench/other:v0`, otherDigest), Date.now() + 10_000);
    if (other.status !== "verified") failures.push(`bench/other: ${other.status}`);
    const newRepositoryTrips = trips.length - beforeOther;
    const newRepositoryAsked = trips.slice(beforeOther).map((t) => tripLabel(t, otherDigest));

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

    // 9. Notation: cold verifications of new Notation-signed images, JWS and COSE in turn, on a fresh client and
    // verifier of their own (the first image pays the ping, the token and the Referrers API's 404), under a rule
    // whose only attestor is a notary entry; then cache hits of that rule.
    say(`Pushing ${2 * opts.notation} Notation-signed images (JWS, COSE) ...`);
    const pki = await codeSigningChain("C=US, ST=WA, L=Seattle, O=Acme, CN=Release");
    const signer: NotationSigner = { leaf: pki.leaf, chain: pki.chain };
    const formats: EnvelopeFormat[] = ["jws", "cose"];
    const notationImages: Array<{ tag: string; subject: NotationSubject; format: EnvelopeFormat }> = [];
    for (let i = 0; i < opts.notation; i++)
      for (const format of formats) {
        const tag = `${format}${i}`;
        notationImages.push({ tag, format, subject: await pushNotationSigned(s, signer, "bench/notation", tag, format) });
      }
    const notaryAttestors = parsePolicyText(notaryPolicyDoc(registry.host, pki.root.pem), "notation.yaml").policies.ImagePolicy[0]!.rules[0]!.attestors!;
    const notationTrips: RoundTrip[] = [];
    const notationClient = new RegistryClient({ settings: registrySettingsMap(registry.settings()), onRoundTrip: (t) => notationTrips.push(t) });
    const notationVerifier = new ImageVerifier({ client: notationClient, trustRoots: () => trustRoots });
    const notationRequest = (i: number): VerificationRequest => {
      const { tag, subject } = notationImages[i]!;
      const parsed = parseImageReference(`${registry!.host}/bench/notation:${tag}`);
      if (!parsed.ok) throw new Error(parsed.error);
      return { image: { ...parsed.ref, digest: subject.digest }, policy: "notation", rule: 0, attestors: notaryAttestors, lookup: () => [] };
    };
    const notationCold: Array<{ format: EnvelopeFormat; trips: number; ms: number; asked: string[] }> = [];
    for (let i = 0; i < notationImages.length; i++) {
      const before = notationTrips.length;
      const t0 = performance.now();
      const r = await notationVerifier.verify(notationRequest(i), Date.now() + 10_000);
      const ms = performance.now() - t0;
      const asked = notationTrips.slice(before).map((t) => tripLabel(t, notationImages[i]!.subject.digest));
      notationCold.push({ format: notationImages[i]!.format, trips: asked.length, ms, asked });
      if (r.status !== "verified") failures.push(`notation image ${notationImages[i]!.tag}: ${r.status}: ${"reason" in r ? r.reason : ""}`);
    }
    // The first image of each format is left out of the per-image figures: the first pays the new client's ping,
    // token and Referrers API 404, and each is the first run of its envelope reader (JIT).
    const notationLater = notationCold.slice(formats.length);
    const notationFirstTrips = notationCold[0]!.trips;
    const notationLaterTrips = notationLater.map((c) => c.trips);
    const notationMaxTrips = Math.max(...notationLaterTrips);
    const notationMedianOf = (format: EnvelopeFormat) => median(notationLater.filter((c) => c.format === format).map((c) => c.ms));
    const notationHitTimes: number[] = [];
    const notationHitRequest = notationRequest(0);
    const beforeNotationHits = notationVerifier.verifications;
    for (let i = 0; i < opts.hits; i++) {
      const t0 = performance.now();
      const r = await notationVerifier.verify(notationHitRequest, Date.now() + 10_000);
      notationHitTimes.push(performance.now() - t0);
      if (r.status !== "verified") {
        failures.push(`notation cache hit: ${r.status}`);
        break;
      }
    }
    const notationHitVerifications = notationVerifier.verifications - beforeNotationHits;
    if (notationHitVerifications !== 0)
      failures.push(`${notationHitTimes.length} repeat verifications of a Notation-signed image ran ${notationHitVerifications} verifications, not 0`);
    const notationHitMedian = median(notationHitTimes);
    await notationClient.close();

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
      const outcome = verifyItem(bundleToItem(bundle.bytes, "bench", undefined), keylessEntry, {
        trustRoot: s.root.sigstore,
        binding: imageBinding(digests[0]!),
      });
      keylessTimes.push(performance.now() - t0);
      if (!outcome.ok) {
        failures.push(`keyless: ${outcome.reason}`);
        break;
      }
    }
    const keylessMedian = median(keylessTimes.slice(Math.floor(keylessTimes.length / 10))); // after JIT warm-up

    // 9. Notation envelopes, the verifier alone (verifyNotationSignature): as the entry of the policy above trusts
    // them, and with the entry's TSA root for the timestamped JWS (its countersignature is then verified).
    const tsa = await createTestTsa();
    const envelopeSubject = notationImages[0]!.subject;
    const notaryLeaf = leafAttestors(notaryAttestors)[0] as NotaryAttestor;
    const tsaLeaf = leafAttestors(
      parsePolicyText(notaryPolicyDoc(registry.host, pki.root.pem, tsa.root.pem), "notation-tsa.yaml").policies.ImagePolicy[0]!.rules[0]!.attestors!,
    )[0] as NotaryAttestor;
    const envelopeKinds = [
      { kind: "jws", mediaType: "application/jose+json", body: notationEnvelope(envelopeSubject, signer, "jws").body, trust: notationTrustOf(notaryLeaf) },
      { kind: "cose", mediaType: "application/cose", body: notationEnvelope(envelopeSubject, signer, "cose").body, trust: notationTrustOf(notaryLeaf) },
      { kind: "jwsTimestamped", mediaType: "application/jose+json", body: await timestampedJws(envelopeSubject, signer, tsa), trust: notationTrustOf(tsaLeaf) },
    ] as const;
    const envelopeMedians: Record<(typeof envelopeKinds)[number]["kind"], number> = { jws: NaN, cose: NaN, jwsTimestamped: NaN };
    for (const { kind, mediaType, body, trust } of envelopeKinds) {
      const times: number[] = [];
      for (let i = 0; i < opts.envelopes; i++) {
        const t0 = performance.now();
        const outcome = await verifyNotationSignature(body, mediaType, envelopeSubject, trust);
        times.push(performance.now() - t0);
        if (!outcome.ok || (kind === "jwsTimestamped" && !outcome.signedAt)) {
          failures.push(`notation envelope ${kind}: ${outcome.ok ? "no timestamp verified" : outcome.reason}`);
          break;
        }
      }
      envelopeMedians[kind] = median(times.slice(Math.floor(times.length / 10))); // after JIT warm-up
    }

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
        firstImageAsked: cold[0]!.asked,
        newImageAsked: cold[cold.length > 1 ? 1 : 0]!.asked,
        newRepositoryAsked,
      },
      notation: {
        images: notationCold.length,
        firstImageRoundTrips: notationFirstTrips,
        newImageRoundTrips: notationLaterTrips,
        maxNewImageRoundTrips: notationMaxTrips,
        firstImageAsked: notationCold[0]!.asked,
        newImageAsked: notationLater[0]!.asked,
        medianMs: { jws: notationMedianOf("jws"), cose: notationMedianOf("cose") },
        firstMs: { jws: notationCold[0]!.ms, cose: notationCold[1]!.ms },
        envelopes: { verifications: opts.envelopes, medianMs: envelopeMedians },
        cacheHit: {
          hits: notationHitTimes.length,
          verifications: notationHitVerifications,
          medianMs: notationHitMedian,
          p99Ms: percentile(Float64Array.from(notationHitTimes).sort(), 99),
        },
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
            ["round trips, first Notation-signed image on a new client", String(notationFirstTrips), "", ""],
            ["round trips per new Notation-signed image", `${notationMaxTrips} (max of ${notationLaterTrips.length}; key-signed ${maxLater})`, "", ""],
            [
              "cold verification of a new Notation-signed image, median: JWS, COSE",
              `${ms(summary.notation.medianMs.jws)}, ${ms(summary.notation.medianMs.cose)} (key-signed ${ms(summary.cold.medianMs)})`,
              "",
              "",
            ],
            [
              "Notation envelope (verifier alone), median: JWS, COSE, JWS + RFC 3161",
              `${ms(envelopeMedians.jws)}, ${ms(envelopeMedians.cose)}, ${ms(envelopeMedians.jwsTimestamped)}`,
              "",
              "",
            ],
            [`cache hit of a notary rule, median of ${notationHitTimes.length}`, `${ms(notationHitMedian)} (key-signed ${ms(hitMedian)})`, "", ""],
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
          `a new key-signed image asked: ${summary.cold.newImageAsked.join(", ")}`,
          `a new Notation-signed image asked: ${summary.notation.newImageAsked.join(", ")}`,
          `the first Notation-signed image on a new client asked: ${summary.notation.firstImageAsked.join(", ")}`,
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
