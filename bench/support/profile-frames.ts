// What a V8 CPU profile (node --cpu-prof) says ran: of the samples taken inside some code (the engine's review),
// the share whose stack passes through other code. A benchmark uses it to show that a path did not run (no
// JMESPath, CEL or signature check in the reviews of cached admissions).
import { readFile } from "node:fs/promises";

interface ProfileNode {
  id: number;
  callFrame: { url: string; functionName: string };
  children?: number[];
}

export interface FrameShare {
  /** Samples with a frame of `within` on the stack. */
  samples: number;
  /** Of those, samples with a frame of a matching file on the stack. */
  matching: number;
  /** The matching functions seen, "name file", at most 10. */
  functions: string[];
}

interface Place {
  /** The matching frame nearest to the node on its stack, if any. */
  found: string | null;
  /** A frame of `within` is on its stack. */
  inside: boolean;
}

export async function samplesThrough(profilePath: string, within: RegExp, files: RegExp): Promise<FrameShare> {
  const profile = JSON.parse(await readFile(profilePath, "utf8")) as { nodes: ProfileNode[]; samples: number[] };
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // Worked out once per node, not per sample.
  const places = new Map<number, Place>();
  const placeOf = (id: number): Place => {
    const known = places.get(id);
    if (known) return known;
    const { url, functionName } = byId.get(id)!.callFrame;
    const up = parent.get(id);
    const above: Place = up === undefined ? { found: null, inside: false } : placeOf(up);
    const own = files.test(url) ? `${functionName || "(anonymous)"} ${url.replace(/^.*\/(src|node_modules)\//, "$1/")}` : null;
    const place = { found: own ?? above.found, inside: above.inside || within.test(url) };
    places.set(id, place);
    return place;
  };
  let samples = 0;
  let matching = 0;
  const functions = new Set<string>();
  for (const id of profile.samples) {
    const { found, inside } = placeOf(id);
    if (!inside) continue;
    samples++;
    if (found === null) continue;
    matching++;
    if (functions.size < 10) functions.add(found);
  }
  return { samples, matching, functions: [...functions] };
}
