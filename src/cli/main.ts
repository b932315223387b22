// Command dispatch. Exit codes: 0 success/allowed, 1 denied, 2 usage or load errors. A usage error is one line
// naming the problem and where the help is (args.ts usageFailure), as kubectl reports one.
// Every command is one entry of COMMANDS: the overview, `help COMMAND`, `COMMAND --help` and the shell
// completion scripts are all made from that table, so adding a command is adding an entry.
import { parseCommandArgs, usageFailure, UsageError, wantsHelp } from "./args.ts";

/** What a command's module provides: its help text and the command itself. */
export interface CommandModule {
  /**
   * The full help: a "Usage: imprimatur NAME …" line, then prose and one line per flag
   * ("  -o, --output text|json   description"). Shell completion reads the flags from it.
   */
  usage: string;
  run(argv: string[]): Promise<number>;
}

export interface Command {
  name: string;
  /** What follows the name in the overview: "[options]", "IMAGE...". */
  args: string;
  /** One line for the overview. */
  summary: string;
  /**
   * What shell completion offers for operands (the arguments that are not flags): files, folders, or a
   * list of words. None when absent.
   */
  operands?: "files" | "dirs" | (() => readonly string[] | Promise<readonly string[]>);
  /** Imports the command's module only when the command runs (the server's dependencies take a second to load). */
  load(): Promise<CommandModule>;
  /** Runs before `load` when the command is to run (not for its help): what must not wait for the module. */
  beforeLoad?(): Promise<void>;
}

export const COMMANDS: readonly Command[] = [
  {
    name: "serve",
    args: "[options]",
    summary: "run the HTTPS ImageReview backend and admission webhook",
    load: async () => {
      const m = await import("./serve.ts");
      return { usage: m.SERVE_USAGE, run: m.runServe };
    },
    // Signals are caught while the server's dependencies load: a pod stopped then exits cleanly (serve-signals.ts).
    beforeLoad: async () => void (await import("./serve-signals.ts")).catchServeSignals(),
  },
  {
    name: "check",
    args: "[options]",
    summary: "evaluate manifests offline against policies",
    load: async () => {
      const m = await import("./check.ts");
      return { usage: m.CHECK_USAGE, run: m.runCheck };
    },
  },
  {
    name: "audit",
    args: "[options]",
    summary: "judge the pods running in a cluster, as the background scan does",
    load: async () => {
      const m = await import("./audit.ts");
      return { usage: m.AUDIT_USAGE, run: m.runAudit };
    },
  },
  {
    name: "test",
    args: "DIR|FILE...",
    summary: "run policy tests: expected results for manifests (docs/policy-tests.md)",
    operands: "files",
    load: async () => {
      const m = await import("./policy-test.ts");
      return { usage: m.TEST_USAGE, run: m.runPolicyTest };
    },
  },
  {
    name: "convert",
    args: "-f FILE|DIR",
    summary: "convert Kyverno and Sigstore policy-controller image policies into ImagePolicies",
    load: async () => {
      const m = await import("./convert.ts");
      return { usage: m.CONVERT_USAGE, run: m.runConvert };
    },
  },
  {
    name: "install",
    args: "--registry REPOSITORY [options]",
    summary: "build and push the image, then install Imprimatur in the current cluster without ever blocking it",
    load: async () => {
      const m = await import("./install.ts");
      return { usage: m.INSTALL_USAGE, run: m.runInstall };
    },
  },
  {
    name: "uninstall",
    args: "[options]",
    summary: "remove Imprimatur from the current cluster, webhooks first",
    load: async () => {
      const m = await import("./install.ts");
      return { usage: m.UNINSTALL_USAGE, run: m.runUninstall };
    },
  },
  {
    name: "sign-image",
    args: "IMAGE@DIGEST --key FILE [options]",
    summary: "sign a release image and attach its SBOM and build provenance, as OCI referrers (cosign v3 bundles)",
    load: async () => {
      const m = await import("./sign-image.ts");
      return { usage: m.SIGN_IMAGE_USAGE, run: m.runSignImage };
    },
  },
  {
    name: "profiles",
    args: "[NAME]",
    summary: "list the shipped PodRestriction profiles (Pod Security Standards)",
    operands: async () => (await import("./profiles.ts")).profileNames(),
    load: async () => {
      const m = await import("./profiles.ts");
      return { usage: m.PROFILES_USAGE, run: m.runProfiles };
    },
  },
  {
    name: "resolve",
    args: "IMAGE...",
    summary: "print each image pinned to the digest its tag points to now",
    load: async () => {
      const m = await import("./resolve.ts");
      return { usage: m.RESOLVE_USAGE, run: m.runResolve };
    },
  },
  {
    name: "verify",
    args: "IMAGE...",
    summary: "judge images as the webhooks would, signatures included: allowed or denied, digest, signers",
    load: async () => {
      const m = await import("./verify.ts");
      return { usage: m.VERIFY_USAGE, run: m.runVerify };
    },
  },
  {
    name: "verify-bundle",
    args: "--bundle FILE ... FILE|sha256:HEX",
    summary: "verify a Sigstore bundle for an artifact (Sigstore's conformance CLI protocol)",
    operands: "files",
    load: async () => {
      const m = await import("./verify-bundle.ts");
      return { usage: m.VERIFY_BUNDLE_USAGE, run: m.runVerifyBundle };
    },
  },
  {
    name: "trust-root",
    args: "update [options]",
    summary: "refresh the Sigstore public-good trusted root over TUF and write it as a TrustRoot",
    operands: () => ["update"],
    load: async () => {
      const m = await import("./trust-root.ts");
      return { usage: m.TRUST_ROOT_USAGE, run: m.runTrustRoot };
    },
  },
  {
    name: "node-proxy",
    args: "--listen unix://PATH --runtime-endpoint unix://SOCKET [options]",
    summary: "run the node-side CRI image-service proxy: pods use images on the node only with accepted credentials",
    load: async () => {
      const m = await import("./node-proxy.ts");
      return { usage: m.NODE_PROXY_USAGE, run: m.runNodeProxy };
    },
  },
  {
    name: "containerd-verifier",
    args: "--policies DIR --name NAME --digest DIGEST --stdin-media-type TYPE",
    summary: "judge a pull for containerd 2.x's bindir image-verifier plugin by the same policies",
    load: async () => {
      const m = await import("./containerd-verifier.ts");
      return { usage: m.CONTAINERD_VERIFIER_USAGE, run: m.runContainerdVerifier };
    },
  },
  {
    name: "node-records",
    args: "[--state-dir DIR]",
    summary: "list the node proxy's records: who may use which image on this node",
    load: async () => {
      const m = await import("./node-records.ts");
      return { usage: m.NODE_RECORDS_USAGE, run: m.runNodeRecords };
    },
  },
  {
    name: "completion",
    args: "bash|zsh",
    summary: "print a shell completion script",
    operands: async () => (await import("./completion.ts")).SHELLS,
    load: async () => {
      const m = await import("./completion.ts");
      return { usage: m.COMPLETION_USAGE, run: (argv) => m.runCompletion(argv, completionCommands) };
    },
  },
  {
    name: "version",
    args: "[-o text|json]",
    summary: "print the version and the commit it was built from",
    load: async () => {
      const m = await import("./version.ts");
      return { usage: m.VERSION_USAGE, run: m.runVersion };
    },
  },
  {
    name: "help",
    args: "[COMMAND]",
    summary: "show help",
    operands: () => COMMANDS.map((c) => c.name),
    load: async () => ({ usage: HELP_USAGE, run: runHelp }),
  },
];

