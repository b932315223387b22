// `npm run crds`: writes the policy kinds' CustomResourceDefinitions and their kustomization to deploy/crds/
// (from the JSON Schemas the loader uses; see src/policy-resources/policy-crds.ts), and the namespaced kinds' JSON Schemas
// for editors (formatted as prettier formats every JSON file here). `--check` only compares, and exits 1 when a
// file differs, for CI.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { format, resolveConfig } from "prettier";
import { namespacedEditorSchemas, renderCrdFiles } from "../src/policy-resources/policy-crds.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

async function main(argv: string[]): Promise<number> {
  if (argv.includes("-h") || argv.includes("--help")) {
    process.stdout.write(
      "Usage: node scripts/generate-crds.ts [--check]\n\nWrites deploy/crds/*.yaml and the namespaced kinds' JSON Schemas; --check compares instead and exits 1 on a difference.\n",
    );
    return 0;
  }
  const unknown = argv.filter((a) => a !== "--check");
  if (unknown.length > 0) {
    process.stderr.write(`generate-crds: unknown argument ${unknown[0]}\n`);
    return 2;
  }
  const check = argv.includes("--check");
  const files = new Map<string, string>();
  for (const [name, text] of renderCrdFiles()) files.set(`deploy/crds/${name}`, text);
  for (const [file, schema] of namespacedEditorSchemas()) {
    const options = { ...(await resolveConfig(join(ROOT, file))), filepath: join(ROOT, file) };
    files.set(file, await format(JSON.stringify(schema), options));
  }
  await mkdir(join(ROOT, "deploy/crds"), { recursive: true });
  let stale = 0;
  for (const [file, text] of files) {
    const path = join(ROOT, file);
    const before = await readFile(path, "utf8").catch(() => undefined);
    if (before === text) continue;
    if (check) {
      stale++;
      process.stderr.write(`${file} is out of date; run npm run crds\n`);
    } else {
      await writeFile(path, text);
      process.stdout.write(`wrote ${file}\n`);
    }
  }
  return stale > 0 ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
