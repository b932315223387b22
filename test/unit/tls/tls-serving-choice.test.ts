// Which certificate a replica of self-managed TLS serves (tls-serving-choice.ts), and what a Secret made anew keeps
// (trustInPlace): single decisions, and a timeline in which the Secret is deleted while certificates are served,
// checked at every second for what makes it fail no admission — the certificate a replica serves is always signed by
// a CA of the caBundle it last read, and a new CA's certificate comes in only after that bundle is observed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { createCertificateAuthority, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";
import { contentsAfterStep, trustInPlace, type TlsSecretContents } from "../../../src/tls/tls-secret-contents.ts";
import {
  caCertificates,
  formatTrustedSince,
  issuerOf,
  planTlsStep,
  SECRET_KEYS,
  viewTlsSecret,
  type TlsRotationSettings,
} from "../../../src/tls/tls-rotation-plan.ts";
import {
  chooseServingCertificate,
  fingerprintsInEveryBundle,
  observeTrustedCas,
  servedUsable,
  type CertificateState,
} from "../../../src/tls/tls-serving-choice.ts";

const S = 1000;
const T0 = Date.UTC(2026, 0, 1);
const PROPAGATION = 5 * S;
const SETTINGS: TlsRotationSettings = {
  caValidityMs: 100 * S,
  caRenewBeforeMs: 40 * S,
  leafValidityMs: 30 * S,
  leafRenewBeforeMs: 10 * S,
  caBundlePropagationMs: PROPAGATION,
};
const HOSTS = ["imprimatur.imprimatur.svc"];

const state = (over: Partial<CertificateState> = {}): CertificateState => ({ notAfter: T0 + 100 * S, keyMatches: true, trustedSince: T0 - 60 * S, ...over });

test("a certificate whose CA some caBundle lacks is not served, however new", () => {
  const choice = chooseServingCertificate(state(), state({ trustedSince: undefined }), T0, PROPAGATION);
  assert.deepEqual(choice, { action: "keep", reason: "the CA that signed it is not in every webhook's caBundle yet" });
  // Not even when nothing is served yet (start-up): the replica waits, /readyz says why.
  assert.equal(chooseServingCertificate(undefined, state({ trustedSince: undefined }), T0, PROPAGATION).action, "keep");
  // Nor when the one served has expired.
  assert.equal(chooseServingCertificate(state({ notAfter: T0 - 1 }), state({ trustedSince: undefined }), T0, PROPAGATION).action, "keep");
});

test("a newly observed CA's certificate waits for the propagation time while the one served still works", () => {
  const seen = T0 - PROPAGATION + 1;
  assert.match((chooseServingCertificate(state(), state({ trustedSince: seen }), T0, PROPAGATION) as { reason: string }).reason, /for less than 5000 ms/);
  assert.deepEqual(chooseServingCertificate(state(), state({ trustedSince: T0 - PROPAGATION }), T0, PROPAGATION), { action: "serve" });
  // Nothing usable served: start-up, the one served expired, or its CA left the bundle — the trusted one comes in now.
  for (const served of [undefined, state({ notAfter: T0 }), state({ trustedSince: undefined })])
    assert.deepEqual(chooseServingCertificate(served, state({ trustedSince: seen }), T0, PROPAGATION), { action: "serve" });
});

test("no webhook publishes a caBundle: the Secret's certificate is served at once", () => {
  assert.deepEqual(chooseServingCertificate(state(), state({ trustedSince: -Infinity }), T0, PROPAGATION), { action: "serve" });
});

test("a certificate that cannot work is never served", () => {
  assert.deepEqual(chooseServingCertificate(state(), state({ keyMatches: false }), T0, PROPAGATION), {
    action: "keep",
    reason: "the key does not belong to the certificate",
  });
  assert.deepEqual(chooseServingCertificate(undefined, state({ notAfter: T0 }), T0, PROPAGATION), { action: "keep", reason: "the certificate has expired" });
});

test("servedUsable: valid and trusted", () => {
  assert.equal(servedUsable(state(), T0), true);
  assert.equal(servedUsable(undefined, T0), false);
  assert.equal(servedUsable(state({ notAfter: T0 }), T0), false);
  assert.equal(servedUsable(state({ trustedSince: undefined }), T0), false);
});

test("observed CAs: a CA keeps the time it was first in every bundle, and starts again after it left", () => {
  const first = observeTrustedCas(new Map(), ["a", "b"], T0);
  const second = observeTrustedCas(first, ["a", "c"], T0 + S);
  assert.deepEqual(
    [...second],
    [
      ["a", T0],
      ["c", T0 + S],
    ],
  );
  assert.deepEqual(
    [...observeTrustedCas(second, ["a", "b"], T0 + 2 * S)],
    [
      ["a", T0],
      ["b", T0 + 2 * S],
    ],
  );
  assert.deepEqual(fingerprintsInEveryBundle([["a", "b"], ["b", "c"], ["b"]]), new Set(["b"]));
  assert.deepEqual(fingerprintsInEveryBundle([["a"], []]), new Set());
  assert.equal(fingerprintsInEveryBundle([]), undefined);
});

