// `imprimatur verify-bundle`: verifies one Sigstore bundle for one artifact, in the command-line protocol of
// Sigstore's conformance suite, with the same verifier the webhooks use (src/verification/verify-entry.ts).
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { KeylessAttestor, StaticKeyAttestor } from "../core/image-policy/attestors.ts";
import { parsePublicKey } from "../core/image-policy/compile-attestors.ts";
import { parseTrustedRoot, type TrustRoot } from "../core/trust-root/trust-root-kind.ts";
import { bundleToItem, type SignedItem } from "../verification/signed-item.ts";
import { publicGoodTrustRoot } from "../verification/trust-roots.ts";
import { publicKeyFromPem, verifyItem } from "../verification/verify-entry.ts";
import { parseCommandArgs, UsageError } from "./args.ts";

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

Exit status: 0 verified; 1 not verified, with one line saying why; 2 usage errors.
`;

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
    if (e instanceof UsageError) {
      process.stderr.write(`imprimatur verify-bundle: ${e.message}\n\n${VERIFY_BUNDLE_USAGE}`);
      return 2;
    }
    throw e;
  }
  const fail = (message: string) => {
    process.stderr.write(`imprimatur verify-bundle: ${message}\n`);
    return 1;
  };

  let trustRoot: TrustRoot;
  let item: SignedItem;
  let artifact: { digest: Buffer; bytes?: Buffer };
  let key: ReturnType<typeof publicKeyFromPem> | undefined;
  try {
    trustRoot = values["trusted-root"] ? await readTrustRoot(values["trusted-root"]) : publicGoodTrustRoot();
    artifact = await readArtifact(artifactArg);
    item = bundleToItem(await readFile(values.bundle!), values.bundle!, artifact.bytes);
    if (values.key !== undefined) {
      const parsed = parsePublicKey(await readFile(values.key, "utf8"));
      if ("error" in parsed) throw new Error(`${values.key}: ${parsed.error}`);
      key = publicKeyFromPem(parsed.key.pem);
    }
  } catch (e) {
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

async function readTrustRoot(path: string): Promise<TrustRoot> {
  let json: unknown;
  try {
    json = JSON.parse(await readFile(path, "utf8"));
  } catch (e) {
    throw new Error(`${path}: ${(e as Error).message}`, { cause: e });
  }
  const parsed = parseTrustedRoot(json);
  if ("error" in parsed) throw new Error(`${path}: ${parsed.error}`);
  return { name: "given", source: { origin: path }, ...parsed };
}

async function readArtifact(arg: string): Promise<{ digest: Buffer; bytes?: Buffer }> {
  const m = /^sha256:([0-9a-f]{64})$/.exec(arg);
  if (m) return { digest: Buffer.from(m[1]!, "hex") };
  const bytes = await readFile(arg);
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
