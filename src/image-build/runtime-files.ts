// The runtime layer's inputs: the Node.js binary of the `node` package and the shared libraries it loads, as
// `ldd` lists them on the build machine (glibc and libstdc++ from the host, and the dynamic loader at the path
// the binary names). Each library goes to the path ldd shows, as a regular file with the content of its final
// target, so the image needs no symlinks and the loader finds everything in its default folders.
import { execFileSync } from "node:child_process";
import { readFileSync, realpathSync, statSync } from "node:fs";
import { ImageBuildError } from "./image-build-error.ts";

export interface SharedLibrary {
  /** Absolute path the binary loads it from, as ldd lists it (also its path in the image). */
  path: string;
  /** The host file with its content (symlinks followed). */
  source: string;
}

/** The libraries in `ldd` output, the dynamic loader included; the vDSO (no file) is left out. */
export function parseLdd(output: string, binary: string): SharedLibrary[] {
  const libraries: SharedLibrary[] = [];
  for (const raw of output.split("\n")) {
    const line = raw.trim();
    if (line === "" || /statically linked/.test(line)) continue;
    const missing = /^(\S+) => not found$/.exec(line);
    if (missing) throw new ImageBuildError("runtime", `${binary} needs ${missing[1]}, which is not installed on this machine`);
    const mapped = /^\S+ => (\/\S+) \(0x[0-9a-f]+\)$/.exec(line);
    const direct = /^(\/\S+) \(0x[0-9a-f]+\)$/.exec(line);
    const path = mapped?.[1] ?? direct?.[1];
    if (path !== undefined) libraries.push({ path, source: path });
    else if (!/^\S+ \(0x[0-9a-f]+\)$/.test(line)) throw new ImageBuildError("runtime", `unexpected line in ldd output for ${binary}: ${line}`);
  }
  return libraries;
}

/** Runs ldd on the binary and resolves each library to the file holding its content. */
export function sharedLibraries(binary: string): SharedLibrary[] {
  let output: string;
  try {
    output = execFileSync("ldd", [binary], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (err) {
    throw new ImageBuildError("runtime", `ldd ${binary} failed: ${(err as Error).message}`, { cause: err });
  }
  return parseLdd(output, binary).map((lib) => ({ path: lib.path, source: realpathSync(lib.path) }));
}

/** Reads a runtime input, naming the file when it cannot. */
export function readRuntimeFile(path: string): { content: Buffer; executable: boolean } {
  try {
    const content = readFileSync(path);
    return { content, executable: (statSync(path).mode & 0o111) !== 0 };
  } catch (err) {
    throw new ImageBuildError("runtime", `cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/** OCI architecture names for Node's process.arch. */
export function ociArchitecture(arch: string = process.arch): string {
  const names: Record<string, string> = { x64: "amd64", arm64: "arm64", arm: "arm", ppc64: "ppc64le", s390x: "s390x", riscv64: "riscv64" };
  return names[arch] ?? arch;
}
