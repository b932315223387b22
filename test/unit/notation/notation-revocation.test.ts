// Revocation of a Notary Project signing chain (src/notation/notation-revocation.ts) against real revocation services:
// an OCSP responder that is OpenSSL's own (`openssl ocsp`, per request) and a CRL distribution point serving CRLs
// the issuer signed (test/support/notation/revocation-services.ts), reached through the product's HTTP fetcher
// (src/verification/revocation-fetcher.ts) over loopback, as a server reaches them. What an answer says (good,
// revoked, unknown), which source wins (OCSP first, then the CRL), what does not count (a tampered signature, an
// answer about another certificate, one out of date, a service that is down), and how an entry's `revocation`
// setting turns it into a denial, a logged line, or nothing asked at all.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { BasicOCSPResponse, OCSPResponse } from "@peculiar/asn1-ocsp";
import { AsnConvert, OctetString } from "@peculiar/asn1-schema";
import { readChain } from "../../../src/notation/notation-certificates.ts";
import { checkChainRevocation, type RevocationFetcher } from "../../../src/notation/notation-revocation.ts";
import { verifyNotationSignature, type NotationTrust, type RevocationMode } from "../../../src/notation/notation-verification.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { HttpRevocationFetcher } from "../../../src/verification/revocation-fetcher.ts";
import { notationPayload, signJwsEnvelope } from "../../support/notation/jws-signer.ts";
import { startRevocationServices, type RevocationServices } from "../../support/notation/revocation-services.ts";
import { createRoot, issue, signingAlgorithmOf, toWebCrypto, type TestCertificate } from "../../support/notation/test-pki.ts";
import * as x509 from "@peculiar/x509";

let root: TestCertificate;
let ca: TestCertificate;
let services: RevocationServices;
let delegated: RevocationServices;
let caServices: RevocationServices;
let fetcher: HttpRevocationFetcher;
const fetchers: HttpRevocationFetcher[] = [];

/** A fetcher allowed to reach the test services on loopback (a registries file listing their hosts). */
function loopbackFetcher(): HttpRevocationFetcher {
  const hosts = [services, delegated, caServices].flatMap((s) => [new URL(s.ocspUrl).host, new URL(s.crlUrl).host]);
  const made = new HttpRevocationFetcher({ registries: registrySettingsMap(hosts.map((host) => ({ host, allowLocalAddresses: true }))) });
  fetchers.push(made);
  return made;
}

let serial = 0;
/** A code-signing leaf of `ca`, naming the given OCSP responders and CRLs. */
async function leafNaming(s: { ocsp?: RevocationServices[]; crl?: RevocationServices[] }): Promise<TestCertificate> {
  const leaf = await issue(ca, {
    subject: `C=US, ST=WA, O=Acme, CN=Release ${++serial}`,
    ...(s.ocsp ? { ocspUrls: s.ocsp.map((x) => x.ocspUrl) } : {}),
    ...(s.crl ? { crlUrls: s.crl.map((x) => x.crlUrl) } : {}),
  });
  await Promise.all([...new Set([...(s.ocsp ?? []), ...(s.crl ?? [])])].map((x) => x.register(leaf)));
  return leaf;
}

const chainOf = (leaf: TestCertificate) => readChain([leaf.der, ca.der, root.der]);
const now = () => new Date();

before(async () => {
  root = await createRoot({ subject: "C=US, ST=WA, O=Acme, CN=Acme Root" });
  caServices = await startRevocationServices(root);
  ca = await issue(root, {
    subject: "C=US, ST=WA, O=Acme, CN=Acme Signing CA",
    isCa: true,
    basicConstraints: { ca: true, pathLength: 0 },
    ocspUrls: [caServices.ocspUrl],
  });
  await caServices.register(ca);
  services = await startRevocationServices(ca);
  delegated = await startRevocationServices(ca, { responder: "delegated" });
  fetcher = loopbackFetcher();
});

after(async () => {
  await Promise.all(fetchers.map((f) => f.close()));
  await Promise.all([services?.stop(), delegated?.stop(), caServices?.stop()]);
});

