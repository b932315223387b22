// `imprimatur verify-bundle`: verifies one Sigstore bundle for one artifact, in the command-line protocol of
// Sigstore's conformance suite, with the same verifier the webhooks use (src/verification/verify-entry.ts).
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { bundleFromJSON } from "@sigstore/bundle";
import type { KeylessAttestor, StaticKeyAttestor } from "../core/image-policy/attestors.ts";
import { parsePublicKey } from "../core/image-policy/compile-attestors.ts";
import { parseTrustedRoot, type SigstoreTrust } from "../core/trust-root/trust-root-kind.ts";
import { fileProblem } from "../fs/file-problem.ts";
import { bundleToItem, type SignedItem } from "../verification/signed-item.ts";
import { publicGoodTrustRoot } from "../verification/trust-roots.ts";
import { publicKeyFromPem, verifyItem } from "../verification/verify-entry.ts";
import { parseCommandArgs, usageFailure, UsageError } from "./args.ts";

export const VERIFY_BUNDLE_USAGE = `Usage: imprimatur verify-bundle --bundle FILE (--certificate-identity ID --certificate-oidc-issuer URL | --key FILE) [--trusted-root FILE] FILE|sha256:HEX

Verifies a Sigstore bundle (v0.1 to v0.3, message signature or DSSE) for an artifact, given as a file or as its
sha256 digest (a message signature by digest needs an ECDSA or RSA PKCS#1 v1.5 key): the signature, the certificate chain to the trusted root's CA and its SCT (keyless), the
transparency-log entry, and, for keyless bundles, that the certificate names exactly this identity and issuer.
A DSSE bundle's in-toto statement must name the artifact's digest among its subjects. This is the command-line
protocol of Sigstore's conformance suite.

  --bundle FILE                    the bundle (JSON)
  --certificate-identity ID        the certificate's subject alternative name, exactly
  --certificate-oidc-issuer URL    the certificate's OIDC issuer, exactly
  --key FILE                       a PEM public key, instead of an identity
  --trusted-root FILE              trusted_root.json (default: the embedded Sigstore public-good root)
  -h, --help                       show this help

Exit status: 0 verified; 1 not verified, with one line saying why; 2 usage errors, and a bundle, key, trusted
root or artifact that cannot be read or is not one (one line naming the file and why).
`;

/** A file given on the command line that cannot be read, or is not what its flag wants: exit 2. */
class InputError extends Error {}

export async function runVerifyBundle(argv: string[]): Promise<number> {
  let values;
  let artifactArg: string;
  try {
    const parsed = parseCommandArgs(
      argv,
      {
        bundle: { type: "string" },
        "certificate-identity": { type: "string" },
        "certificate-oidc-issuer": { type: "string" },
        key: { type: "string" },
        "trusted-root": { type: "string" },
      },
      true,
    );
    values = parsed.values;
    if (!values.bundle) throw new UsageError("--bundle FILE is required");
    if (parsed.positionals.length !== 1) throw new UsageError("give exactly one artifact: a file or sha256:HEX");
    artifactArg = parsed.positionals[0]!;
    const identity = values["certificate-identity"] !== undefined || values["certificate-oidc-issuer"] !== undefined;
    if (identity === (values.key !== undefined)) throw new UsageError("give either --certificate-identity with --certificate-oidc-issuer, or --key");
    if (identity && (!values["certificate-identity"] || !values["certificate-oidc-issuer"]))
      throw new UsageError("--certificate-identity and --certificate-oidc-issuer go together");
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("verify-bundle", e.message);
    throw e;
  }
  const fail = (message: string) => {
    process.stderr.write(`imprimatur verify-bundle: ${message}\n`);
    return 1;
  };

  let trustRoot: SigstoreTrust;
  let item: SignedItem;
  let artifact: { digest: Buffer; bytes?: Buffer };
  let key: ReturnType<typeof publicKeyFromPem> | undefined;
  try {
    trustRoot = values["trusted-root"] ? await readTrustRoot(values["trusted-root"]) : publicGoodTrustRoot().sigstore!;
    artifact = await readArtifact(artifactArg);
    item = await readBundle(values.bundle!, artifact.bytes);
    if (values.key !== undefined) {
      const parsed = parsePublicKey((await readInput(values.key, "the key")).toString("utf8"));
      if ("error" in parsed) throw new InputError(`${values.key} is not a public key: ${parsed.error}`);
      key = publicKeyFromPem(parsed.key.pem);
    }
  } catch (e) {
    if (e instanceof InputError) {
      process.stderr.write(`imprimatur verify-bundle: ${e.message}\n`);
      return 2;
    }
    return fail((e as Error).message);
  }

  const entry: KeylessAttestor | StaticKeyAttestor = key
    ? { type: "staticKey", path: "key", label: `key ${values.key}`, key: { pem: "", fingerprint: "" }, ignoreTlog: false, trustRoot: "given" }
    : {
        type: "keyless",
        path: "identity",
        label: "identity",
        subject: exactly(values["certificate-identity"]!),
        issuer: exactly(values["certificate-oidc-issuer"]!),
        extensions: [],
        trustRoot: "given",
        ignoreTlog: false,
      };
  // What the bundle is about is checked first: a bundle for another artifact fails for that reason, not as a bad signature.
  const unrelated = artifactBinding(item, artifact);
  if (unrelated) return fail(unrelated);
  const outcome = verifyItem(item, entry, {
    trustRoot,
    ...(key ? { key } : {}),
    // Given only the digest, a message signature is checked against it.
    ...(artifact.bytes ? {} : { artifactDigest: artifact.digest }),
    binding: () => undefined,
  });
  if (!outcome.ok) return fail(outcome.reason);
  process.stdout.write(`verified: ${outcome.evidence.signer}${outcome.evidence.tlogIndex !== undefined ? ` (log index ${outcome.evidence.tlogIndex})` : ""}\n`);
  return 0;
}

