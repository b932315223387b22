// The release image's SBOM: an SPDX 2.3 JSON document, the predicate of an in-toto statement of type
// https://spdx.dev/Document about the image. The document describes the image (a CONTAINER package named by
// its repository and digest, purl pkg:oci), which contains the app and each npm production dependency and the
// Node.js runtime (LIBRARY packages with their npm purl, the lock's tarball checksums and declared license).
// Every field SPDX 2.3 requires of a document and of a package is present: spdxVersion, dataLicense, SPDXID,
// name, documentNamespace, creationInfo.created and .creators; a package's name, SPDXID and downloadLocation
// (and filesAnalyzed false, since no file of it is listed).
import { randomUUID } from "node:crypto";
import type { ImageContents, NpmPackage } from "./image-contents.ts";

export const SPDX_PREDICATE_TYPE = "https://spdx.dev/Document";
export const SPDX_VERSION = "SPDX-2.3";
const NOASSERTION = "NOASSERTION";

export interface SpdxPackage {
  SPDXID: string;
  name: string;
  versionInfo?: string;
  downloadLocation: string;
  filesAnalyzed: false;
  primaryPackagePurpose?: "CONTAINER" | "APPLICATION" | "LIBRARY";
  licenseConcluded?: string;
  licenseDeclared?: string;
  checksums?: Array<{ algorithm: string; checksumValue: string }>;
  externalRefs?: Array<{ referenceCategory: "PACKAGE-MANAGER"; referenceType: "purl"; referenceLocator: string }>;
  comment?: string;
}

export interface SpdxDocument {
  spdxVersion: typeof SPDX_VERSION;
  dataLicense: "CC0-1.0";
  SPDXID: "SPDXRef-DOCUMENT";
  name: string;
  documentNamespace: string;
  creationInfo: { created: string; creators: string[] };
  packages: SpdxPackage[];
  relationships: Array<{ spdxElementId: string; relationshipType: "DESCRIBES" | "CONTAINS"; relatedSpdxElement: string }>;
}

export interface SbomInput {
  /** REGISTRY/REPOSITORY of the image. */
  name: string;
  /** sha256:<hex> of the image's manifest. */
  digest: string;
  contents: ImageContents;
  /** RFC 3339, seconds, UTC: "2026-01-02T03:04:05Z". */
  created: string;
  /** The version of Imprimatur that writes the document (its creator). */
  toolVersion: string;
  /** Makes documentNamespace unique; default a random UUID. */
  uniqueId?: string;
}

const IMAGE_ID = "SPDXRef-image";

export function spdxDocument(input: SbomInput): SpdxDocument {
  const [algorithm, hex] = input.digest.split(":") as [string, string];
  const lastSlash = input.name.lastIndexOf("/");
  const repositoryName = input.name.slice(lastSlash + 1);
  const image: SpdxPackage = {
    SPDXID: IMAGE_ID,
    name: input.name,
    versionInfo: input.digest,
    downloadLocation: NOASSERTION,
    filesAnalyzed: false,
    primaryPackagePurpose: "CONTAINER",
    checksums: algorithm === "sha256" ? [{ algorithm: "SHA256", checksumValue: hex }] : [],
    externalRefs: [purlRef(`pkg:oci/${encodeURIComponent(repositoryName)}@${encodeURIComponent(input.digest)}?repository_url=${encodeURI(input.name)}`)],
  };
  const ids = new Set<string>([IMAGE_ID]);
  const contained: Array<[NpmPackage, SpdxPackage["primaryPackagePurpose"], string?]> = [
    [input.contents.app, "APPLICATION", "the app: /app (package.json, bin, src, policies)"],
    ...(input.contents.runtime ? [[input.contents.runtime, "LIBRARY", "the Node.js runtime, /usr/local/bin/node"] as [NpmPackage, "LIBRARY", string]] : []),
    ...input.contents.dependencies.map((d): [NpmPackage, "LIBRARY"] => [d, "LIBRARY"]),
  ];
  const packages = [
    image,
    ...contained.map(([p, purpose, comment]) => npmSpdxPackage(p, purpose, uniqueId(`SPDXRef-npm-${p.name}-${p.version}`, ids), comment)),
  ];
  return {
    spdxVersion: SPDX_VERSION,
    dataLicense: "CC0-1.0",
    SPDXID: "SPDXRef-DOCUMENT",
    name: `${input.name}@${input.digest}`,
    documentNamespace: `https://imprimatur.dev/spdx/${encodeURIComponent(input.name)}/${algorithm}-${hex}/${input.uniqueId ?? randomUUID()}`,
    creationInfo: { created: input.created, creators: [`Tool: imprimatur-${input.toolVersion}`] },
    packages,
    relationships: [
      { spdxElementId: "SPDXRef-DOCUMENT", relationshipType: "DESCRIBES", relatedSpdxElement: IMAGE_ID },
      ...packages.slice(1).map((p) => ({ spdxElementId: IMAGE_ID, relationshipType: "CONTAINS" as const, relatedSpdxElement: p.SPDXID })),
    ],
  };
}

function npmSpdxPackage(p: NpmPackage, purpose: SpdxPackage["primaryPackagePurpose"], id: string, comment?: string): SpdxPackage {
  const checksums = Object.entries(p.digests).map(([algorithm, checksumValue]) => ({ algorithm: algorithm.toUpperCase(), checksumValue }));
  return {
    SPDXID: id,
    name: p.name,
    versionInfo: p.version,
    downloadLocation: p.resolved ?? NOASSERTION,
    filesAnalyzed: false,
    ...(purpose ? { primaryPackagePurpose: purpose } : {}),
    licenseConcluded: NOASSERTION,
    licenseDeclared: p.license !== undefined && isLicenseExpression(p.license) ? p.license : NOASSERTION,
    ...(checksums.length > 0 ? { checksums } : {}),
    externalRefs: [purlRef(p.purl)],
    ...(comment ? { comment } : {}),
  };
}

function purlRef(locator: string): { referenceCategory: "PACKAGE-MANAGER"; referenceType: "purl"; referenceLocator: string } {
  return { referenceCategory: "PACKAGE-MANAGER", referenceType: "purl", referenceLocator: locator };
}

/** An SPDXID (SPDXRef- then letters, digits, "." and "-"), made unique among `taken`. */
function uniqueId(wanted: string, taken: Set<string>): string {
  const base = `SPDXRef-${wanted.slice("SPDXRef-".length).replace(/[^A-Za-z0-9.-]+/g, "-")}`;
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}-${n}`;
  taken.add(id);
  return id;
}

/**
 * Whether `text` reads as an SPDX license expression: license ids (LicenseRef-… included) joined by AND, OR or
 * WITH, with parentheses and a trailing "+". Anything else ("SEE LICENSE IN …", "UNLICENSED") is NOASSERTION.
 */
export function isLicenseExpression(text: string): boolean {
  const tokens = text.replace(/[()]/g, " $& ").trim().split(/\s+/);
  let depth = 0;
  let expectId = true;
  for (const token of tokens) {
    if (token === "(") {
      if (!expectId) return false;
      depth++;
    } else if (token === ")") {
      if (expectId || --depth < 0) return false;
    } else if (token === "AND" || token === "OR" || token === "WITH") {
      if (expectId) return false;
      expectId = true;
    } else {
      if (!expectId || !/^[A-Za-z0-9][A-Za-z0-9.-]*\+?$/.test(token) || token === "UNLICENSED") return false;
      expectId = false;
    }
  }
  return depth === 0 && !expectId;
}
