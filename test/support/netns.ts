// Network namespaces for the harnesses: a namespace of the test's own keeps a whole cluster's traffic (pods,
// Services, the apiserver, the kubelet) off the host's network, and deleting it removes its links, routes and
// iptables rules with it.
//
// Processes enter one with `nsenter --net=/run/netns/NAME` rather than `ip netns exec NAME`: the latter also
// mounts a fresh /sys for the process, which hides the cgroup mounts beneath it, and the kubelet then cannot start.

import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findCommand } from "./executables.ts";
import { runCommand, type CommandOutput } from "./command.ts";

/** `util-linux`'s nsenter. */
export function nsenterPath(): string {
  const path = findCommand("nsenter");
  if (path === null) throw new Error("nsenter not found (Debian's util-linux)");
  return path;
}

function ipPath(): string {
  const path = findCommand("ip");
  if (path === null) throw new Error("ip not found (Debian's iproute2; scripts/provision-node.sh installs it)");
  return path;
}

/** nsenter's arguments that run `bin args` in the network namespace `netns` (nsenter execs it: same PID). */
export function inNetns(netns: string, bin: string, args: string[]): string[] {
  return [`--net=/run/netns/${netns}`, bin, ...args];
}

export function netnsExists(netns: string): boolean {
  return existsSync(`/run/netns/${netns}`);
}

function ip(args: string[]): void {
  const out = spawnSync(ipPath(), args, { encoding: "utf8" });
  if (out.status !== 0) throw new Error(`ip ${args.join(" ")}: ${(out.stderr || out.error?.message || "").trim()}`);
}

/**
 * Creates the namespace with its loopback up and a bridge holding `gatewayCidr` (e.g. "10.88.77.1/24"), up: the
 * address the components inside bind to and pods route through. Throws if the name is taken.
 */
export function createNetnsWithBridge(netns: string, bridge: string, gatewayCidr: string): void {
  // The first `ip netns add` on a machine creates /run/netns and mounts it onto itself: noted, so that the
  // last namespace of ours to go takes both away again.
  if (!existsSync(NETNS_DIR)) writeFileSync(NETNS_DIR_MARKER, "created by the imprimatur tests\n");
  ip(["netns", "add", netns]);
  try {
    ip(["-n", netns, "link", "set", "lo", "up"]);
    ip(["-n", netns, "link", "add", bridge, "type", "bridge"]);
    ip(["-n", netns, "addr", "add", gatewayCidr, "dev", bridge]);
    ip(["-n", netns, "link", "set", bridge, "up"]);
  } catch (err) {
    deleteNetns(netns);
    throw err;
  }
}

/** Removes the namespace (its links, routes and iptables rules go with it); synchronous for exit-time cleanup. */
export function deleteNetns(netns: string): string | null {
  if (netnsExists(netns)) {
    const out = spawnSync(ipPath(), ["netns", "delete", netns], { encoding: "utf8" });
    if (out.status !== 0) return `ip netns delete ${netns}: ${(out.stderr || out.error?.message || "").trim()}`;
  }
  return removeNetnsDirIfOurs();
}

const NETNS_DIR = "/run/netns";
const NETNS_DIR_MARKER = join(tmpdir(), "imprimatur-created-run-netns");

/** /run/netns, and its mount, go when the tests created it and no namespace is left in it. */
function removeNetnsDirIfOurs(): string | null {
  if (!existsSync(NETNS_DIR_MARKER)) return null;
  try {
    if (existsSync(NETNS_DIR) && readdirSync(NETNS_DIR).length > 0) return null;
    for (let i = 0; i < 5 && isMountPoint(NETNS_DIR); i++) {
      const out = spawnSync(findCommand("umount") ?? "umount", [NETNS_DIR], { encoding: "utf8" });
      if (out.status !== 0) return `umount ${NETNS_DIR}: ${(out.stderr || out.error?.message || "").trim()}`;
    }
    if (existsSync(NETNS_DIR)) rmdirSync(NETNS_DIR);
    rmSync(NETNS_DIR_MARKER, { force: true });
    return null;
  } catch (err) {
    return `removing ${NETNS_DIR}: ${(err as Error).message}`;
  }
}

function isMountPoint(path: string): boolean {
  return readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .some((line) => line.split(" ")[4] === path);
}

/** Runs `bin args` inside the namespace to completion; never rejects (spawn failure or timeout: code -1). */
export function runInNetns(
  netns: string,
  bin: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string; label?: string } = {},
): Promise<CommandOutput> {
  return runCommand(nsenterPath(), inNetns(netns, bin, args), {
    env: opts.env ?? process.env,
    timeoutMs: opts.timeoutMs ?? 30_000,
    label: opts.label ?? `[netns ${netns}] ${bin}`,
    input: opts.input,
  });
}
