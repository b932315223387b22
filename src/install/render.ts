// The manifests install applies: a kustomization rendered by the user's kubectl (`kubectl kustomize`, the same
// kustomize as `kubectl apply -k`), read into objects. Without --kustomize, the install shipped in deploy/ that
// fits the cluster: deploy/base, or deploy/overlays/kube-1.20 on a cluster older than v1.21 (no policy/v1
// PodDisruptionBudget there).
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { PROJECT_DIR } from "../image-build/build-image.ts";
import { InstallError } from "./install-error.ts";
import type { KubeObject } from "./install-plan.ts";
import type { Kubectl } from "./kubectl.ts";

export const DEPLOY_DIR = join(PROJECT_DIR, "deploy");
export const DEFAULT_POLICIES_DIR = join(DEPLOY_DIR, "default-policies");

export interface ServerVersion {
  major: number;
  minor: number;
  gitVersion: string;
}

/** The apiserver's version, from `kubectl version`; undefined when the cluster cannot be reached. */
export async function serverVersion(kubectl: Kubectl): Promise<ServerVersion | { unreachable: string }> {
  const result = await kubectl.run(["version", "-o", "json"], { timeoutMs: 30_000 });
  let parsed: { serverVersion?: { major?: string; minor?: string; gitVersion?: string } } = {};
  try {
    parsed = JSON.parse(result.stdout);
  } catch {
    // kubectl prints the error on stderr
  }
  const server = parsed.serverVersion;
  if (!server?.major || !server.minor) return { unreachable: result.stderr.trim() || "kubectl version printed no server version" };
  return {
    major: Number.parseInt(server.major, 10),
    minor: Number.parseInt(server.minor, 10),
    gitVersion: server.gitVersion ?? `v${server.major}.${server.minor}`,
  };
}

/** The shipped install for a cluster of this version. */
export function shippedInstallFor(version: ServerVersion | undefined): string {
  if (version && version.major === 1 && version.minor < 21) return join(DEPLOY_DIR, "overlays", "kube-1.20");
  return join(DEPLOY_DIR, "base");
}

/** `kubectl kustomize DIR`, as objects (a List's items flattened). */
export async function renderKustomization(kubectl: Kubectl, dir: string): Promise<KubeObject[]> {
  const result = await kubectl.run(["kustomize", dir], { timeoutMs: 60_000 });
  if (result.code !== 0) throw new InstallError("manifests", `kubectl kustomize ${dir} failed: ${result.stderr.trim()}`);
  return readObjects(result.stdout, `kubectl kustomize ${dir}`);
}

export function readObjects(text: string, source: string): KubeObject[] {
  const objects: KubeObject[] = [];
  for (const document of parseAllDocuments(text)) {
    if (document.errors.length > 0) throw new InstallError("manifests", `${source}: ${document.errors[0]!.message}`);
    const value = document.toJS() as unknown;
    if (value === null || value === undefined) continue;
    const object = value as Partial<KubeObject> & { items?: unknown[] };
    if (typeof object.kind === "string" && object.kind.endsWith("List") && Array.isArray(object.items)) {
      objects.push(...(object.items as KubeObject[]));
    } else if (typeof object.kind === "string" && typeof object.apiVersion === "string" && typeof object.metadata?.name === "string") {
      objects.push(object as KubeObject);
    } else {
      throw new InstallError("manifests", `${source}: a document without apiVersion, kind and metadata.name`);
    }
  }
  return objects;
}
