// The rotation planner and the contents each step makes, on real certificates issued at chosen times: single
// decisions, and whole timelines (two CA lifetimes) checked at every second for what makes a rotation fail no
// admission — the served certificate's CA is always in every webhook's caBundle, and was put there at least the
// propagation time before the certificate was served.
import { test } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { createCertificateAuthority, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";
import { contentsAfterStep, type TlsSecretContents } from "../../../src/tls/tls-secret-contents.ts";
import {
  bundleFingerprints,
  DEFAULT_TLS_ROTATION,
  formatTrustedSince,
  parseRotationTimeline,
  parseTrustedSince,
  planTlsStep,
  rotationSettingsProblem,
  SECRET_KEYS,
  viewTlsSecret,
  type TlsRotationSettings,
  type TlsStep,
} from "../../../src/tls/tls-rotation-plan.ts";

const S = 1000;
const T0 = Date.UTC(2026, 0, 1);
const SETTINGS: TlsRotationSettings = {
  caValidityMs: 100 * S,
  caRenewBeforeMs: 40 * S,
  leafValidityMs: 30 * S,
  leafRenewBeforeMs: 10 * S,
  caBundlePropagationMs: 5 * S,
};
const HOSTS = ["imprimatur.imprimatur.svc"];

function view(contents: TlsSecretContents) {
  return viewTlsSecret(contents.data, formatTrustedSince(contents.trustedSince));
}

function plan(contents: TlsSecretContents | undefined, webhookBundles: string[][], now: number, hosts = HOSTS): TlsStep {
  return planTlsStep({ secret: contents ? view(contents) : undefined, webhookBundles, hosts, now, settings: SETTINGS });
}

async function step(contents: TlsSecretContents | undefined, s: TlsStep, now: number) {
  assert.notEqual(s.action, "wait");
  const current = contents ?? { data: {}, trustedSince: {} };
  return contentsAfterStep(s as Exclude<TlsStep, { action: "wait" }>, current, viewTlsSecret(current.data, formatTrustedSince(current.trustedSince)), {
    now,
    settings: SETTINGS,
    hosts: HOSTS,
  });
}

async function written(contents: TlsSecretContents | undefined, s: TlsStep, now: number): Promise<TlsSecretContents> {
  const r = await step(contents, s, now);
  assert.ok("write" in r, `${s.action} writes the Secret`);
  return r.write;
}

const caFingerprints = (c: TlsSecretContents) => bundleFingerprints(c.data[SECRET_KEYS.caCert]!);

/** A Secret as the leader leaves it after bootstrapping at `now`: CA, leaf, bundle published and recorded. */
async function bootstrapped(now: number): Promise<{ contents: TlsSecretContents; webhooks: string[][] }> {
  let contents = await written(undefined, { action: "create", reason: "test" }, now);
  const webhooks = [caFingerprints(contents), caFingerprints(contents)];
  contents = { ...contents, trustedSince: { [caFingerprints(contents)[0]!]: now } };
  return { contents, webhooks };
}

test("no Secret: create a CA and a serving certificate together", async () => {
  assert.deepEqual(plan(undefined, [], T0), { action: "create", reason: "no CA yet" });
  const contents = await written(undefined, { action: "create", reason: "no CA yet" }, T0);
  const v = view(contents)!;
  assert.equal(v.cas.length, 1);
  assert.equal(v.caKeyMatches, true);
  assert.equal(v.leaf!.issuer, v.cas[0]!.fingerprint);
  assert.equal(v.leaf!.keyMatches, true);
  assert.ok(v.leaf!.dnsNames.includes("imprimatur.imprimatur.svc") && v.leaf!.dnsNames.includes("localhost"));
  assert.ok(v.leaf!.ipAddresses.includes("127.0.0.1"));
  assert.equal(v.cas[0]!.notAfter, T0 + SETTINGS.caValidityMs);
  assert.equal(v.leaf!.notAfter, T0 + SETTINGS.leafValidityMs);
});

test("a fresh Secret is published to the webhooks, recorded as trusted, then nothing is due until the leaf's renewal", async () => {
  const contents = await written(undefined, { action: "create", reason: "" }, T0);
  // The configurations exist with no caBundle yet (as installed): publish.
  assert.equal(plan(contents, [[], []], T0).action, "publish-ca-bundle");
  const published = await step(contents, { action: "publish-ca-bundle", reason: "" }, T0);
  assert.ok("publish" in published);
  assert.deepEqual(bundleFingerprints(published.publish), caFingerprints(contents));
  const bundles = [caFingerprints(contents), caFingerprints(contents)];
  assert.deepEqual(plan(contents, bundles, T0), { action: "record-trusted", fingerprints: caFingerprints(contents) });
  const recorded = await written(contents, { action: "record-trusted", fingerprints: caFingerprints(contents) }, T0);
  assert.deepEqual(recorded.trustedSince, { [caFingerprints(contents)[0]!]: T0 });
  assert.deepEqual(plan(recorded, bundles, T0 + S), { action: "wait", until: T0 + SETTINGS.leafValidityMs - SETTINGS.leafRenewBeforeMs });
});

test("no webhook configuration installed: nothing to publish, the CA is recorded as trusted", async () => {
  const contents = await written(undefined, { action: "create", reason: "" }, T0);
  assert.equal(plan(contents, [], T0).action, "record-trusted");
});

test("a caBundle edited by someone else (or stale after a restore) is written again", async () => {
  const { contents, webhooks } = await bootstrapped(T0);
  const other = await createCertificateAuthority("someone else", { now: T0 });
  assert.equal(plan(contents, [webhooks[0]!, bundleFingerprints(other.certPem)], T0 + S).action, "publish-ca-bundle");
  assert.equal(plan(contents, [webhooks[0]!, [...webhooks[0]!, ...bundleFingerprints(other.certPem)]], T0 + S).action, "publish-ca-bundle");
  assert.equal(plan(contents, [webhooks[0]!, []], T0 + S).action, "publish-ca-bundle");
});

test("a serving certificate due for renewal is re-issued by the same, trusted CA at once", async () => {
  const { contents, webhooks } = await bootstrapped(T0);
  const due = T0 + SETTINGS.leafValidityMs - SETTINGS.leafRenewBeforeMs;
  assert.equal(plan(contents, webhooks, due - 1).action, "wait");
  const s = plan(contents, webhooks, due);
  assert.deepEqual(s, { action: "issue-leaf", reason: "the serving certificate is due for renewal" });
  const next = await written(contents, s, due);
  const leaf = view(next)!.leaf!;
  assert.equal(leaf.notAfter, due + SETTINGS.leafValidityMs);
  assert.equal(next.data[SECRET_KEYS.caCert], contents.data[SECRET_KEYS.caCert], "the CA bundle is unchanged");
});

test("a CA due for renewal: the new CA joins the bundle first, the leaf switches only after propagation", async () => {
  const boot = await bootstrapped(T0);
  const webhooks = boot.webhooks;
  const oldCa = caFingerprints(boot.contents)[0]!;
  const due = T0 + SETTINGS.caValidityMs - SETTINGS.caRenewBeforeMs;
  // The serving certificate was last renewed 15 s before the CA became due: it is not due itself.
  const contents = await written(boot.contents, { action: "issue-leaf", reason: "" }, due - 15 * S);
  const s = plan(contents, webhooks, due);
  assert.deepEqual(s, { action: "add-ca", reason: "the newest CA is due for renewal" });
  const added = await written(contents, s, due);
  const fingerprints = caFingerprints(added);
  assert.equal(fingerprints.length, 2);
  assert.equal(fingerprints[1], oldCa, "the old CA stays, after the new one");
  assert.equal(added.data[SECRET_KEYS.cert], contents.data[SECRET_KEYS.cert], "the serving certificate is not switched yet");
  assert.equal(view(added)!.caKeyMatches, true, "the key is the new CA's");

  assert.equal(plan(added, webhooks, due).action, "publish-ca-bundle");
  const bundles = [fingerprints, fingerprints];
  assert.deepEqual(plan(added, bundles, due), { action: "record-trusted", fingerprints: [fingerprints[0]!] });
  const recorded = await written(added, { action: "record-trusted", fingerprints: [fingerprints[0]!] }, due);
  assert.deepEqual(plan(recorded, bundles, due + 1), { action: "wait", until: due + SETTINGS.caBundlePropagationMs });
  const switchAt = due + SETTINGS.caBundlePropagationMs;
  assert.deepEqual(plan(recorded, bundles, switchAt), { action: "issue-leaf", reason: "switching to the newest CA" });
  const switched = await written(recorded, plan(recorded, bundles, switchAt), switchAt);
  assert.equal(view(switched)!.leaf!.issuer, fingerprints[0]);
  // The old CA stays trusted until it expires, then leaves.
  const oldExpiry = T0 + SETTINGS.caValidityMs;
  assert.equal(plan(switched, bundles, switchAt + 1).action, "wait");
  assert.notEqual(plan(switched, bundles, oldExpiry - 1).action, "prune-cas");
  assert.deepEqual(plan(switched, bundles, oldExpiry), { action: "prune-cas", fingerprints: [oldCa] });
  const pruned = await written(switched, { action: "prune-cas", fingerprints: [oldCa] }, oldExpiry);
  assert.deepEqual(caFingerprints(pruned), [fingerprints[0]]);
  assert.deepEqual(Object.keys(pruned.trustedSince), [fingerprints[0]]);
  assert.equal(plan(pruned, bundles, oldExpiry).action, "publish-ca-bundle");
});

test("a leaf due while the new CA is not yet propagated waits for it rather than using an untrusted CA", async () => {
  const { contents, webhooks } = await bootstrapped(T0);
  const added = await written(contents, { action: "add-ca", reason: "" }, T0 + 25 * S);
  const bundles = [caFingerprints(added)];
  const recorded = await written(added, { action: "record-trusted", fingerprints: [caFingerprints(added)[0]!] }, T0 + 25 * S);
  void webhooks;
  // The first leaf is due at T0+20s; at T0+26s the new CA has been trusted for 1 s only.
  assert.deepEqual(plan(recorded, bundles, T0 + 26 * S), { action: "wait", until: T0 + 30 * S });
});

test("a serving certificate that cannot be served is replaced at once; one lacking a new name, once the CA is trusted", async () => {
  const { contents, webhooks } = await bootstrapped(T0);
  const cases: Array<[string, Record<string, string>, string]> = [
    ["no leaf", { ...contents.data, [SECRET_KEYS.cert]: "", [SECRET_KEYS.key]: "" }, "no serving certificate yet"],
    [
      "foreign key",
      { ...contents.data, [SECRET_KEYS.key]: (await createCertificateAuthority("x", { now: T0 })).keyPem },
      "the serving key does not belong to the serving certificate",
    ],
  ];
  const stranger = await createCertificateAuthority("stranger", { now: T0 });
  const strangersLeaf = await issueCertificate(stranger, { commonName: "x", dnsNames: HOSTS, ipAddresses: ["127.0.0.1", "::1"], now: T0 });
  cases.push([
    "another CA's leaf",
    { ...contents.data, [SECRET_KEYS.cert]: strangersLeaf.certPem, [SECRET_KEYS.key]: strangersLeaf.keyPem },
    "the serving certificate was not signed by a CA in the bundle",
  ]);
  for (const [name, data, reason] of cases) {
    assert.deepEqual(plan({ data, trustedSince: contents.trustedSince }, webhooks, T0 + S), { action: "issue-leaf", reason }, name);
  }
  // A host added to --tls-san: re-issued by the newest CA, once that CA has been trusted for the propagation time.
  assert.deepEqual(plan(contents, webhooks, T0 + S, [...HOSTS, "10.0.0.7"]), { action: "wait", until: T0 + SETTINGS.caBundlePropagationMs });
  assert.deepEqual(plan(contents, webhooks, T0 + SETTINGS.caBundlePropagationMs, [...HOSTS, "10.0.0.7"]), {
    action: "issue-leaf",
    reason: "the serving certificate does not cover 10.0.0.7",
  });
  // An expired one (the cluster was off).
  assert.equal(plan(contents, webhooks, T0 + SETTINGS.leafValidityMs).action, "issue-leaf");
});

test("a CA key that does not belong to the newest CA: a new CA is added, the others kept", async () => {
  const { contents, webhooks } = await bootstrapped(T0);
  const data = { ...contents.data, [SECRET_KEYS.caKey]: (await createCertificateAuthority("x", { now: T0 })).keyPem };
  assert.equal(plan({ data, trustedSince: contents.trustedSince }, webhooks, T0 + S).action, "add-ca");
  const data2 = { ...contents.data };
  delete data2[SECRET_KEYS.caKey];
  assert.equal(plan({ data: data2, trustedSince: contents.trustedSince }, webhooks, T0 + S).action, "add-ca");
});

test("a Secret whose ca.crt holds no CA certificate is created anew", async () => {
  const { contents } = await bootstrapped(T0);
  assert.equal(plan({ data: { ...contents.data, [SECRET_KEYS.caCert]: contents.data[SECRET_KEYS.cert]! }, trustedSince: {} }, [], T0).action, "create");
  assert.equal(plan({ data: { ...contents.data, [SECRET_KEYS.caCert]: "garbage" }, trustedSince: {} }, [], T0).action, "create");
});

test("whole timelines: at every second the served certificate's CA has been in every caBundle for the propagation time", async () => {
  // Leader state: the Secret and the two webhook configurations' bundles. Replicas serve the Secret's leaf.
  let contents: TlsSecretContents | undefined;
  let bundles: string[][] = [[], []];
  const enteredBundle = new Map<string, number>();
  let leafSwitches = 0;
  let caCreations = 0;
  let lastLeaf: string | undefined;
  for (let t = T0; t <= T0 + 260 * S; t += S) {
    for (let i = 0; i < 10; i++) {
      const s = plan(contents, bundles, t);
      if (s.action === "wait") {
        assert.ok(s.until > t, "a wait ends in the future");
        break;
      }
      if (s.action === "create" || s.action === "add-ca") caCreations++;
      const r = await step(contents, s, t);
      if ("publish" in r) {
        bundles = [bundleFingerprints(r.publish), bundleFingerprints(r.publish)];
        for (const f of bundles[0]!) if (!enteredBundle.has(f)) enteredBundle.set(f, t);
      } else contents = r.write;
      assert.notEqual(i, 9, "the plan settles within a few steps");
    }
    const leaf = view(contents!)!.leaf!;
    assert.ok(leaf.notBefore <= t && t < leaf.notAfter, "the served certificate is valid");
    const issuer = leaf.issuer!;
    for (const bundle of bundles) assert.ok(bundle.includes(issuer), `at +${(t - T0) / S}s the serving CA is in every caBundle`);
    const leafPem = contents!.data[SECRET_KEYS.cert]!;
    if (lastLeaf !== undefined && leafPem !== lastLeaf) {
      leafSwitches++;
      assert.ok(t - enteredBundle.get(issuer)! >= SETTINGS.caBundlePropagationMs, "the CA was trusted long enough before use");
    }
    lastLeaf = leafPem;
    // Expired CAs leave the bundle.
    for (const ca of view(contents!)!.cas) assert.ok(ca.notAfter > t);
  }
  assert.ok(caCreations >= 3, `CAs rotated (${caCreations} created)`);
  assert.ok(leafSwitches >= 8, `serving certificates rotated (${leafSwitches})`);
});

test("settings that would leave a gap are refused", () => {
  assert.equal(rotationSettingsProblem(DEFAULT_TLS_ROTATION), undefined);
  assert.equal(rotationSettingsProblem(SETTINGS), undefined);
  assert.match(rotationSettingsProblem({ ...SETTINGS, caRenewBeforeMs: 12 * S })!, /CA renewal margin must exceed/);
  assert.match(rotationSettingsProblem({ ...SETTINGS, leafRenewBeforeMs: 30 * S })!, /serving certificate's validity/);
  assert.match(rotationSettingsProblem({ ...SETTINGS, caRenewBeforeMs: 100 * S })!, /CA validity/);
  assert.match(rotationSettingsProblem({ ...SETTINGS, caBundlePropagationMs: -1 })!, /caBundlePropagationMs must be a non-negative duration/);
});

test("--tls-timeline parses shortened timelines and refuses bad ones", () => {
  assert.deepEqual(parseRotationTimeline("ca=100s/40s,cert=30s/10s,propagation=5s"), SETTINGS);
  assert.deepEqual(parseRotationTimeline("propagation=2s"), { ...DEFAULT_TLS_ROTATION, caBundlePropagationMs: 2 * S });
  assert.throws(() => parseRotationTimeline("ca=100s"), { name: "TlsError", code: "invalid-timeline", message: /expected ca=VALIDITY\/RENEW_BEFORE/ });
  assert.throws(() => parseRotationTimeline("cert=30x/10s"), { name: "TlsError", code: "invalid-timeline", message: /not a duration/ });
  assert.throws(() => parseRotationTimeline("ca=100s/40s,cert=60s/35s"), { name: "TlsError", code: "invalid-timeline", message: /CA renewal margin/ });
});

test("the trusted-since annotation: only well-formed entries for CAs in the bundle count", () => {
  const present = new Set(["a", "b"]);
  assert.deepEqual(parseTrustedSince(JSON.stringify({ a: new Date(T0).toISOString(), b: "yesterday", c: new Date(T0).toISOString() }), present), { a: T0 });
  assert.deepEqual(parseTrustedSince("not json", present), {});
  assert.deepEqual(parseTrustedSince("[1]", present), {});
  assert.deepEqual(parseTrustedSince(undefined, present), {});
  assert.deepEqual(parseTrustedSince(formatTrustedSince({ a: T0, b: T0 + 1 }), present), { a: T0, b: T0 + 1 });
});

test("bundles are compared by certificate, not by text", async () => {
  const ca = await createCertificateAuthority("x", { now: T0 });
  const fp = bundleFingerprints(ca.certPem);
  assert.equal(fp.length, 1);
  assert.deepEqual(bundleFingerprints(`\n\n${ca.certPem.replace(/\n/g, "\r\n")}junk`), fp);
  assert.equal(fp[0], new X509Certificate(ca.certPem).fingerprint256.replace(/:/g, "").toLowerCase());
});
