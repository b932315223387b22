// `imprimatur node-records`: who may use which image on this node, from the node proxy's state folder (read
// only; safe while the proxy runs).
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "yaml";
import { fileProblem } from "../fs/file-problem.ts";
import { readRecordsFolder } from "../node/record-store.ts";
import { errorText, parseCommandArgs, usageFailure, UsageError } from "./args.ts";

export const DEFAULT_NODE_STATE_DIR = "/var/lib/imprimatur/node-proxy";

export const NODE_RECORDS_USAGE = `Usage: imprimatur node-records [--state-dir DIR] [-o text|json|yaml]

Lists the node proxy's pull records: for each image on the node that went through the proxy, and each repository
name it was pulled under, who may use it — every pod (pulled anonymously), or pods that show one of the recorded
credentials (kept as keyed hashes; the last pods that presented each are named). Also lists the names preloaded
images had before the proxy first ran (preloaded under those names only), pulls in progress (intents), records
that cannot be read (pods must then show credentials), and whether the first start's snapshot of preloaded images
was taken (a warning when it is missing: then no image counts as preloaded).

  --state-dir DIR      the node proxy's --state-dir (default ${DEFAULT_NODE_STATE_DIR})
  -o, --output FORMAT  text (default: one line per image and repository, and a summary), json or yaml

Exit status: 0 when every record is readable, 1 when some cannot be read, 2 on usage errors or a folder that is
missing, empty or not the node proxy's (one line naming it and why).
`;

const OUTPUTS = ["text", "json", "yaml"] as const;

interface Row {
  imageRef: string;
  repository?: string;
  access: "all-pods" | "credentials" | "nobody" | "unreadable" | "preloaded";
  credentials?: Array<{ credentialHash: string; presentedBy: string[] }>;
  lastUpdatedTime?: string;
  file?: string;
  reason?: string;
}

export async function runNodeRecords(argv: string[]): Promise<number> {
  let values;
  try {
    values = parseCommandArgs(argv, {
      "state-dir": { type: "string", default: DEFAULT_NODE_STATE_DIR },
      output: { type: "string", short: "o", default: "text" },
    }).values;
    if (!OUTPUTS.includes(values.output as (typeof OUTPUTS)[number]))
      throw new UsageError(`--output must be one of ${OUTPUTS.join(", ")}, got ${values.output}`);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    return usageFailure("node-records", e.message);
  }
  const notStateFolder = await stateFolderProblem(values["state-dir"]!);
  if (notStateFolder) {
    process.stderr.write(`imprimatur node-records: ${notStateFolder}\n`);
    return 2;
  }
  let folder: Awaited<ReturnType<typeof readRecordsFolder>>;
  try {
    folder = await readRecordsFolder(values["state-dir"]!);
  } catch (e) {
    process.stderr.write(`imprimatur node-records: cannot read ${values["state-dir"]}: ${errorText(e)}\n`);
    return 2;
  }

  const rows: Row[] = [];
  for (const r of folder.records) {
    if (r.state === "unreadable") {
      rows.push({ imageRef: "?", access: "unreadable", file: r.file, reason: r.reason });
      continue;
    }
    const repositories = Object.entries(r.record.credentialMapping);
    if (repositories.length === 0) rows.push({ imageRef: r.record.imageRef, access: "nobody", lastUpdatedTime: r.record.lastUpdatedTime });
    for (const [repository, who] of repositories) {
      rows.push({
        imageRef: r.record.imageRef,
        repository,
        access: who.nodePodsAccessible ? "all-pods" : "credentials",
        ...(who.credentials
          ? {
              credentials: who.credentials.map((c) => ({
                credentialHash: c.credentialHash,
                presentedBy: c.presentedBy.map((p) => `${p.namespace}/${p.name}`),
              })),
            }
          : {}),
        lastUpdatedTime: r.record.lastUpdatedTime,
      });
    }
  }
  // Preloaded under a name until a pull under that name went through the proxy (then its record says who may).
  const mapped = new Set(rows.filter((r) => r.repository !== undefined).map((r) => `${r.imageRef} ${r.repository}`));
  for (const { imageRef, repositories } of folder.preloaded) {
    for (const repository of repositories) if (!mapped.has(`${imageRef} ${repository}`)) rows.push({ imageRef, repository, access: "preloaded" });
  }
  const intents = folder.intents.map((i) => i.intent?.image ?? `unreadable intent ${i.file}: ${i.reason}`);
  const unreadable = rows.filter((r) => r.access === "unreadable").length;
  const summary = {
    snapshot: folder.snapshot,
    ...(folder.snapshotTime ? { snapshotTime: folder.snapshotTime } : {}),
    records: folder.records.length,
    unreadable,
    preloaded: rows.filter((r) => r.access === "preloaded").length,
    pullsInProgress: intents.length,
  };

  if (values.output === "json") process.stdout.write(`${JSON.stringify({ images: rows, pullsInProgress: intents, summary }, null, 2)}\n`);
  else if (values.output === "yaml") process.stdout.write(stringify({ images: rows, pullsInProgress: intents, summary }));
  else {
    for (const r of rows) process.stdout.write(`${describe(r)}\n`);
    for (const i of intents) process.stdout.write(`pull in progress (or interrupted): ${i}\n`);
    process.stdout.write(`${SNAPSHOT_LINES[folder.snapshot]}${folder.snapshotTime ? ` (${folder.snapshotTime})` : ""}\n`);
    process.stdout.write(
      `${summary.records} record${summary.records === 1 ? "" : "s"}, ${unreadable} unreadable, ${summary.preloaded} preloaded name${summary.preloaded === 1 ? "" : "s"}, ${intents.length} pull${intents.length === 1 ? "" : "s"} in progress\n`,
    );
  }
  return unreadable > 0 ? 1 : 0;
}