describe("by OCSP first, then the CRL", () => {
  test("a certificate the responder knows as good is good, by one OCSP request and no CRL", async () => {
    const leaf = await leafNaming({ ocsp: [services], crl: [services] });
    const before = services.requests();
    assert.deepEqual(await checkChainRevocation(chainOf(leaf), fetcher, now()), { status: "good" });
    assert.equal(services.requests().ocsp - before.ocsp, 1);
    assert.equal(services.requests().crl - before.crl, 0);
  });

  test("a revoked leaf is revoked: since when, why, and who said so", async () => {
    const leaf = await leafNaming({ ocsp: [services], crl: [services] });
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
    await services.revoke(leaf, { at, reason: 1 });
    const status = await checkChainRevocation(chainOf(leaf), loopbackFetcher(), now());
    assert.equal(status.status, "revoked");
    assert.equal(
      (status as { reason: string }).reason,
      `certificate 0 (C=US, ST=WA, O=Acme, CN=Release ${serial}) is revoked since ${at.toISOString()}, reason keyCompromise (OCSP ${services.ocspUrl})`,
    );
  });

  test("a delegated responder (issued by the CA, OCSPSigning, ocsp-nocheck) is believed", async () => {
    const leaf = await leafNaming({ ocsp: [delegated] });
    assert.deepEqual(await checkChainRevocation(chainOf(leaf), fetcher, now()), { status: "good" });
    await delegated.revoke(leaf, { reason: 4 });
    const status = await checkChainRevocation(chainOf(leaf), loopbackFetcher(), now());
    assert.match((status as { reason: string }).reason, /is revoked since .*, reason superseded \(OCSP /);
  });

  test("with the responder down (503, or the connection reset), the CRL decides: revoked, or good", async () => {
    for (const how of ["503", "reset"] as const) {
      const revoked = await leafNaming({ ocsp: [services], crl: [services] });
      const good = await leafNaming({ ocsp: [services], crl: [services] });
      await services.revoke(revoked, { reason: 5 });
      services.setOcspDown(true, how);
      try {
        const f = loopbackFetcher();
        const status = await checkChainRevocation(chainOf(revoked), f, now());
        assert.match((status as { reason: string }).reason, new RegExp(`reason cessationOfOperation \\(CRL ${services.crlUrl}\\)$`), how);
        assert.deepEqual(await checkChainRevocation(chainOf(good), f, now()), { status: "good" }, how);
      } finally {
        services.setOcspDown(false);
      }
    }
  });

  test("a certificate the responder does not know is judged by the CRL", async () => {
    const stranger = await issue(ca, { subject: "C=US, ST=WA, O=Acme, CN=Never registered", ocspUrls: [services.ocspUrl], crlUrls: [services.crlUrl] });
    assert.deepEqual(await checkChainRevocation(chainOf(stranger), fetcher, now()), { status: "good" });
    const unknownOnly = await issue(ca, { subject: "C=US, ST=WA, O=Acme, CN=Never registered either", ocspUrls: [services.ocspUrl] });
    const status = await checkChainRevocation(chainOf(unknownOnly), fetcher, now());
    assert.equal(status.status, "unknown");
    assert.match(
      (status as { reason: string }).reason,
      /could not be told: OCSP http:\/\/127\.0\.0\.1:\d+\/ocsp: the responder does not know the certificate$/,
    );
  });

  test("nothing answers: unknown, saying what each source said", async () => {
    const leaf = await leafNaming({ ocsp: [services], crl: [services] });
    services.setOcspDown(true);
    services.setCrlDown(true);
    try {
      const status = await checkChainRevocation(chainOf(leaf), loopbackFetcher(), now());
      assert.equal(status.status, "unknown");
      assert.match(
        (status as { reason: string }).reason,
        /^the revocation status of certificate 0 \(.*\) could not be told: OCSP http:\/\/[^ ]+: HTTP 503; CRL http:\/\/[^ ]+: HTTP 503$/,
      );
    } finally {
      services.setOcspDown(false);
      services.setCrlDown(false);
    }
  });

  test("a certificate that names no responder and no CRL cannot be revoked: good, nothing asked", async () => {
    const leaf = await leafNaming({});
    let asked = 0;
    const counting: RevocationFetcher = {
      ocsp: async () => {
        asked++;
        throw new Error("not expected");
      },
      crl: async () => {
        asked++;
        throw new Error("not expected");
      },
    };
    // The intermediate names the root's responder: only it is asked about.
    const status = await checkChainRevocation(
      chainOf(leaf),
      { ...counting, ocsp: (url, body) => (url === caServices.ocspUrl ? fetcher.ocsp(url, body) : counting.ocsp(url, body)) },
      now(),
    );
    assert.deepEqual(status, { status: "good" });
    assert.equal(asked, 0);
  });

  test("a revoked intermediate revokes the chain", async () => {
    const other = await issue(root, {
      subject: "C=US, ST=WA, O=Acme, CN=Retired CA",
      isCa: true,
      basicConstraints: { ca: true, pathLength: 0 },
      ocspUrls: [caServices.ocspUrl],
    });
    await caServices.register(other);
    const leaf = await issue(other, { subject: "C=US, ST=WA, O=Acme, CN=Old Release" });
    await caServices.revoke(other, { reason: 2 });
    const status = await checkChainRevocation(readChain([leaf.der, other.der, root.der]), loopbackFetcher(), now());
    assert.match((status as { reason: string }).reason, /^certificate 1 \(C=US, ST=WA, O=Acme, CN=Retired CA\) is revoked since .*, reason cACompromise/);
  });
});

describe("answers that do not count", () => {
  test("an OCSP answer with a tampered signature, or about another certificate, leaves the status unknown", async () => {
    const leaf = await leafNaming({ ocsp: [services] });
    const other = await leafNaming({ ocsp: [services] });
    const tampered: RevocationFetcher = {
      ocsp: async (url, body) => {
        // The genuine answer with one bit of its signature flipped.
        const response = AsnConvert.parse(await fetcher.ocsp(url, body), OCSPResponse);
        const basic = AsnConvert.parse(response.responseBytes!.response.buffer, BasicOCSPResponse);
        const signature = new Uint8Array(basic.signature.slice(0));
        signature[signature.length - 1]! ^= 0x01;
        basic.signature = signature.buffer;
        response.responseBytes!.response = new OctetString(AsnConvert.serialize(basic));
        return new Uint8Array(AsnConvert.serialize(response));
      },
      crl: (url) => fetcher.crl(url),
    };
    const withCa = (f: RevocationFetcher): RevocationFetcher => ({
      ...f,
      ocsp: (url, body) => (url === caServices.ocspUrl ? fetcher.ocsp(url, body) : f.ocsp(url, body)),
    });
    const forged = await checkChainRevocation(chainOf(leaf), withCa(tampered), now());
    assert.match((forged as { reason: string }).reason, /OCSP [^ ]+: the response's signature does not verify with the issuer's key$/);

    // The responder's genuine answer about `other`, handed back for `leaf`.
    const { ocspRequestFor } = await import("../../../src/notation/notation-revocation.ts");
    const otherChain = chainOf(other);
    const aboutOther = await fetcher.ocsp(services.ocspUrl, ocspRequestFor(otherChain.parsed[0]!, otherChain.parsed[1]!));
    const swapped = await checkChainRevocation(chainOf(leaf), withCa({ ocsp: async () => aboutOther, crl: (url) => fetcher.crl(url) }), now());
    assert.match((swapped as { reason: string }).reason, /OCSP [^ ]+: the response does not name the certificate$/);
  });

  test("answers out of date are not used: at a time past the OCSP answer's and the CRL's next update, the status is unknown", async () => {
    const leaf = await leafNaming({ ocsp: [services], crl: [services] });
    const later = new Date(Date.now() + 3 * 3_600_000);
    const status = await checkChainRevocation(chainOf(leaf), loopbackFetcher(), later);
    assert.equal(status.status, "unknown");
    assert.match((status as { reason: string }).reason, /OCSP [^ ]+: the response is out of date \(next update [^)]+\); CRL [^ ]+: the CRL is out of date/);
  });

  test("a CRL without a next update is not used, even one that lists the certificate (it would read as listing none)", async () => {
    const leaf = await leafNaming({ crl: [services] });
    const crl = await x509.X509CrlGenerator.create({
      issuer: ca.cert.subjectName,
      thisUpdate: new Date(Date.now() - 60_000),
      signingAlgorithm: signingAlgorithmOf(ca.keyType),
      signingKey: await toWebCrypto(ca.privateKey, ca.keyType, "sign"),
      entries: [{ serialNumber: leaf.cert.serialNumber, revocationDate: new Date(Date.now() - 60_000), reason: x509.X509CrlReason.keyCompromise }],
    });
    const status = await checkChainRevocation(
      chainOf(leaf),
      { ocsp: (url, body) => fetcher.ocsp(url, body), crl: async () => new Uint8Array(crl.rawData) },
      now(),
    );
    assert.equal(status.status, "unknown", JSON.stringify(status));
    assert.match((status as { reason: string }).reason, /CRL [^ ]+: the CRL has no next update \(RFC 5280 requires one\)$/);
  });

  test("a CRL signed by another CA is not used", async () => {
    const leaf = await leafNaming({ crl: [services] });
    const stranger = await startRevocationServices(await createRoot({ subject: "C=US, ST=WA, O=Acme, CN=Acme Signing CA" }));
    try {
      const crlOfStranger: RevocationFetcher = { ocsp: (url, body) => fetcher.ocsp(url, body), crl: async () => stranger.crl() };
      const status = await checkChainRevocation(chainOf(leaf), crlOfStranger, now());
      assert.match((status as { reason: string }).reason, /CRL [^ ]+: the CRL's signature does not verify with the issuer's key$/);
    } finally {
      await stranger.stop();
    }
  });

  test("for a signing authority's signature, a revocation after its authentic signing time leaves it valid", async () => {
    const leaf = await leafNaming({ ocsp: [services] });
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 - 10 * 60_000);
    await services.revoke(leaf, { at, reason: 5 });
    const f = loopbackFetcher();
    assert.deepEqual(await checkChainRevocation(chainOf(leaf), f, now(), new Date(at.getTime() - 60_000)), { status: "good" });
    assert.equal((await checkChainRevocation(chainOf(leaf), f, now(), new Date(at.getTime() + 60_000))).status, "revoked");
  });
});

