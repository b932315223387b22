// `imprimatur sign-image`: signs a release image already in a registry with the release key, and attaches its
// SBOM and build provenance, as Sigstore bundles pushed as OCI 1.1 referrers of its digest (src/release/).
import { stringify } from "yaml";
import pkg from "../../package.json" with { type: "json" };
import { parseImageReference } from "../core/image-reference.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { readSigningKey, type ReleaseKey } from "../release/signing-key.ts";
import { signImage, type SignedImage } from "../release/sign-image.ts";
import { RegistryClient } from "../registry/registry-client.ts";
import { errorText, parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { defaultAuthFile } from "./install.ts";
import { registryAccess } from "./registry-access.ts";

export const SIGN_IMAGE_USAGE = `Usage: imprimatur sign-image REGISTRY/REPOSITORY@sha256:DIGEST --key FILE [options]

Signs an image already pushed (Imprimatur's own release image, as npm run image builds it) and attaches its SBOM
and build provenance, the way cosign v3 does: three Sigstore bundles (v0.3, a DSSE envelope of an in-toto
statement, signed with the key, no transparency-log entry), each pushed as an OCI 1.1 referrer of the digest:
  signature   predicate https://sigstore.dev/cosign/sign/v1 (cosign's image signature)
  sbom        predicate https://spdx.dev/Document: SPDX 2.3, the npm packages of the image (package-lock.json)
  provenance  predicate https://slsa.dev/provenance/v1: build type, source revision, build command, dependencies
A registry without the Referrers API (docker-registry 2.8) gets the referrers tag sha256-<hex> updated too.
Verify them with an ImagePolicy whose staticKey has ignoreTlog: true (deploy/self-verification).

      --key FILE           the release key: an ECDSA P-256 private key, unencrypted PEM (PKCS#8 "PRIVATE KEY",
                           or "EC PRIVATE KEY"); cosign's encrypted key files are refused
      --source-revision REV  the commit the image was built from (the provenance's sourceRevision)
      --builder-id URI     the provenance's runDetails.builder.id (default: the project's release scripts)
      --authfile FILE      registry credentials (default: $REGISTRY_AUTH_FILE, else $DOCKER_CONFIG/config.json,
                           else ~/.docker/config.json, when present)
      --registries FILE    RegistryConfig: the registry's CA, insecure (plain HTTP), allowLocalAddresses
      --timeout SECONDS    for each registry request (default 60)
  -o, --output FORMAT      text (default: one line per referrer), json or yaml
  -h, --help               show this help

Exit status: 0 signed, 1 the image or a push failed (said on standard error), 2 usage, key or configuration errors.
`;

const OUTPUTS = ["text", "json", "yaml"] as const;

export async function runSignImage(argv: string[]): Promise<number> {
  let values;
  let image: { registry: string; repository: string; digest: string };
  let key: ReleaseKey;
  let output: (typeof OUTPUTS)[number];
  let timeoutSeconds: number;
  try {
    const parsed = parseCommandArgs(
      argv,
      {
        key: { type: "string" },
        "source-revision": { type: "string" },
        "builder-id": { type: "string" },
        authfile: { type: "string" },
        registries: { type: "string" },
        timeout: { type: "string", default: "60" },
        output: { type: "string", short: "o", default: "text" },
      },
      true,
    );
    values = parsed.values;
    if (parsed.positionals.length !== 1) throw new UsageError("give one image, by digest: REGISTRY/REPOSITORY@sha256:DIGEST");
    const ref = parseImageReference(parsed.positionals[0]!);
    if (!ref.ok) throw new UsageError(`${parsed.positionals[0]}: ${ref.error}`);
    if (ref.ref.digest === undefined || !ref.ref.digest.startsWith("sha256:"))
      throw new UsageError(`${parsed.positionals[0]}: name the image by its sha256 digest (REGISTRY/REPOSITORY@sha256:DIGEST): a tag can move`);
    image = { registry: ref.ref.registry, repository: ref.ref.repository, digest: ref.ref.digest };
    if (values.key === undefined) throw new UsageError("give the release signing key with --key FILE");
    if (!OUTPUTS.includes(values.output as (typeof OUTPUTS)[number]))
      throw new UsageError(`--output must be one of ${OUTPUTS.join(", ")}, got ${values.output}`);
    output = values.output as (typeof OUTPUTS)[number];
    if (!/^\d+$/.test(values.timeout!) || Number(values.timeout) < 1)
      throw new UsageError(`--timeout must be a whole number of seconds, got ${values.timeout}`);
    timeoutSeconds = Number(values.timeout);
    if (values["builder-id"] !== undefined && !URL.canParse(values["builder-id"]))
      throw new UsageError(`--builder-id must be a URI, got ${values["builder-id"]}`);
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("sign-image", e.message);
    throw e;
  }

  let client: RegistryClient;
  try {
    key = readSigningKey(values.key);
    const authFile = values.authfile ?? defaultAuthFile();
    const access = await registryAccess({ ...(values.registries ? { registries: values.registries } : {}), ...(authFile ? { authFile } : {}) });
    client = new RegistryClient({
      ...(access.registries ? { settings: access.registries } : {}),
      ...(access.staticCredentials ? { credentials: access.staticCredentials } : {}),
      requestTimeoutMs: timeoutSeconds * 1000,
    });
  } catch (e) {
    process.stderr.write(`imprimatur sign-image: ${errorText(e)}\n`);
    return 2;
  }
  let signed: SignedImage;
  try {
    signed = await signImage(client, {
      image,
      key,
      imprimaturVersion: pkg.version,
      ...(values["source-revision"] !== undefined ? { sourceRevision: values["source-revision"] } : {}),
      ...(values["builder-id"] !== undefined ? { builderId: values["builder-id"] } : {}),
    });
  } catch (e) {
    if (!(e instanceof ImprimaturError)) throw e;
    process.stderr.write(`imprimatur sign-image: ${e.message}\n`);
    return 1;
  } finally {
    await client.close();
  }
  if (output === "json") process.stdout.write(`${JSON.stringify(signed, null, 2)}\n`);
  else if (output === "yaml") process.stdout.write(stringify(signed));
  else process.stdout.write(signedLines(signed).join("\n") + "\n");
  return 0;
}

/** One line per referrer, and where they are listed: what sign-image and install --signing-key print. */
export function signedLines(signed: SignedImage): string[] {
  const lines = [`signed     ${signed.image} with key ${signed.key}`];
  for (const r of signed.referrers) {
    const extra = r.part === "sbom" && signed.sbomPackages !== undefined ? `, ${signed.sbomPackages} npm packages` : "";
    lines.push(`${r.part.padEnd(10)} ${r.digest} (${r.predicateType}${extra})`);
  }
  lines.push(
    signed.referrersIndex
      ? `referrers  tag ${signed.referrersIndex.tag} lists ${signed.referrersIndex.entries} (the registry has no Referrers API)`
      : "referrers  listed by the registry's Referrers API",
  );
  return lines;
}
