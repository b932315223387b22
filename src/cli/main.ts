// Command dispatch. Exit codes: 0 success/allowed, 1 denied, 2 usage or load errors.
import { runCheck, CHECK_USAGE } from "./check.ts";
import { runServe, SERVE_USAGE } from "./serve.ts";

const USAGE = `imprimatur — decides which container images may run on Kubernetes, and proves why.

Usage:
  imprimatur serve [options]     run the HTTPS ImageReview backend and admission webhook
  imprimatur check [options]     evaluate manifests offline against policies
  imprimatur help [command]      show help
  imprimatur version

Run "imprimatur help serve" or "imprimatur help check" for options.
`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "serve":
      return runServe(rest);
    case "check":
      return runCheck(rest);
    case "version":
    case "--version":
      process.stdout.write(`imprimatur ${await version()}\n`);
      return 0;
    case undefined:
    case "help":
    case "--help":
    case "-h": {
      const topic = rest[0];
      process.stdout.write(topic === "serve" ? SERVE_USAGE : topic === "check" ? CHECK_USAGE : USAGE);
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