const HELP_USAGE = `Usage: imprimatur help [COMMAND]

Shows a command's help, or with no COMMAND the list of commands. "imprimatur COMMAND --help" is the same.
`;

/** Every command takes -h/--help (main handles it); its help says so unless its usage already does. */
const HELP_FLAG_LINE = "  -h, --help           show this help\n";

export function overview(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length + 1 + c.args.length)) + 3;
  const lines = COMMANDS.map((c) => `  imprimatur ${`${c.name} ${c.args}`.padEnd(width)}${c.summary}`);
  return `imprimatur — decides which container images may run on Kubernetes, and proves why.

Usage:
${lines.join("\n")}

Run "imprimatur COMMAND --help" or "imprimatur help COMMAND" for a command's options.
`;
}

/** A command's help as `--help` prints it: its usage, and the -h/--help flag. */
export async function helpText(command: Command): Promise<string> {
  const { usage } = await command.load();
  return /^ +-h, --help\b/m.test(usage) ? usage : `${usage}\n${HELP_FLAG_LINE}`;
}

export function findCommand(name: string): Command | undefined {
  return COMMANDS.find((c) => c.name === name);
}

export async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || first === "--help" || first === "-h") return runHelp(rest.filter((a) => a !== "--help" && a !== "-h"));
  const command = findCommand(first === "--version" ? "version" : first);
  if (!command) {
    process.stderr.write(`imprimatur: unknown command ${JSON.stringify(first)}\nsee 'imprimatur --help'\n`);
    return 2;
  }
  if (wantsHelp(rest)) {
    process.stdout.write(await helpText(command));
    return 0;
  }
  await command.beforeLoad?.();
  return (await command.load()).run(rest);
}

async function runHelp(argv: string[]): Promise<number> {
  let topic: string | undefined;
  try {
    const { positionals } = parseCommandArgs(argv, {}, true);
    if (positionals.length > 1) throw new UsageError("give at most one command");
    topic = positionals[0];
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("help", e.message);
    throw e;
  }
  if (topic === undefined) {
    process.stdout.write(overview());
    return 0;
  }
  const command = findCommand(topic);
  if (!command) {
    return usageFailure("help", `unknown command ${JSON.stringify(topic)}; "imprimatur help" lists the commands`);
  }
  process.stdout.write(await helpText(command));
  return 0;
}

/** The table as the completion scripts need it: every command's help text and operand words. */
async function completionCommands() {
  return Promise.all(
    COMMANDS.map(async (c) => ({
      name: c.name,
      summary: c.summary,
      help: await helpText(c),
      operands: typeof c.operands === "function" ? await c.operands() : (c.operands ?? []),
    })),
  );
}
