// The release image's SBOM (SPDX 2.3) and build provenance (SLSA v1): every field their specifications require,
// in the form they require it, and the contents read from this checkout's package-lock.json as the image build
// reads them (src/image-build/production-dependencies.ts).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { productionPackages, readLockfile, type Lockfile } from "../../../src/image-build/production-dependencies.ts";
import { PROJECT_DIR } from "../../../src/image-build/build-image.ts";
import { contentsOf, imageContents, integrityDigests, npmPurl } from "../../../src/release/image-contents.ts";
import { BUILD_TYPE, BUILDER_ID, slsaProvenance } from "../../../src/release/provenance.ts";
import { isLicenseExpression, spdxDocument, type SpdxDocument } from "../../../src/release/sbom.ts";

const NAME = "registry.example.com/platform/imprimatur";
const DIGEST = `sha256:${"ab".repeat(32)}`;
const CREATED = "2026-01-02T03:04:05Z";
const contents = imageContents(PROJECT_DIR);
const sbom = spdxDocument({ name: NAME, digest: DIGEST, contents, created: CREATED, toolVersion: "0.1.0" });

/** SPDX 2.3 §3.2: SPDXRef- followed by letters, digits, "." and "-". */
const SPDX_ID = /^SPDXRef-[A-Za-z0-9.-]+$/;
const CHECKSUM_HEX: Record<string, number> = { SHA1: 40, SHA256: 64, SHA384: 96, SHA512: 128 };

function isUri(text: string): boolean {
  return URL.canParse(text) && /^[a-z][a-z0-9+.-]*:/i.test(text);
}

describe("the image's contents, from package-lock.json", () => {
  test("the npm packages are exactly the image build's production closure, one per name and version, without the runtime package", () => {
    const lock = readLockfile(PROJECT_DIR);
    const expected = new Set(
      productionPackages(lock).map((key) => `${lock.packages![key]!.name ?? key.slice(key.lastIndexOf("node_modules/") + 13)}@${lock.packages![key]!.version}`),
    );
    assert.deepEqual(new Set(contents.dependencies.map((p) => `${p.name}@${p.version}`)), expected);
    assert.equal(contents.dependencies.length, expected.size, "no name and version twice");
    for (const dev of ["typescript", "eslint", "prettier", "@sigstore/mock", "node"]) assert.ok(!contents.dependencies.some((p) => p.name === dev), dev);
    for (const dependency of ["undici", "yaml", "@sigstore/bundle"])
      assert.ok(
        contents.dependencies.some((p) => p.name === dependency),
        dependency,
      );
    assert.equal(contents.runtime?.name, "node");
    assert.equal(contents.runtime?.version, lock.packages!["node_modules/node"]!.version);
    assert.match(contents.lockfileDigest, /^sha256:[0-9a-f]{64}$/);
  });

  test("Package URLs are the npm type's, the scope's @ percent-encoded; integrity becomes hex digests", () => {
    assert.equal(npmPurl("undici", "8.12.4"), "pkg:npm/undici@8.12.4");
    assert.equal(npmPurl("@sigstore/bundle", "5.0.1"), "pkg:npm/%40sigstore/bundle@5.0.1");
    assert.equal(npmPurl("a", "1.0.0-beta+exp.1"), "pkg:npm/a@1.0.0-beta%2Bexp.1");
    const sha512 = Buffer.alloc(64, 7);
    assert.deepEqual(integrityDigests(`sha512-${sha512.toString("base64")} sha1-${Buffer.alloc(20, 1).toString("base64")} md5-AAAA`), {
      sha512: sha512.toString("hex"),
      sha1: "01".repeat(20),
    });
    assert.deepEqual(integrityDigests(undefined), {});
    for (const p of contents.dependencies) assert.match(p.digests.sha512 ?? "", /^[0-9a-f]{128}$/, `${p.name} has its tarball's sha512`);
  });

  test("an alias is named by its package, and one package installed twice at one version is listed once", () => {
    const lock: Lockfile = {
      lockfileVersion: 3,
      packages: {
        "": { dependencies: { alias: "npm:real@1.0.0", b: "1", c: "1" } },
        "node_modules/alias": { name: "real", version: "1.0.0", license: "MIT" },
        "node_modules/b": { version: "1.0.0", dependencies: { d: "1" } },
        "node_modules/b/node_modules/d": { version: "2.0.0" },
        "node_modules/c": { version: "1.0.0", dependencies: { d: "2" } },
        "node_modules/c/node_modules/d": { version: "2.0.0" },
      },
    };
    const got = contentsOf({ name: "app", version: "1.0.0" }, lock, Buffer.from(JSON.stringify(lock)));
    assert.deepEqual(
      got.dependencies.map((p) => p.purl),
      ["pkg:npm/b@1.0.0", "pkg:npm/c@1.0.0", "pkg:npm/d@2.0.0", "pkg:npm/real@1.0.0"],
    );
    assert.equal(got.runtime, undefined);
  });
});

