// Imprimatur's self-managed TLS seen from outside, the way an operator sees it with kubectl: the Secret's ca.crt and
// tls.crt and the caBundle of every webhook, read together; and the certificate each replica actually serves.
//
// watchTls() polls them while a test runs, keeps every change, and checks at each read what docs/tls.md promises
// of a rotation: a CA never leaves ca.crt or a caBundle before it expires (so a restarted replica cannot have
// replaced it), and the Secret's serving certificate is always signed by a CA that every caBundle holds.
// Expiry is judged on this machine's clock, which the cluster's pods share.
import { X509Certificate } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { KubeCluster } from "./kube-cluster.ts";
import type { SmallCluster } from "./small-cluster.ts";

/** What reading the Secret and the configurations needs: kubectl on any cluster (the small one, or a bare apiserver). */
export type KubectlCluster = Pick<KubeCluster, "kubectl">;

export interface CaSeen {
  /** SHA-256 fingerprint, as X509Certificate.fingerprint256 writes it. */
  fingerprint: string;
  notAfter: number;
  pem: string;
}

export interface TlsSnapshot {
  /** When the read had completed (ms since the epoch). */
  at: number;
  /** The Secret's ca.crt, newest first. */
  cas: CaSeen[];
  /** The Secret's tls.crt, and the CA of ca.crt that signed it (undefined: none of them). */
  leaf: { fingerprint: string; issuer: string | undefined; notAfter: number } | undefined;
  /** Each webhook's caBundle, as fingerprints, by "Kind/webhook-name". */
  bundles: Record<string, string[]>;
}

export interface TlsTarget {
  /** "NAMESPACE/NAME" of the Secret. */
  secret: string;
  /** Name of the Validating- and MutatingWebhookConfiguration. */
  configuration: string;
}

function certificates(pem: string): X509Certificate[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? []).map((block) => new X509Certificate(block));
}

/** The fingerprint of the CA among `cas` that signed `cert`, if any. */
export function issuerOf(cert: X509Certificate, cas: CaSeen[]): string | undefined {
  for (const ca of cas) {
    const x = new X509Certificate(ca.pem);
    if (cert.checkIssued(x) && cert.verify(x.publicKey)) return ca.fingerprint;
  }
  return undefined;
}

/** One read of the Secret and both webhook configurations (a single kubectl call). */
export async function readTlsSnapshot(cluster: KubectlCluster, target: TlsTarget): Promise<TlsSnapshot> {
  const [namespace, name] = target.secret.split("/") as [string, string];
  const got = await cluster.kubectl([
    "get",
    "-n",
    namespace,
    `secret/${name}`,
    `validatingwebhookconfiguration/${target.configuration}`,
    `mutatingwebhookconfiguration/${target.configuration}`,
    "-o",
    "json",
  ]);
  if (got.code !== 0) throw new Error(`reading the TLS Secret and the webhook configurations: ${got.stderr}`);
  const at = Date.now();
  type Item = {
    kind: string;
    data?: Record<string, string>;
    webhooks?: Array<{ name: string; clientConfig?: { caBundle?: string } }>;
  };
  const items = (JSON.parse(got.stdout) as { items: Item[] }).items;
  const decode = (b64: string | undefined) => Buffer.from(b64 ?? "", "base64").toString("utf8");
  const secret = items.find((i) => i.kind === "Secret");
  const cas = certificates(decode(secret?.data?.["ca.crt"])).map((x) => ({
    fingerprint: x.fingerprint256,
    notAfter: x.validToDate.getTime(),
    pem: x.toString(),
  }));
  const leafCert = certificates(decode(secret?.data?.["tls.crt"]))[0];
  const leaf = leafCert && { fingerprint: leafCert.fingerprint256, issuer: issuerOf(leafCert, cas), notAfter: leafCert.validToDate.getTime() };
  const bundles: Record<string, string[]> = {};
  for (const item of items) {
    for (const webhook of item.webhooks ?? []) {
      bundles[`${item.kind}/${webhook.name}`] = certificates(decode(webhook.clientConfig?.caBundle)).map((x) => x.fingerprint256);
    }
  }
  return { at, cas, leaf, bundles };
}

/** What `next` breaks of the rotation's promises, given the read before it. */
export function rotationViolations(prev: TlsSnapshot | undefined, next: TlsSnapshot): string[] {
  const out: string[] = [];
  const short = (f: string) => f.slice(0, 17);
  if (prev) {
    const unexpired = prev.cas.filter((ca) => ca.notAfter > next.at);
    for (const ca of unexpired) {
      if (!next.cas.some((c) => c.fingerprint === ca.fingerprint)) out.push(`ca.crt lost CA ${short(ca.fingerprint)} before it expired`);
    }
    for (const [webhook, bundle] of Object.entries(next.bundles)) {
      for (const fingerprint of prev.bundles[webhook] ?? []) {
        const ca = prev.cas.find((c) => c.fingerprint === fingerprint);
        if (ca && ca.notAfter > next.at && !bundle.includes(fingerprint)) out.push(`${webhook}'s caBundle lost CA ${short(fingerprint)} before it expired`);
      }
    }
  }
  if (next.leaf === undefined) out.push("the Secret holds no serving certificate");
  else if (next.leaf.issuer === undefined) out.push("the Secret's serving certificate is signed by no CA of ca.crt");
  else {
    for (const [webhook, bundle] of Object.entries(next.bundles)) {
      if (!bundle.includes(next.leaf.issuer)) out.push(`the serving certificate's CA ${short(next.leaf.issuer)} is not in ${webhook}'s caBundle`);
    }
  }
  return out;
}