/** Why DIR is not a node proxy state folder, in one sentence naming it; undefined when it is one. */
async function stateFolderProblem(dir: string): Promise<string | undefined> {
  let isFolder: boolean;
  try {
    isFolder = (await stat(dir)).isDirectory();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return `no state folder at ${dir}: it does not exist (has the node proxy run with this --state-dir?)`;
    return `cannot read the state folder ${dir}: ${fileProblem(e)}`;
  }
  if (!isFolder) return `${dir} is a file, not the node proxy's state folder`;
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch (e) {
    return `cannot read the state folder ${dir}: ${fileProblem(e)}`;
  }
  if (entries.length === 0) return `the state folder ${dir} is empty: the node proxy has not started with this --state-dir yet`;
  const pulled = await stat(join(dir, "pulled")).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!pulled) return `${dir} is not the node proxy's state folder: it has no pulled/ folder of records`;
  return undefined;
}

const SNAPSHOT_LINES = {
  taken: "preloaded-image snapshot: taken at the first start",
  due: "preloaded-image snapshot: not taken yet (no start of the proxy has completed): the next start records the images then on the node as preloaded",
  missing:
    "warning: no preloaded-image snapshot, although the proxy has started before (records or intents exist): no image counts as preloaded, so pods must show credentials for images baked into the node",
} as const;

function describe(r: Row): string {
  switch (r.access) {
    case "all-pods":
      return `${r.imageRef} ${r.repository}: every pod (pulled without credentials)`;
    case "credentials": {
      const list = (r.credentials ?? []).map((c) => `${c.credentialHash.slice(0, 24)}… (last presented by ${c.presentedBy.join(", ") || "?"})`);
      return `${r.imageRef} ${r.repository}: pods showing ${list.length === 1 ? "this credential" : `one of ${list.length} credentials`}: ${list.join("; ")}`;
    }
    case "nobody":
      return `${r.imageRef}: nobody yet (a pull was interrupted): every pod must show credentials`;
    case "unreadable":
      return `record ${r.file} cannot be read (${r.reason}): pods must show credentials for its image`;
    case "preloaded":
      return `${r.imageRef} ${r.repository}: preloaded (on the node under this name before the proxy first ran)`;
  }
}
