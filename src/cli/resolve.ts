// `imprimatur resolve`: what each image's tag points to now, as `IMAGE@sha256:…` — the same resolution the
// /mutate webhook pins with, for pinning manifests in CI before they reach the cluster (digestVerify).
import { parseImageReference } from "../core/image-reference.ts";
import { pinnedReference } from "../core/image-policy/digest-pinning.ts";
import { RegistryClient } from "../registry/registry-client.ts";
import { RegistryError } from "../registry/registry-error.ts";
import { errorText, parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { registryAccess } from "./registry-access.ts";

export const RESOLVE_USAGE = `Usage: imprimatur resolve [options] IMAGE...

Prints one line per image: the image as given, pinned to the digest its tag points to now
(nginx:1.25 → nginx:1.25@sha256:...). For a multi-platform image that is the digest of its index, which
the container runtime resolves to the node's platform; --platform picks one platform's manifest instead.
The manifest is fetched and its digest verified, not just taken from a header.

  --authfile FILE      registry credentials: {"auths": {"registry.example.com": {"auth": "base64(user:pass)"}}}
                       (or username/password, identitytoken) — the container tools' auth file format
  --registries FILE    RegistryConfig: per-registry CA, client certificate, insecure (plain HTTP), mirrors, and
                       the hosts on local addresses that may be reached (allowLocalAddresses; others are refused)
  --platform OS/ARCH   e.g. linux/amd64 or linux/arm64/v8: print that platform's manifest digest
  --timeout SECONDS    per image (default 30)

Exit status: 0 all resolved, 1 some could not be resolved (reason on stderr), 2 usage or config errors.
`;

export async function runResolve(argv: string[]): Promise<number> {
  let values;
  let images: string[];
  let platform: { os: string; architecture: string; variant?: string } | undefined;
  try {
    const parsed = parseCommandArgs(
      argv,
      {
        authfile: { type: "string" },
        registries: { type: "string" },
        platform: { type: "string" },
        timeout: { type: "string", default: "30" },
      },
      true,
    );
    values = parsed.values;
    images = parsed.positionals;
    if (images.length === 0) throw new UsageError("give at least one image");
    if (!/^\d+$/.test(values.timeout!) || Number(values.timeout) < 1)
      throw new UsageError(`--timeout must be a whole number of seconds, got ${values.timeout}`);
    if (values.platform !== undefined) {
      const [os, architecture, variant, ...rest] = values.platform.split("/");
      if (!os || !architecture || rest.length > 0) throw new UsageError(`--platform must be OS/ARCH or OS/ARCH/VARIANT, got ${values.platform}`);
      platform = { os, architecture, ...(variant ? { variant } : {}) };
    }
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("resolve", e.message);
    throw e;
  }

  let access;
  try {
    access = await registryAccess({
      ...(values.registries ? { registries: values.registries } : {}),
      ...(values.authfile ? { authFile: values.authfile } : {}),
    });
  } catch (e) {
    process.stderr.write(`imprimatur resolve: ${errorText(e)}\n`);
    return 2;
  }
  const client = new RegistryClient({
    ...(access.registries ? { settings: access.registries } : {}),
    ...(access.staticCredentials ? { credentials: access.staticCredentials } : {}),
  });
  let failed = 0;
  try {
    for (const image of images) {
      const parsed = parseImageReference(image);
      if (!parsed.ok) {
        process.stderr.write(`${image}: ${parsed.error}\n`);
        failed++;
        continue;
      }
      try {
        const signal = AbortSignal.timeout(Number(values.timeout) * 1000);
        const resolved = await client.resolveDigest(parsed.ref, { signal });
        let digest = resolved.digest;
        if (platform) {
          const match = resolved.manifests?.find(
            (m) =>
              m.platform?.os === platform.os &&
              m.platform.architecture === platform.architecture &&
              (!platform.variant || m.platform.variant === platform.variant),
          );
          if (resolved.manifests && !match)
            throw new RegistryError(
              "not-found",
              `no manifest for ${values.platform} in the index (it has ${resolved.manifests.map((m) => (m.platform ? [m.platform.os, m.platform.architecture, m.platform.variant].filter(Boolean).join("/") : "?")).join(", ")})`,
              { registry: parsed.ref.registry, repository: parsed.ref.repository },
            );
          if (match) digest = (await client.getManifest({ ...parsed.ref, digest: match.digest }, { signal })).digest;
        }
        const base = parsed.ref.digest ? image.slice(0, image.lastIndexOf("@")) : image;
        process.stdout.write(`${pinnedReference(base, digest)}\n`);
      } catch (e) {
        process.stderr.write(`${image}: ${(e as Error).message}\n`);
        failed++;
      }
    }
  } finally {
    await client.close();
  }
  return failed > 0 ? 1 : 0;
}
