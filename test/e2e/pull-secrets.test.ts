// PullSecretReader against a real kube-apiserver + etcd: pull secrets made with kubectl (docker-registry,
// legacy dockercfg, Opaque), a service account's imagePullSecrets, the order the credentials come in, what
// becomes a problem and what an error (403 for an identity without RBAC, an unreachable API), and the cache.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, test } from "node:test";
import { pino } from "pino";
import type { Logger } from "pino";
import { loadKubeClient } from "../../src/kube/kube-connection.ts";
import { PullSecretReader } from "../../src/kube/pull-secrets.ts";
import type { PullSecretReaderOptions } from "../../src/kube/pull-secrets.ts";
import { startKubeCluster } from "../support/kube-cluster.ts";
import type { KubeCluster } from "../support/kube-cluster.ts";
import { freePort } from "../support/ports.ts";
import { teardown } from "../support/teardown.ts";

const NS = "e2e-pull";
const b64 = (s: string): string => Buffer.from(s, "utf8").toString("base64");
// Every password here; none may appear in a log line, a problem or an error.
const PASSWORDS = ["pod-pw-1", "legacy-pw-2", "sa-pw-3", "wild-pw-4", "bad-entry-pw-5", "cache-pw-6", "default-pw-7"];

/** A pino logger whose output the test can read. */
function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      callback();
    },
  });
  return { logger: pino({ level: "debug" }, sink), lines };
}

function assertNoPassword(text: string): void {
  for (const password of PASSWORDS) assert.ok(!text.includes(password), `a password leaked into: ${text}`);
}

/** A manifest as JSON (valid YAML), for kubectl apply. */
function secretManifest(name: string, type: string, data: Record<string, string>, namespace = NS): string {
  const encoded = Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)]));
  return JSON.stringify({ apiVersion: "v1", kind: "Secret", metadata: { name, namespace }, type, data: encoded });
}