describe("an entry's revocation setting", () => {
  const manifest = { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: `sha256:${"ab".repeat(32)}`, size: 1234 };
  const trust = (revocation: RevocationMode): NotationTrust => ({
    ca: [root.der],
    signingAuthority: [],
    tsa: [],
    storeName: "the certificates of notary release",
    identities: "*",
    level: "strict",
    verifyTimestamp: "always",
    revocation,
  });
  const envelopeBy = (leaf: TestCertificate) => signJwsEnvelope({ payload: notationPayload(manifest), signer: leaf, chain: [leaf.der, ca.der, root.der] });

  test("enforce denies a revoked signer, log admits and records it, skip asks nothing", async () => {
    const leaf = await leafNaming({ ocsp: [services] });
    await services.revoke(leaf, { reason: 1 });
    const f = loopbackFetcher();
    const enforced = await verifyNotationSignature(envelopeBy(leaf), "application/jose+json", manifest, trust("enforce"), now(), f);
    assert.equal(enforced.ok, false);
    assert.match((enforced as { reason: string }).reason, /^certificate 0 \(.*\) is revoked since .*, reason keyCompromise \(OCSP /);

    const logged = await verifyNotationSignature(envelopeBy(leaf), "application/jose+json", manifest, trust("log"), now(), f);
    assert.equal(logged.ok, true);
    assert.match((logged as { logged: string[] }).logged.join("\n"), /^revocation: certificate 0 .* is revoked since/);

    const before = services.requests().ocsp;
    const skipped = await verifyNotationSignature(envelopeBy(leaf), "application/jose+json", manifest, trust("skip"), now(), loopbackFetcher());
    assert.deepEqual([skipped.ok, (skipped as { logged: string[] }).logged], [true, []]);
    assert.equal(services.requests().ocsp, before, "no responder is asked");
  });

  test("an unknown status fails an enforcing entry, as Notation fails it; an untrusted chain's responders are never asked", async () => {
    const leaf = await issue(ca, { subject: "C=US, ST=WA, O=Acme, CN=Unregistered", ocspUrls: [services.ocspUrl] });
    const unknown = await verifyNotationSignature(envelopeBy(leaf), "application/jose+json", manifest, trust("enforce"), now(), loopbackFetcher());
    assert.match((unknown as { reason: string }).reason, /could not be told: OCSP [^ ]+: the responder does not know the certificate/);

    const before = services.requests().ocsp;
    const untrusted: NotationTrust = { ...trust("enforce"), level: "audit", ca: [] };
    const outcome = await verifyNotationSignature(envelopeBy(leaf), "application/jose+json", manifest, untrusted, now(), loopbackFetcher());
    assert.equal(outcome.ok, false);
    assert.match((outcome as { reason: string }).reason, /^not checked: the chain does not end in the entry's trust store$/);
    assert.equal(services.requests().ocsp, before);
  });
});
