// CPU pinning for the benchmarks (project standard: both sides get the same resources, and the load generator
// stays off the servers' core, so no ratio is flattered).
import { spawnSync } from "node:child_process";
import { findCommand } from "../../test/support/executables.ts";
import { descendants } from "./process-cpu.ts";

/** The taskset program, or null when it is not installed (the benchmarks then run unpinned and say so). */
export function findTaskset(): string | null {
  return findCommand("taskset");
}

/**
 * Pins every thread of `pid` to `cpu` with `taskset -a`; threads started later inherit it. Returns what
 * happened, for the report.
 */
export function pin(taskset: string | null, pid: number | undefined, cpu: number, what: string): string {
  if (pid === undefined) return `${what}: no pid`;
  if (!taskset) return `${what}: not pinned (no taskset)`;
  const r = spawnSync(taskset, ["-a", "-p", "-c", String(cpu), String(pid)], { encoding: "utf8" });
  return r.status === 0 ? `${what} on CPU ${cpu}` : `${what}: taskset failed (${(r.stderr || r.error?.message || "").trim()})`;
}

/** pin() for `pid` and every process it started (serve --workers): one CPU for all of them. */
export function pinTree(taskset: string | null, pid: number | undefined, cpu: number, what: string): string {
  if (pid === undefined) return pin(taskset, pid, cpu, what);
  const children = descendants(pid);
  const pinned = [pin(taskset, pid, cpu, what), ...children.map((child) => pin(taskset, child, cpu, `${what} (process ${child})`))];
  return children.length === 0
    ? pinned[0]!
    : pinned.every((p) => / on CPU \d+$/.test(p))
      ? `${what} and its ${children.length} processes on CPU ${cpu}`
      : pinned.join(", ");
}
