// `imprimatur serve --workers 2` as an operator runs it, against a real docker-registry 2.8 (TLS, htpasswd) holding a
// key-signed image: every worker answers reviews on the one port; an image verified by one worker is not verified
// again by another within the cache's life (the registry is asked once); a policy change, a renewed certificate and
// a drain reach every worker; a worker that dies is started again; /metrics are every process's.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { after, before, test } from "node:test";
import { stringify } from "yaml";
import { podReview } from "../support/admission.ts";
import { getText, postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";
import { ensureServingCertificate } from "../../src/tls/tls-bootstrap.ts";

let dir: string;
let registry: TestRegistry;
let server: ImprimaturProcess;
let image: string;
let release: SigningKey;
const layouts = new TestLayouts();
/** Each pair from its own CA; the client trusts both. */
let pairs: Array<{ cert: string; key: string; ca: string }>;

const policyFile = () => join(dir, "policies", "signed.yaml");
const policy = (key: SigningKey) =>
  stringify({
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "signed" },
    spec: {
      rules: [
        {
          action: "allow",
          images: [`${registry.host}/*`],
          attestors: [{ entries: [{ staticKey: { name: "release", ignoreTlog: true, key: key.publicKeyPem } }] }],
        },
      ],
      default: "deny",
    },
  });

/** Admission answers, each over a new connection, so that the workers share them out. */
async function review(count: number): Promise<Array<{ allowed: boolean; message: string }>> {
  const ca = pairs.map((p) => p.ca).join("");
  const answers = [];
  for (let i = 0; i < count; i++) {
    const r = await postJson(`${server.baseUrl}/validate`, ca, podReview({ images: [image] }));
    assert.equal(r.status, 200, r.text);
    answers.push({ allowed: r.body.response.allowed as boolean, message: (r.body.response.status?.message as string | undefined) ?? "" });
  }
  return answers;
}

/** The pids of the processes that logged `msg` (JSON log lines), and how often each did. */
async function loggedBy(msg: string): Promise<Map<number, number>> {
  const counts = new Map<number, number>();
  for (const line of (await server.log()).split("\n")) {
    if (!line.startsWith("{")) continue;
    const entry = JSON.parse(line) as { pid: number; msg?: string };
    if (entry.msg === msg) counts.set(entry.pid, (counts.get(entry.pid) ?? 0) + 1);
  }
  return counts;
}

function metric(text: string, line: RegExp): number {
  return Number(line.exec(text)?.[1] ?? NaN);
}

/** The certificate a new connection is served (its fingerprint), trusting both CAs. */
function servedFingerprint(): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port: server.port, ca: pairs.map((p) => p.ca), servername: "localhost" }, () => {
      resolve(socket.getPeerX509Certificate()?.fingerprint256 ?? "");
      socket.end();
    });
    socket.on("error", reject);
  });
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-serve-workers-"));
  release = generateSigningKey("ecdsa-p256");
  registry = await startRegistry({ auth: "htpasswd" });
  const pushed = await layouts.push(registry, "team/app", "1.0", { seed: "serve-workers" });
  await pushCosignSignatures({ registry, repository: "team/app", digest: pushed.digest, signers: [{ key: release }] });
  image = `${registry.host}/team/app@${pushed.digest}`;
  await writeFile(
    join(dir, "registries.yaml"),
    stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "RegistryConfig", registries: registry.configEntries() }),
  );
  await mkdir(join(dir, "policies"));
  await writeFile(policyFile(), policy(release));
  pairs = [];
  for (const name of ["a", "b"]) {
    const m = await ensureServingCertificate(join(dir, `tls-${name}`), ["localhost", "127.0.0.1"]);
    pairs.push({ cert: m.certPem, key: m.keyPem, ca: m.caCertPem });
  }
  await writeFile(join(dir, "tls.crt"), pairs[0]!.cert);
  await writeFile(join(dir, "tls.key"), pairs[0]!.key);
  // The harness trusts the state folder's ca.crt: here both CAs, as the certificate is given, not generated.
  const stateDir = join(dir, "state");
  await mkdir(stateDir);
  await writeFile(join(stateDir, "ca.crt"), pairs.map((p) => p.ca).join(""));
  // Plain admissions are logged at debug: which process answered each is in its log line.
  process.env.IMPRIMATUR_LOG_LEVEL = "debug";
  server = await startImprimatur(
    [
      "--workers",
      "2",
      "--policies",
      join(dir, "policies"),
      "--registries",
      join(dir, "registries.yaml"),
      "--authfile",
      registry.authFile,
      "--tls-cert",
      join(dir, "tls.crt"),
      "--tls-key",
      join(dir, "tls.key"),
      "--drain",
      "3s",
    ],
    { stateDir },
  ).finally(() => delete process.env.IMPRIMATUR_LOG_LEVEL);
});

after(() => teardown([() => server?.stop(), () => registry?.stop(), () => rm(dir, { recursive: true, force: true })]));

