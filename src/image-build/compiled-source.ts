// The image's src/ as JavaScript compiled from the TypeScript of the checkout. Node.js can run the .ts files as
// they are, but its type stripping costs the server 20–30 MiB of memory for as long as it runs; the image
// carries the compiled files instead, and no .ts at all (bin/imprimatur.js loads src/cli/main.js when main.ts is
// absent).
//
// Each file is compiled on its own by the project's TypeScript (node_modules/typescript, the version
// package-lock.json pins), with ts.transpileModule: no type check, so type errors never decide whether an image
// builds (the tests check types), while a file TypeScript cannot parse stops the build. The output is what
// tsconfig.json's options give (ES2024, imports as written: verbatimModuleSyntax), with the `./x.ts` of static and
// dynamic imports rewritten to `./x.js` (rewriteRelativeImportExtensions). The module kind is esnext rather than
// tsconfig.json's nodenext: transpileModule sees one file and not package.json's "type": "module", so with nodenext
// it would emit CommonJS; for ES modules the two give the same JavaScript. No source maps, no declarations.
//
// The layout stays (src/a/b.ts becomes src/a/b.js) and every other file is kept as it is, so reads relative to a
// module (new URL("./x.json", import.meta.url), `import … with { type: "json" }`) find what they found before.
// The output depends on the sources and the TypeScript version only, so the image stays reproducible. It is
// cached by that (a digest of the TypeScript version, the options, the file's path and its text), one file each,
// so a build after a small change compiles that file only.
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type TypeScript from "typescript";
import { keepCached, readCached } from "./build-cache.ts";
import { ImageBuildError } from "./image-build-error.ts";
import { lockedVersion, readLockfile } from "./production-dependencies.ts";
import type { TarEntry } from "./reproducible-tar.ts";

/** Compiles one TypeScript file (its text, its path for messages) to JavaScript. */
export interface SourceCompiler {
  compile(text: string, path: string): string;
}

const TYPESCRIPT_KEY = "node_modules/typescript";

/**
 * The project's own TypeScript as a SourceCompiler, keeping what it compiles in `cacheDir` when given. Throws
 * ImageBuildError "node-modules" when it is not installed (npm ci --omit=dev leaves it out) or is not the version
 * package-lock.json names.
 */
export function projectCompiler(projectDir: string, cacheDir?: string): SourceCompiler {
  const folder = join(projectDir, TYPESCRIPT_KEY);
  if (!existsSync(join(folder, "package.json"))) {
    throw new ImageBuildError("node-modules", `${folder} not found: run npm ci (the image's JavaScript is compiled with the typescript dev dependency)`);
  }
  const ts = createRequire(import.meta.url)(folder) as typeof TypeScript;
  const locked = lockedVersion(readLockfile(projectDir), TYPESCRIPT_KEY);
  if (locked !== undefined && ts.version !== locked) {
    throw new ImageBuildError("node-modules", `typescript is ${ts.version} in node_modules but ${locked} in package-lock.json: run npm ci`);
  }
  const compilerOptions: TypeScript.CompilerOptions = {
    target: ts.ScriptTarget.ES2024,
    module: ts.ModuleKind.ESNext,
    verbatimModuleSyntax: true,
    rewriteRelativeImportExtensions: true,
    newLine: ts.NewLineKind.LineFeed,
    sourceMap: false,
    inlineSourceMap: false,
    declaration: false,
  };
  const compile = (text: string, path: string): string => {
    const output = ts.transpileModule(text, { fileName: path, compilerOptions, reportDiagnostics: true });
    const problems = output.diagnostics ?? [];
    if (problems.length > 0) {
      const first = problems[0]!;
      const where = first.file && first.start !== undefined ? `:${first.file.getLineAndCharacterOfPosition(first.start).line + 1}` : "";
      throw new ImageBuildError("input", `${path}${where}: ${ts.flattenDiagnosticMessageText(first.messageText, " ")}`);
    }
    return output.outputText;
  };
  if (cacheDir === undefined) return { compile };
  const settings = JSON.stringify([ts.version, compilerOptions]);
  return {
    compile(text, path) {
      const key = createHash("sha256").update(settings).update("\0").update(path).update("\0").update(text).digest("hex");
      const cached = join(cacheDir, `${key}.js`);
      const kept = readCached(cached);
      if (kept !== undefined) return kept.toString("utf8");
      const js = compile(text, path);
      keepCached(cached, js);
      return js;
    },
  };
}

/**
 * The entries of src/ as the image holds them: each .ts file replaced by its .js (same folder, same mode), .d.ts
 * files left out, everything else unchanged. Throws ImageBuildError "input" for TypeScript it does not compile
 * (.mts, .cts, .tsx) and for a symlink to or at a .ts file (its target would not be in the image).
 */
export function compiledSourceEntries(entries: readonly TarEntry[], compiler: SourceCompiler): TarEntry[] {
  const out: TarEntry[] = [];
  for (const entry of entries) {
    if (entry.type === "dir") {
      out.push(entry);
    } else if (entry.type === "symlink") {
      if (isTypeScript(entry.path) || isTypeScript(entry.target)) {
        throw new ImageBuildError("input", `${entry.path} is a symlink to ${entry.target}: the image has no TypeScript files to link`);
      }
      out.push(entry);
    } else if (entry.path.endsWith(".d.ts")) {
      continue;
    } else if (entry.path.endsWith(".ts")) {
      const js = compiler.compile(entry.content.toString("utf8"), entry.path);
      out.push({ ...entry, path: `${entry.path.slice(0, -".ts".length)}.js`, content: Buffer.from(js, "utf8") });
    } else if (isTypeScript(entry.path)) {
      throw new ImageBuildError("input", `${entry.path}: only .ts files are compiled for the image (not .mts, .cts or .tsx)`);
    } else {
      out.push(entry);
    }
  }
  return out;
}

function isTypeScript(path: string): boolean {
  return /\.(?:[cm]?ts|tsx)$/.test(path);
}
