// The files a command reads from a path the user gave: the path itself when it is a file, else the files under
// the folder, recursively, in name order, leaving out hidden entries (ConfigMap mounts keep ..data links there)
// and node_modules. Used for policy folders, manifest folders and policy-test folders alike.
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";

/** Names of policy and manifest files. */
export const YAML_OR_JSON = (name: string): boolean => /\.(ya?ml|json)$/i.test(name);

/** Throws the stat error when `root` cannot be read. */
export async function filesUnder(root: string, wanted: (name: string) => boolean): Promise<string[]> {
  if ((await stat(root)).isFile()) return [root];
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of entries) {
      if (e.name.startsWith(".") || e.name === "node_modules") continue;
      const full = join(dir, e.name);
      if (e.isDirectory()) await walk(full);
      else if (wanted(e.name)) out.push(full);
    }
  };
  await walk(root);
  return out;
}
