// CPU time of a server as the benchmarks count it: the process and every process it started (serve --workers runs
// its workers as children), read from /proc.
import { readdirSync, readFileSync } from "node:fs";

/** The fields of /proc/PID/stat after "(comm)": state is [0], ppid [1], utime [11], stime [12] (clock ticks). */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** The processes `pid` started, and theirs (read from every process's parent in /proc). */
export function descendants(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const ppid = Number(statFields(Number(entry))?.[1]);
    if (!Number.isFinite(ppid)) continue;
    const children = parents.get(ppid);
    if (children) children.push(Number(entry));
    else parents.set(ppid, [Number(entry)]);
  }
  const found: number[] = [];
  const walk = (p: number) => {
    for (const child of parents.get(p) ?? []) {
      found.push(child);
      walk(child);
    }
  };
  walk(pid);
  return found;
}

/**
 * CPU time (user + system, all threads) in ms of `pid` and the processes it started, as they run now (a child that
 * exited is not counted); undefined where there is no /proc.
 */
export function processTreeCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  const own = statFields(pid);
  if (!own) return undefined;
  let ticks = 0;
  for (const p of [pid, ...descendants(pid)]) {
    const fields = p === pid ? own : statFields(p);
    if (fields) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks * 10; // USER_HZ is 100 on Linux
}