/** Waits until `check` holds (polled), or its time is up. */
async function until(check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
}

test("every worker answers on the one port, and the image is verified once across them", async () => {
  await until(async () => (await loggedBy("serving")).size === 3, 5_000);
  assert.equal((await loggedBy("serving")).size, 3, "the primary and two workers each log that they serve");
  const answers = await review(30);
  assert.ok(
    answers.every((a) => a.allowed),
    JSON.stringify(answers.find((a) => !a.allowed)),
  );
  // Routine log lines are written within a second, not at once.
  await until(async () => (await loggedBy("signatures verified")).size > 0 && (await loggedBy("admitted")).size === 2, 5_000);
  const judgedBy = await loggedBy("signatures verified");
  assert.equal(
    [...judgedBy.values()].reduce((a, b) => a + b, 0),
    1,
    "one verification in all the processes",
  );
  // Plain admissions are logged at debug (the server runs with IMPRIMATUR_LOG_LEVEL=debug here).
  const decisions = await loggedBy("admitted");
  assert.equal(decisions.size, 2, `both workers answered: ${JSON.stringify([...decisions])}`);
  assert.ok(!decisions.has(server.pid), "the primary answers no review");
  // Every process's metrics, on either worker's /metrics.
  const metrics = (await getText(`${server.baseUrl}/metrics`, pairs.map((p) => p.ca).join(""))).text;
  assert.equal(metric(metrics, /^imprimatur_signature_verifications_seconds_count\{outcome="verified"\} (\d+)/m), 1);
  assert.ok(metric(metrics, /^imprimatur_decisions_total\{endpoint="validate",outcome="allowed"\} (\d+)/m) >= 30);
});

test("a policy change reaches every worker", async () => {
  const stranger = generateSigningKey("ecdsa-p256");
  await writeFile(policyFile(), policy(stranger));
  // The primary reloads on the folder's change, then every worker: three processes say so.
  await until(async () => (await loggedBy("policies reloaded")).size === 3);
  assert.equal((await loggedBy("policies reloaded")).size, 3, await server.log());
  const answers = await review(20);
  assert.ok(
    answers.every((a) => !a.allowed && /no signature by this key/.test(a.message)),
    JSON.stringify(answers.find((a) => a.allowed || !/no signature by this key/.test(a.message))),
  );
  await writeFile(policyFile(), policy(release));
  await until(async () => (await loggedBy("policies reloaded")).size === 3 && (await review(4)).every((a) => a.allowed));
});

test("a renewed certificate reaches every worker", async () => {
  const before = new Set(await Promise.all(Array.from({ length: 6 }, () => servedFingerprint())));
  assert.equal(before.size, 1);
  await writeFile(join(dir, "tls.crt"), pairs[1]!.cert);
  await writeFile(join(dir, "tls.key"), pairs[1]!.key);
  const deadline = Date.now() + 20_000;
  let seen = new Set<string>();
  while (Date.now() < deadline) {
    seen = new Set(await Promise.all(Array.from({ length: 8 }, () => servedFingerprint())));
    if (seen.size === 1 && !before.has([...seen][0]!)) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(seen.size, 1, "every new connection, whichever worker takes it, gets the renewed certificate");
  assert.ok(!before.has([...seen][0]!));
});

test("a worker that dies is started again, and serving goes on", async () => {
  const workers = [...(await loggedBy("serving")).keys()].filter((pid) => pid !== server.pid);
  process.kill(workers[0]!, "SIGKILL");
  const deadline = Date.now() + 20_000;
  while ((await loggedBy("serving")).size < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.equal((await loggedBy("serving")).size, 4, "a third worker started");
  assert.ok((await review(10)).every((a) => a.allowed));
  assert.match(await server.log(), /a worker exited; starting another/);
});

test("draining reaches every worker: not ready at once, answering meanwhile, then every process exits", async () => {
  const ca = pairs.map((p) => p.ca).join("");
  const workers = [...(await loggedBy("serving")).keys()].filter((pid) => pid !== server.pid);
  const readyz = async () => (await getText(`${server.baseUrl}/readyz`, ca)).status;
  process.kill(server.pid, "SIGTERM");
  // The workers hear of it from the primary a moment after the signal: from the first 503 on, none may say ready.
  const first = Date.now() + 1_000;
  while ((await readyz()) !== 503 && Date.now() < first) await new Promise((r) => setTimeout(r, 10));
  const statuses = new Set<number>();
  const deadline = Date.now() + 1_000;
  while (Date.now() < deadline) {
    statuses.add(await readyz());
    assert.ok((await review(1))[0]!.allowed, "answers go on while draining");
  }
  assert.deepEqual([...statuses], [503], "no worker says it is ready while draining");
  const gone = Date.now() + 20_000;
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  while ([server.pid, ...workers].some(alive) && Date.now() < gone) await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual([server.pid, ...workers].filter(alive), []);
  assert.match(await readFile(server.logPath, "utf8"), /shutting down/);
});