function exactly(value: string) {
  return { source: value, test: (v: string) => v === value };
}

/** The bytes of a file the command was given, or an InputError naming it, what it was for, and why. */
async function readInput(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (e) {
    throw new InputError(`cannot read ${what} ${path}: ${fileProblem(e)}`, { cause: e });
  }
}

/** A JSON file's content, or an InputError saying that it is not the kind of file it was given as. */
function parseJson(bytes: Buffer, path: string, kind: string): unknown {
  try {
    return JSON.parse(bytes.toString("utf8"));
  } catch (e) {
    throw new InputError(`${path} is not ${kind}: it is not JSON`, { cause: e });
  }
}

async function readTrustRoot(path: string): Promise<SigstoreTrust> {
  const parsed = parseTrustedRoot(parseJson(await readInput(path, "the trusted root"), path, "a trusted root (trusted_root.json)"));
  if ("error" in parsed) throw new InputError(`${path} is not a usable trusted root: ${parsed.error}`);
  return parsed;
}

async function readBundle(path: string, artifact: Buffer | undefined): Promise<SignedItem> {
  const bytes = await readInput(path, "the bundle");
  try {
    bundleFromJSON(parseJson(bytes, path, "a Sigstore bundle"));
  } catch (e) {
    if (e instanceof InputError) throw e;
    // The library says only "invalid bundle"; the fields it rejected say which part is wrong.
    const fields = (e as { fields?: unknown }).fields;
    const detail = Array.isArray(fields) && fields.length > 0 ? `missing or invalid ${fields.join(", ")}` : (e as Error).message;
    throw new InputError(`${path} is not a Sigstore bundle: ${detail}`, { cause: e });
  }
  return bundleToItem(bytes, path, artifact);
}

async function readArtifact(arg: string): Promise<{ digest: Buffer; bytes?: Buffer }> {
  const m = /^sha256:([0-9a-f]{64})$/.exec(arg);
  if (m) return { digest: Buffer.from(m[1]!, "hex") };
  const bytes = await readInput(arg, "the artifact");
  return { digest: createHash("sha256").update(bytes).digest(), bytes };
}

/** The bundle must be about this artifact: its message digest, or a subject of its in-toto statement. */
function artifactBinding(item: SignedItem, artifact: { digest: Buffer; bytes?: Buffer }): string | undefined {
  const content = item.bundle.content;
  if (content.$case === "messageSignature") {
    if (!content.messageSignature.messageDigest?.digest.equals(artifact.digest)) return "the bundle's message digest is not the artifact's";
    return undefined;
  }
  let statement: { subject?: Array<{ digest?: Record<string, unknown> }> };
  try {
    statement = JSON.parse(content.dsseEnvelope.payload.toString("utf8")) as typeof statement;
  } catch {
    return "the DSSE payload is not JSON";
  }
  const hex = artifact.digest.toString("hex");
  if (!Array.isArray(statement.subject) || !statement.subject.some((s) => s?.digest?.sha256 === hex))
    return "no subject of the in-toto statement has the artifact's digest";
  return undefined;
}