describe("the SBOM: an SPDX 2.3 document", () => {
  test("has every field SPDX 2.3 requires of a document, in its form", () => {
    assert.equal(sbom.spdxVersion, "SPDX-2.3");
    assert.equal(sbom.dataLicense, "CC0-1.0");
    assert.equal(sbom.SPDXID, "SPDXRef-DOCUMENT");
    assert.equal(sbom.name, `${NAME}@${DIGEST}`);
    assert.ok(isUri(sbom.documentNamespace) && !sbom.documentNamespace.includes("#"), sbom.documentNamespace);
    assert.match(sbom.creationInfo.created, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(sbom.creationInfo.created, CREATED);
    assert.ok(sbom.creationInfo.creators.length > 0);
    for (const creator of sbom.creationInfo.creators) assert.match(creator, /^(Tool|Organization|Person): \S/);
    const again = spdxDocument({ name: NAME, digest: DIGEST, contents, created: CREATED, toolVersion: "0.1.0" });
    assert.notEqual(again.documentNamespace, sbom.documentNamespace, "each document's namespace is its own");
  });

  test("every package has a unique SPDXID, a name, a downloadLocation and filesAnalyzed false (so no verification code is due)", () => {
    const ids = new Set<string>();
    for (const p of sbom.packages) {
      assert.match(p.SPDXID, SPDX_ID);
      assert.ok(!ids.has(p.SPDXID), `${p.SPDXID} is used once`);
      ids.add(p.SPDXID);
      assert.ok(p.name !== "");
      assert.ok(p.downloadLocation === "NOASSERTION" || p.downloadLocation === "NONE" || isUri(p.downloadLocation), p.downloadLocation);
      assert.equal(p.filesAnalyzed, false);
      for (const c of p.checksums ?? []) assert.match(c.checksumValue, new RegExp(`^[0-9a-f]{${CHECKSUM_HEX[c.algorithm]}}$`), `${p.name} ${c.algorithm}`);
      if (p.licenseDeclared !== undefined) assert.ok(p.licenseDeclared === "NOASSERTION" || isLicenseExpression(p.licenseDeclared), p.licenseDeclared);
      for (const ref of p.externalRefs ?? []) {
        assert.equal(ref.referenceCategory, "PACKAGE-MANAGER");
        assert.equal(ref.referenceType, "purl");
        assert.match(ref.referenceLocator, /^pkg:[a-z]+\/\S+@\S+$/);
      }
    }
  });

  test("describes the image, which contains the app, the runtime and every npm dependency, each with its purl", () => {
    const byId = new Map(sbom.packages.map((p) => [p.SPDXID, p]));
    const describes = sbom.relationships.filter((r) => r.relationshipType === "DESCRIBES");
    assert.deepEqual(describes, [{ spdxElementId: "SPDXRef-DOCUMENT", relationshipType: "DESCRIBES", relatedSpdxElement: "SPDXRef-image" }]);
    const image = byId.get("SPDXRef-image")!;
    assert.equal(image.primaryPackagePurpose, "CONTAINER");
    assert.deepEqual(image.checksums, [{ algorithm: "SHA256", checksumValue: "ab".repeat(32) }]);
    assert.equal(image.externalRefs![0]!.referenceLocator, `pkg:oci/imprimatur@sha256%3A${"ab".repeat(32)}?repository_url=${NAME}`);
    for (const r of sbom.relationships) {
      assert.ok(r.spdxElementId === "SPDXRef-DOCUMENT" || byId.has(r.spdxElementId), r.spdxElementId);
      assert.ok(byId.has(r.relatedSpdxElement), r.relatedSpdxElement);
    }
    const contained = new Set(
      sbom.relationships.filter((r) => r.relationshipType === "CONTAINS").map((r) => byId.get(r.relatedSpdxElement)!.externalRefs![0]!.referenceLocator),
    );
    for (const p of [contents.app, contents.runtime!, ...contents.dependencies]) assert.ok(contained.has(p.purl), `the image contains ${p.purl}`);
    assert.equal(contained.size, contents.dependencies.length + 2);
    const undici = sbom.packages.find((p) => p.name === "undici")!;
    assert.equal(undici.versionInfo, contents.dependencies.find((p) => p.name === "undici")!.version);
    assert.equal(undici.licenseDeclared, "MIT");
    assert.equal(undici.checksums![0]!.algorithm, "SHA512");
  });

  test("licenses that are not SPDX expressions are NOASSERTION", () => {
    for (const ok of ["MIT", "Apache-2.0", "(MIT OR Apache-2.0)", "BSD-3-Clause AND MIT", "GPL-2.0+ WITH Classpath-exception-2.0", "LicenseRef-x"]) {
      assert.ok(isLicenseExpression(ok), ok);
    }
    for (const bad of ["SEE LICENSE IN LICENSE.md", "UNLICENSED", "MIT OR", "(MIT", "MIT)", "", "AND MIT"]) assert.ok(!isLicenseExpression(bad), bad);
  });

  test("the same name and version under two folders gets one SPDXID; ids stay unique when sanitized names collide", () => {
    const lock: Lockfile = {
      lockfileVersion: 3,
      packages: { "": { dependencies: { "a.b": "1", "a-b": "1" } }, "node_modules/a.b": { version: "1.0.0" }, "node_modules/a-b": { version: "1.0.0" } },
    };
    const doc: SpdxDocument = spdxDocument({
      name: NAME,
      digest: DIGEST,
      contents: contentsOf({ name: "@acme/app", version: "1.0.0" }, lock, Buffer.from("{}")),
      created: CREATED,
      toolVersion: "0.1.0",
    });
    const ids = doc.packages.map((p) => p.SPDXID);
    assert.equal(new Set(ids).size, ids.length);
    for (const id of ids) assert.match(id, SPDX_ID);
  });
});

describe("the build provenance: a SLSA v1 predicate", () => {
  const revision = "0123456789abcdef0123456789abcdef01234567";
  const provenance = slsaProvenance({ repository: NAME, contents, sourceRevision: revision, imprimaturVersion: "0.1.0", finishedOn: CREATED });

  test("has the fields SLSA v1 requires: buildDefinition.buildType and externalParameters, runDetails.builder.id", () => {
    assert.equal(provenance.buildDefinition.buildType, BUILD_TYPE);
    assert.ok(isUri(provenance.buildDefinition.buildType));
    assert.equal(typeof provenance.buildDefinition.externalParameters, "object");
    assert.deepEqual(provenance.buildDefinition.externalParameters, { buildCommand: "npm run image", repository: NAME, sourceRevision: revision });
    assert.equal(provenance.runDetails.builder.id, BUILDER_ID);
    assert.ok(isUri(provenance.runDetails.builder.id));
    assert.deepEqual(provenance.runDetails.metadata, { finishedOn: CREATED });
  });

  test("every resolved dependency is a resource descriptor with a uri or a digest; digests are lower-case hex by algorithm", () => {
    const deps = provenance.buildDefinition.resolvedDependencies;
    for (const d of deps) {
      assert.ok(d.uri !== undefined || d.digest !== undefined, JSON.stringify(d));
      if (d.uri !== undefined) assert.ok(isUri(d.uri), d.uri);
      for (const [algorithm, value] of Object.entries(d.digest ?? {})) {
        assert.match(algorithm, /^(sha1|sha256|sha512|gitCommit)$/);
        assert.match(value, /^[0-9a-f]+$/);
      }
    }
    assert.deepEqual(deps[0], { name: "source", digest: { gitCommit: revision } });
    assert.deepEqual(deps[1], { name: "package-lock.json", digest: { sha256: contents.lockfileDigest.slice(7) } });
    const uris = new Set(deps.map((d) => d.uri));
    for (const p of [contents.runtime!, ...contents.dependencies]) assert.ok(uris.has(p.purl), p.purl);
  });

  test("a revision that is not a commit id stays a parameter only; no revision, no builder given, no time: the defaults", () => {
    const dirty = slsaProvenance({ repository: NAME, contents, sourceRevision: `${revision}-dirty`, imprimaturVersion: "0.1.0" });
    assert.equal(dirty.buildDefinition.externalParameters.sourceRevision, `${revision}-dirty`);
    assert.ok(!dirty.buildDefinition.resolvedDependencies.some((d) => d.digest?.gitCommit !== undefined));
    assert.equal(dirty.runDetails.metadata, undefined);
    const bare = slsaProvenance({
      repository: NAME,
      contents,
      imprimaturVersion: "0.1.0",
      builderId: "https://ci.example/runner",
      buildCommand: "imprimatur install",
    });
    assert.deepEqual(bare.buildDefinition.externalParameters, { buildCommand: "imprimatur install", repository: NAME });
    assert.equal(bare.runDetails.builder.id, "https://ci.example/runner");
  });
});
