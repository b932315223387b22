// Command dispatch. Exit codes: 0 success/allowed, 1 denied, 2 usage or load errors.
import { runCheck, CHECK_USAGE } from "./check.ts";
import { runProfiles, PROFILES_USAGE } from "./profiles.ts";
import { runResolve, RESOLVE_USAGE } from "./resolve.ts";
import { runServe, SERVE_USAGE } from "./serve.ts";

const USAGE = `imprimatur — decides which container images may run on Kubernetes, and proves why.

Usage:
  imprimatur serve [options]     run the HTTPS ImageReview backend and admission webhook
  imprimatur check [options]     evaluate manifests offline against policies
  imprimatur profiles [NAME]     list the shipped PodRestriction profiles (Pod Security Standards)
  imprimatur resolve IMAGE...    print each image pinned to the digest its tag points to now
  imprimatur help [command]      show help
  imprimatur version

Run "imprimatur help COMMAND" (serve, check, profiles, resolve) for options.
`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve":
      return runServe(rest);
    case "check":
      return runCheck(rest);
    case "profiles":
      return runProfiles(rest);
    case "resolve":
      return runResolve(rest);
    case "version":
    case "--version":
      process.stdout.write(`imprimatur ${await version()}\n`);
      return 0;
    case undefined:
    case "help":
    case "--help":
    case "-h": {
      const topic = rest[0];
      const topics: Record<string, string> = { serve: SERVE_USAGE, check: CHECK_USAGE, profiles: PROFILES_USAGE, resolve: RESOLVE_USAGE };
      process.stdout.write(topics[topic ?? ""] ?? USAGE);
      return 0;
    }
    default:
      process.stderr.write(`imprimatur: unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
      return 2;
  }
}

async function version(): Promise<string> {
  const pkg = await import("../../package.json", { with: { type: "json" } });
  return pkg.default.version;
}
