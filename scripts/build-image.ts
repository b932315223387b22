// `npm run image`: builds the container image of `imprimatur serve` as an OCI image layout (src/image-build/,
// which `imprimatur install` uses too) and prints its digest.
import { realpathSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { buildImage, PROJECT_DIR } from "../src/image-build/build-image.ts";

// ---------------------------------------------------------------------------------------------
// Command line

export const USAGE = `Usage: npm run image -- [options]
       node scripts/build-image.ts [options]

Builds the container image of imprimatur as an OCI image layout (no Docker needed) and prints its digest.

  -o, --output DIR     layout folder (default build/image); an existing layout gains the tag
  -t, --tag TAG        tag in the layout (default: the package version)
      --commit SHA     revision label and IMPRIMATUR_COMMIT (default: $IMPRIMATUR_COMMIT, else git HEAD)
      --no-cache       compile and compress everything again instead of reusing the cached output
  -h, --help           show this help

Push it: skopeo copy --preserve-digests oci:DIR:TAG docker://HOST/REPOSITORY:TAG
`;

export async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        output: { type: "string", short: "o", default: join(PROJECT_DIR, "build", "image") },
        tag: { type: "string", short: "t" },
        commit: { type: "string" },
        "no-cache": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    process.stderr.write(`build-image: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  try {
    const image = await buildImage({
      outputDir: values.output!,
      ...(values.tag !== undefined ? { tag: values.tag } : {}),
      ...(values.commit !== undefined ? { commit: values.commit } : {}),
      ...(values["no-cache"] ? { layerCache: false as const } : {}),
      log: (line) => process.stderr.write(`${line}\n`),
    });
    process.stderr.write(
      [
        `imprimatur ${image.version} (revision ${image.revision}), linux/${image.architecture}`,
        `layout: ${image.layoutDir} (tag ${image.tag})`,
        `push:   skopeo copy --preserve-digests oci:${image.layoutDir}:${image.tag} docker://HOST/imprimatur:${image.tag}`,
        "",
      ].join("\n"),
    );
    process.stdout.write(`${image.digest}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`build-image: ${(err as Error).message}\n`);
    return 1;
  }
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