test("trustInPlace keeps the unexpired CAs of every caBundle and the served certificate one of them signed", async () => {
  const a = await createCertificateAuthority("ca-a", { now: T0, validityMs: 100 * S });
  const b = await createCertificateAuthority("ca-b", { now: T0, validityMs: 100 * S });
  const old = await createCertificateAuthority("ca-old", { now: T0 - 100 * S, validityMs: 110 * S });
  const leafA = await issueCertificate(a, { commonName: "w", dnsNames: ["x"], now: T0, notAfter: T0 + 30 * S });
  const leafB = await issueCertificate(b, { commonName: "w", dnsNames: ["x"], now: T0, notAfter: T0 + 30 * S });
  const now = T0 + 20 * S; // "old" has expired
  const kept = trustInPlace([a.certPem + b.certPem + old.certPem + leafA.certPem, a.certPem + old.certPem], { cert: leafA.certPem, key: leafA.keyPem }, now);
  assert.deepEqual(
    kept.cas.map((c) => c.fingerprint),
    caCertificates(a.certPem).map((c) => c.fingerprint),
    "only A: B is not in every bundle, the old CA expired, a leaf is no CA",
  );
  assert.deepEqual(kept.leaf, { certPem: leafA.certPem, keyPem: leafA.keyPem });
  assert.equal(trustInPlace([a.certPem], { cert: leafB.certPem, key: leafB.keyPem }, now).leaf, undefined, "a certificate of a CA not kept is not kept");
  assert.equal(trustInPlace([a.certPem], { cert: leafA.certPem, key: leafB.keyPem }, now).leaf, undefined, "nor one whose key does not match");
  assert.equal(trustInPlace([a.certPem], { cert: leafA.certPem, key: leafA.keyPem }, T0 + 30 * S).leaf, undefined, "nor an expired one");
  assert.deepEqual(trustInPlace([], undefined, now), { cas: [], leaf: undefined });
});

/**
 * One leader and one follower over a timeline, every second: the follower reads the Secret and the caBundle; the
 * leader takes steps until it waits (publishing to one webhook), then reads them; each chooses with
 * tls-serving-choice.ts, as the manager does. The check is the apiservers': the certificate each replica serves is
 * signed by a CA of the caBundle now and of the one of PROPAGATION - 1 s ago (an apiserver that has not caught up).
 * At `deleteAt` the Secret is deleted. Returns what broke the promise, and the CAs served.
 */
async function deletedSecretTimeline(deleteAt: number, until: number) {
  let contents: TlsSecretContents | undefined;
  let bundle = "";
  const bundles: string[] = [];
  const problems: string[] = [];
  const replicas = ["follower", "leader"].map((name) => ({
    name,
    served: undefined as { cert: string; key: string } | undefined,
    trusted: new Map<string, number>(),
  }));
  const servedCas = new Set<string>();
  const choose = (replica: (typeof replicas)[number], now: number) => {
    if (contents === undefined) return;
    const observed = caCertificates(bundle);
    replica.trusted = observeTrustedCas(
      replica.trusted,
      observed.map((c) => c.fingerprint),
      now,
    );
    const judge = (c: { cert: string; key: string }): CertificateState => {
      const issuer = issuerOf(new X509Certificate(c.cert), observed);
      return {
        notAfter: new X509Certificate(c.cert).validToDate.getTime(),
        keyMatches: true,
        trustedSince: issuer === undefined ? undefined : replica.trusted.get(issuer),
      };
    };
    const candidate = { cert: contents.data[SECRET_KEYS.cert]!, key: contents.data[SECRET_KEYS.key]! };
    if (replica.served?.cert === candidate.cert) return;
    if (chooseServingCertificate(replica.served && judge(replica.served), judge(candidate), now, PROPAGATION).action === "serve") replica.served = candidate;
  };
  for (let now = T0; now <= until; now += S) {
    if (now === deleteAt) contents = undefined;
    choose(replicas[0]!, now);
    for (let i = 0; i < 8; i++) {
      const view = contents && viewTlsSecret(contents.data, formatTrustedSince(contents.trustedSince));
      const s = planTlsStep({ secret: view, webhookBundles: [caCertificates(bundle).map((c) => c.fingerprint)], hosts: HOSTS, now, settings: SETTINGS });
      if (s.action === "wait") break;
      const current = contents ?? { data: {}, trustedSince: {} };
      const r = await contentsAfterStep(s, current, view, {
        now,
        settings: SETTINGS,
        hosts: HOSTS,
        ...(s.action === "create" ? { inPlace: trustInPlace([bundle], replicas[1]!.served, now) } : {}),
      });
      if ("publish" in r) bundle = r.publish;
      else contents = r.write;
    }
    choose(replicas[1]!, now);
    bundles.push(bundle);
    const lagging = bundles[Math.max(0, bundles.length - PROPAGATION / S)]!;
    for (const replica of replicas) {
      if (replica.served === undefined) continue; // not ready yet: serves nothing
      const cert = new X509Certificate(replica.served.cert);
      const issuers = [bundle, lagging].map((b) => issuerOf(cert, caCertificates(b)));
      if (issuers.some((i) => i === undefined))
        problems.push(`${(now - T0) / S} s: ${replica.name} serves a certificate that a caBundle apiservers use does not trust`);
      else servedCas.add(issuers[0]!);
    }
  }
  return { problems, servedCas };
}

test("the Secret deleted mid-life: every replica keeps serving a trusted certificate, and moves to the new CA after its bundle", async () => {
  const { problems, servedCas } = await deletedSecretTimeline(T0 + 17 * S, T0 + 60 * S);
  assert.deepEqual(problems, []);
  assert.equal(servedCas.size, 2, "the replicas moved from the first CA to the one made after the deletion");
});