describe("pull secrets from the Kubernetes API", () => {
  let cluster: KubeCluster;

  async function kubectl(...args: string[]): Promise<string> {
    const result = await cluster.kubectl(args);
    assert.equal(result.code, 0, `kubectl ${args.join(" ")} failed: ${result.stderr}`);
    return result.stdout;
  }

  async function apply(manifest: string): Promise<void> {
    const result = await cluster.apply(manifest);
    assert.equal(result.code, 0, `kubectl apply failed: ${result.stderr}`);
  }

  function reader(opts: PullSecretReaderOptions = {}, kubeconfig = cluster.kubeconfig): PullSecretReader {
    return new PullSecretReader(loadKubeClient(kubeconfig), opts);
  }

  /** A kubeconfig for a new service account `name` in NS (a token from the TokenRequest API): no RBAC rights at all. */
  async function serviceAccountKubeconfig(name: string): Promise<string> {
    await kubectl("create", "serviceaccount", name, "-n", NS);
    // The harness's kubectl (1.20) has no `create token`; the TokenRequest API is what that command calls.
    const request = JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3600 } });
    const created = await cluster.kubectl(["create", "--raw", `/api/v1/namespaces/${NS}/serviceaccounts/${name}/token`, "-f", "-"], { input: request });
    assert.equal(created.code, 0, `TokenRequest for ${name} failed: ${created.stderr}`);
    const token = (JSON.parse(created.stdout) as { status?: { token?: string } }).status?.token ?? "";
    assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/, "a JWT");
    const admin = readFileSync(cluster.kubeconfig, "utf8");
    assert.match(admin, /token: ".*"/, "the harness kubeconfig authenticates with a token");
    const path = join(cluster.dir, `${name}.kubeconfig`);
    writeFileSync(path, admin.replace(/token: ".*"/, `token: ${JSON.stringify(token)}`), { mode: 0o600 });
    return path;
  }

  before(async () => {
    cluster = await startKubeCluster();
    await kubectl("create", "namespace", NS);
    // What `kubectl create secret docker-registry` writes: kubernetes.io/dockerconfigjson with "auth" and username/password.
    await kubectl(
      "create",
      "secret",
      "docker-registry",
      "pod-json",
      "-n",
      NS,
      "--docker-server=registry.example.com",
      "--docker-username=pod-user",
      "--docker-password=pod-pw-1",
    );
    // The legacy type, as older tooling made it.
    await apply(
      secretManifest("legacy-cfg", "kubernetes.io/dockercfg", {
        ".dockercfg": JSON.stringify({ "https://registry.example.com/v1/": { auth: b64("legacy-user:legacy-pw-2"), email: "x@example.com" } }),
      }),
    );
    await apply(
      secretManifest("sa-json", "kubernetes.io/dockerconfigjson", {
        ".dockerconfigjson": JSON.stringify({
          auths: { "registry.example.com": { username: "sa-user", password: "sa-pw-3" }, "*.example.com": { auth: b64("wild-user:wild-pw-4") } },
        }),
      }),
    );
    // The API checks that a dockerconfigjson secret is JSON, not what its entries hold.
    await apply(
      secretManifest("bad-entry", "kubernetes.io/dockerconfigjson", {
        ".dockerconfigjson": JSON.stringify({
          auths: { "broken.test": { auth: "bad-entry-pw-5 is not base64" }, "fine.test": { username: "fine-user", password: "fine-pw" } },
        }),
      }),
    );
    await apply(
      secretManifest("opaque", "Opaque", {
        ".dockerconfigjson": JSON.stringify({ auths: { "registry.example.com": { username: "opaque-user", password: "opaque-pw" } } }),
      }),
    );
    await apply(
      JSON.stringify({
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "builder", namespace: NS },
        // pod-json is the pod's too: it must be used once, in the pod's place.
        imagePullSecrets: [{ name: "legacy-cfg" }, { name: "sa-json" }, { name: "sa-missing" }, { name: "pod-json" }],
      }),
    );
  });

  after(() => teardown([() => cluster?.stop()]));

  test("the pod's secrets come first, then the service account's; missing and non-pull secrets are problems", async () => {
    const { logger, lines } = capturingLogger();
    const credentials = await reader({ logger }).credentialsFor({
      namespace: NS,
      imagePullSecrets: [{ name: "pod-json" }, { name: "missing" }, { name: "opaque" }, {}, { name: "pod-json" }],
      serviceAccountName: "builder",
    });

    const users = (host: string, repository: string) => credentials.lookup(host, repository).map((c) => `${c.source} ${c.username}:${c.password}`);
    assert.deepEqual(users("registry.example.com", "team/app"), [
      `secret ${NS}/pod-json pod-user:pod-pw-1`,
      // The service account's keyring: both hold the host key (in the account's order), then the wildcard.
      `secret ${NS}/legacy-cfg legacy-user:legacy-pw-2`,
      `secret ${NS}/sa-json sa-user:sa-pw-3`,
      `secret ${NS}/sa-json wild-user:wild-pw-4`,
    ]);
    assert.deepEqual(users("mirror.example.com", "team/app"), [`secret ${NS}/sa-json wild-user:wild-pw-4`]);
    assert.deepEqual(users("registry.example.com:5000", "team/app"), [], "a port must match");
    assert.deepEqual(users("docker.io", "library/nginx"), []);

    assert.deepEqual(credentials.sources, [`secret ${NS}/pod-json`, `secret ${NS}/legacy-cfg`, `secret ${NS}/sa-json`]);
    assert.deepEqual(credentials.problems, [
      `secret ${NS}/missing not found`,
      `secret ${NS}/opaque has type Opaque, not a pull secret`,
      `secret ${NS}/sa-missing not found`,
    ]);
    assert.ok(lines.length > 0, "reads are logged at debug level");
    assertNoPassword(lines.join("\n"));
  });

  test("a malformed entry is a problem naming the secret and key; the secret's other entries are used", async () => {
    const credentials = await reader().credentialsFor({ namespace: NS, imagePullSecrets: [{ name: "bad-entry" }], serviceAccountName: "builder" });
    assert.deepEqual(credentials.problems, [`secret ${NS}/bad-entry: entry "broken.test": auth is not valid base64`, `secret ${NS}/sa-missing not found`]);
    assert.deepEqual(
      credentials.lookup("fine.test", "app").map((c) => [c.source, c.username]),
      [[`secret ${NS}/bad-entry`, "fine-user"]],
    );
    assert.equal(credentials.sources[0], `secret ${NS}/bad-entry`);
    assertNoPassword(credentials.problems.join("\n"));
  });

  test('without serviceAccountName the "default" account is read; its absence is a problem', async () => {
    // No controller-manager runs here, so no namespace has a "default" service account until one is made.
    await kubectl("create", "namespace", "e2e-default-sa");
    const before = await reader().credentialsFor({ namespace: "e2e-default-sa" });
    assert.deepEqual(before.problems, ["service account e2e-default-sa/default not found"]);
    assert.deepEqual(before.sources, []);
    assert.deepEqual(before.lookup("registry.example.com", "app"), []);

    await apply(
      secretManifest(
        "default-pull",
        "kubernetes.io/dockerconfigjson",
        { ".dockerconfigjson": JSON.stringify({ auths: { "registry.example.com": { auth: b64("default-user:default-pw-7") } } }) },
        "e2e-default-sa",
      ),
    );
    await apply(
      JSON.stringify({
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "default", namespace: "e2e-default-sa" },
        imagePullSecrets: [{ name: "default-pull" }],
      }),
    );
    const after = await reader().credentialsFor({ namespace: "e2e-default-sa", serviceAccountName: "" });
    assert.deepEqual(after.problems, []);
    assert.deepEqual(
      after.lookup("registry.example.com", "app").map((c) => c.username),
      ["default-user"],
    );
  });

  test("reads are cached for the TTL and shared by concurrent callers", async () => {
    await apply(
      secretManifest("cached", "kubernetes.io/dockerconfigjson", {
        ".dockerconfigjson": JSON.stringify({ auths: { "registry.example.com": { username: "cache-user", password: "cache-pw-6" } } }),
      }),
    );
    let clock = 1_000_000;
    const cachedReader = reader({ ttlMs: 10_000, now: () => clock });
    const refs = { namespace: NS, imagePullSecrets: [{ name: "cached" }], serviceAccountName: "builder" };
    const users = (c: { lookup: (h: string, r: string) => Array<{ username?: string }> }) => c.lookup("registry.example.com", "app").map((x) => x.username);

    assert.equal(cachedReader.credentialsKnown(refs), undefined, "nothing read yet: not known without a read");
    const concurrent = await Promise.all(Array.from({ length: 5 }, () => cachedReader.credentialsFor(refs)));
    // One GET per object: the account, "cached", and the account's four secrets (pod-json among them).
    assert.equal(cachedReader.apiReads, 6, "five concurrent callers share one read per object");
    // The same reads give the same answer, known without a read: one lookup function, whose identity is hashed once.
    assert.ok(concurrent.every((c) => c === concurrent[0]));
    assert.equal(cachedReader.credentialsKnown(refs), concurrent[0]);
    assert.equal(
      cachedReader.credentialsKnown({ ...refs, imagePullSecrets: [{ name: "cached" }, { name: "never-read" }] }),
      undefined,
      "a secret not read yet",
    );
    const known = cachedReader.credentialsKnown({ ...refs, imagePullSecrets: [{ name: "pod-json" }] });
    assert.ok(known && known !== concurrent[0], "every read at hand (the account's secret), and its own answer");
    assert.deepEqual(users(known)[0], "pod-user");
    // The account's keyring holds "registry.example.com" from three secrets (in the account's order), then "*.example.com".
    for (const c of concurrent) assert.deepEqual(users(c), ["cache-user", "legacy-user", "sa-user", "pod-user", "wild-user"]);

    await kubectl("delete", "secret", "cached", "-n", NS);
    clock += 9_999;
    const cached = await cachedReader.credentialsFor(refs);
    assert.equal(cachedReader.apiReads, 6, "within the TTL nothing is read again");
    assert.deepEqual(users(cached)[0], "cache-user", "the deleted secret is still served from the cache");

    assert.equal(cachedReader.credentialsKnown(refs), cached);
    clock += 1;
    assert.equal(cachedReader.credentialsKnown(refs), undefined, "past the TTL the reads are not at hand: the deleted secret is not served");
    const expired = await cachedReader.credentialsFor(refs);
    assert.equal(cachedReader.apiReads, 12, "after the TTL every object is read again");
    assert.ok(expired.problems.includes(`secret ${NS}/cached not found`), JSON.stringify(expired.problems));
    assert.deepEqual(users(expired), ["legacy-user", "sa-user", "pod-user", "wild-user"]);

    // A not-found answer is cached too.
    await cachedReader.credentialsFor(refs);
    assert.equal(cachedReader.apiReads, 12);
    assert.equal(cachedReader.credentialsKnown(refs), expired, "known again once read, with what the reads say now");
    assert.notEqual(expired, cached);
  });

  test("an identity without RBAC gets an error naming the permission it lacks", async () => {
    const nobody = reader({}, await serviceAccountKubeconfig("reader-nobody"));
    await assert.rejects(nobody.credentialsFor({ namespace: NS, serviceAccountName: "builder" }), (err: Error) => {
      assert.match(err.message, new RegExp(`^cannot read service account ${NS}/builder from the Kubernetes API at https://127\\.0\\.0\\.1:\\d+: HTTP 403: `));
      assert.match(err.message, /cannot get resource "serviceaccounts"/);
      assert.match(err.message, new RegExp(`needs RBAC permission "get" on serviceaccounts in namespace ${NS}$`));
      return true;
    });

    // Allowed to read service accounts but not secrets: the secret read fails.
    const kubeconfig = await serviceAccountKubeconfig("reader-accounts");
    await kubectl("create", "role", "read-accounts", "-n", NS, "--verb=get", "--resource=serviceaccounts");
    await kubectl("create", "rolebinding", "read-accounts", "-n", NS, "--role=read-accounts", `--serviceaccount=${NS}:reader-accounts`);
    const accountsOnly = reader({}, kubeconfig);
    await assert.rejects(accountsOnly.credentialsFor({ namespace: NS, serviceAccountName: "builder" }), (err: Error) => {
      assert.match(err.message, new RegExp(`^cannot read secret ${NS}/[\\w-]+ from the Kubernetes API at .*: HTTP 403: .*cannot get resource "secrets"`));
      assert.match(err.message, new RegExp(`needs RBAC permission "get" on secrets in namespace ${NS}$`));
      assertNoPassword(err.message);
      return true;
    });
  });

  test("an unreachable API is an error, not an empty result; a failure is not cached", async () => {
    const port = await freePort(); // nothing listens there
    const path = join(cluster.dir, "unreachable.kubeconfig");
    writeFileSync(path, readFileSync(cluster.kubeconfig, "utf8").replace(cluster.url, `https://127.0.0.1:${port}`), { mode: 0o600 });
    const unreachable = reader({}, path);
    const refs = { namespace: NS, serviceAccountName: "builder" }; // one object to read
    for (let attempt = 1; attempt <= 2; attempt++) {
      await assert.rejects(unreachable.credentialsFor(refs), (err: Error) => {
        assert.match(
          err.message,
          new RegExp(`^cannot read service account ${NS}/builder from the Kubernetes API at https://127\\.0\\.0\\.1:${port}: .*(ECONNREFUSED|fetch failed)`),
        );
        return true;
      });
    }
    assert.equal(unreachable.apiReads, 2, "the failed read was tried again on the second call");
  });

  test("a caller's aborted signal ends its wait at once", async () => {
    const controller = new AbortController();
    controller.abort(new Error("admission deadline passed"));
    await assert.rejects(reader().credentialsFor({ namespace: NS, serviceAccountName: "builder" }, controller.signal), {
      message: `gave up waiting for service account ${NS}/builder from the Kubernetes API: admission deadline passed`,
    });
  });
});