function sameState(a: TlsSnapshot, b: TlsSnapshot): boolean {
  const key = (s: TlsSnapshot) => JSON.stringify([s.cas.map((c) => c.fingerprint), s.leaf?.fingerprint, s.bundles]);
  return key(a) === key(b);
}

export interface TlsWatch {
  /** Every distinct state read, in order (the first read included). */
  readonly changes: TlsSnapshot[];
  /** Each broken promise, with when it was seen. */
  readonly violations: string[];
  /**
   * Waits for a state, among those recorded after index `after`, that `pred` accepts; returns it and its index.
   * Throws after `timeoutMs`, naming `what` and the states seen.
   */
  waitFor(what: string, pred: (s: TlsSnapshot) => boolean, opts?: { after?: number; timeoutMs?: number }): Promise<{ snapshot: TlsSnapshot; index: number }>;
  /** Stops polling; resolves once the last read is done. */
  stop(): Promise<void>;
}

export function watchTls(cluster: KubectlCluster, target: TlsTarget, opts: { intervalMs?: number } = {}): TlsWatch {
  const changes: TlsSnapshot[] = [];
  const violations: string[] = [];
  let last: TlsSnapshot | undefined;
  let lastReadError = "";
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const next = await readTlsSnapshot(cluster, target);
        for (const v of rotationViolations(last, next)) violations.push(`${new Date(next.at).toISOString()}: ${v}`);
        if (last === undefined || !sameState(last, next)) changes.push(next);
        last = next;
      } catch (err) {
        // A read that failed (a busy apiserver) is skipped: the next one compares with the last good one.
        lastReadError = (err as Error).message;
      }
      await sleep(opts.intervalMs ?? 500);
    }
  })();
  const describe = () =>
    changes
      .map(
        (s) =>
          `${new Date(s.at).toISOString()} ca.crt=[${s.cas.map((c) => c.fingerprint.slice(0, 8)).join(",")}] leaf=${s.leaf?.fingerprint.slice(0, 8)}` +
          ` by ${s.leaf?.issuer?.slice(0, 8)} bundles=${JSON.stringify(Object.values(s.bundles).map((b) => b.map((f) => f.slice(0, 8))))}`,
      )
      .join("\n");
  return {
    changes,
    violations,
    async waitFor(what, pred, o = {}) {
      const deadline = Date.now() + (o.timeoutMs ?? 180_000);
      for (;;) {
        for (let i = (o.after ?? -1) + 1; i < changes.length; i++) {
          if (pred(changes[i]!)) return { snapshot: changes[i]!, index: i };
        }
        if (Date.now() > deadline) throw new Error(`never saw ${what}; states seen:\n${describe()}${lastReadError && `\nlast failed read: ${lastReadError}`}`);
        await sleep(200);
      }
    },
    async stop() {
      running = false;
      await loop;
    },
  };
}

// Run inside the cluster's network namespace with node: connects to each HOST:PORT given, with the Service's name
// as SNI, and prints the certificate it presented (no verification: which certificate it is is the question).
const PEER_CERTIFICATE_SCRIPT = `
const tls = require("node:tls");
const [servername, ...targets] = process.argv.slice(1);
Promise.all(targets.map((target) => new Promise((resolve) => {
  const [host, port] = target.split(":");
  const socket = tls.connect({ host, port: Number(port), servername, rejectUnauthorized: false }, () => {
    resolve({ target, pem: socket.getPeerX509Certificate().toString() });
    socket.end();
  });
  socket.setTimeout(10000, () => socket.destroy(new Error("timed out")));
  socket.on("error", (err) => resolve({ target, error: err.message }));
}))).then((results) => console.log(JSON.stringify(results)));
`;

/** The certificate each of `targets` ("IP:PORT", inside the cluster) serves now, or why it could not be read. */
export async function servedCertificates(
  cluster: SmallCluster,
  servername: string,
  targets: string[],
): Promise<Array<{ target: string; cert?: X509Certificate; error?: string }>> {
  const out = await cluster.exec(process.execPath, ["-e", PEER_CERTIFICATE_SCRIPT, servername, ...targets], { timeoutMs: 30_000 });
  if (out.code !== 0) throw new Error(`reading the served certificates: ${out.stderr}`);
  const results = JSON.parse(out.stdout) as Array<{ target: string; pem?: string; error?: string }>;
  return results.map((r) => (r.pem ? { target: r.target, cert: new X509Certificate(r.pem) } : { target: r.target, error: r.error ?? "no certificate" }));
}
