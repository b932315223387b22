// `imprimatur completion bash|zsh`: a shell completion script made from the command table and each
// command's help text, so that the flags completed are the flags documented, with no second list to keep.
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { parseCommandArgs, usageFailure, UsageError } from "./args.ts";

export const SHELLS = ["bash", "zsh"] as const;

export const COMPLETION_USAGE = `Usage: imprimatur completion bash|zsh

Prints a script that completes imprimatur's commands, their flags and the values of flags (files, folders,
the choices a flag's help lists such as output formats, the shipped profiles for --profile, the policy kinds
for a KIND) in bash or zsh. To load it:

  bash, this shell only:   source <(imprimatur completion bash)
  bash, every new shell:   imprimatur completion bash > ~/.local/share/bash-completion/completions/imprimatur
  zsh, this shell only:    source <(imprimatur completion zsh)          (after compinit)
  zsh, every new shell:    imprimatur completion zsh > "\${fpath[1]}/_imprimatur"
`;

/** One command as the scripts need it. */
export interface CompletionCommand {
  name: string;
  summary: string;
  /** Its help text ("Usage: …" line, prose, flag lines), from which its flags are read. */
  help: string;
  /** What its operands are: files, folders, or a list of words (none when empty). */
  operands: "files" | "dirs" | readonly string[];
}

/** A flag as a command's help documents it. */
export interface Flag {
  /** Its names, short one first: ["-o", "--output"], or ["--policies"], or ["-f"]. */
  names: string[];
  /** The placeholder of its value as written ("FILE", "text|json", "OS/ARCH"); undefined for a switch. */
  value?: string;
  /** Its description, its lines joined; "" when only the Usage line names it. */
  description: string;
  /** It may be given more than once: its description says "repeatable", or the Usage line repeats it. */
  repeatable: boolean;
}

const FLAG_NAME = "-[A-Za-z0-9]|--[a-z0-9][a-z0-9-]*";
/** A flag line of a help text: "  -o, --output text|json   output format" or "  --fail-open   admit …". */
const FLAG_LINE = new RegExp(`^ {2,}(${FLAG_NAME})(?:, (${FLAG_NAME}))?(?: (\\S+))?(?: {2,}(\\S.*))?$`);
const FLAG_WORD = new RegExp(`^(?:${FLAG_NAME})$`);
const ELLIPSIS = /^(?:…|\.\.\.)$/;

/**
 * The flags a help text documents: those on its "Usage:" line (`[--policies DIR]`, `-f FILE|DIR [-f …]`)
 * and those on lines of their own (`  -o, --output text|json   description`). Flags that prose mentions
 * ("see serve --profile NAME") are not its flags and are not read.
 */
export function flagsFromUsage(help: string): Flag[] {
  const flags: Flag[] = [];
  const seen = new Map<string, number>();
  const find = (names: readonly string[]) => flags.find((f) => f.names.some((n) => names.includes(n)));
  const add = (names: string[], value: string | undefined, description: string) => {
    const flag = find(names);
    if (!flag) {
      flags.push({ names: sortNames(names), ...(value ? { value } : {}), description, repeatable: /\brepeatable\b/i.test(description) });
      return;
    }
    flag.names = sortNames([...new Set([...flag.names, ...names])]);
    if (value) flag.value = value;
    if (description) flag.description = description;
    if (/\brepeatable\b/i.test(description)) flag.repeatable = true;
  };

  const synopsis = help.split("\n").find((l) => l.startsWith("Usage:")) ?? "";
  // The Usage line, in groups: each [...] is one, and so is each stretch outside brackets.
  for (const group of synopsis.slice("Usage:".length).matchAll(/\[([^[\]]*)\]|([^[\]]+)/g)) {
    const words = (group[1] ?? group[2] ?? "").trim().split(/\s+/).filter(Boolean);
    words.forEach((word, i) => {
      const [name, inlineValue] = word.split("=", 2) as [string, string | undefined];
      if (!FLAG_WORD.test(name)) return;
      const next = words[i + 1];
      const value = inlineValue ?? (next !== undefined && !next.startsWith("-") && !ELLIPSIS.test(next) ? next : undefined);
      add([name], value, "");
      seen.set(name, (seen.get(name) ?? 0) + 1);
      if (next !== undefined && ELLIPSIS.test(next)) seen.set(name, 2);
    });
  }
  const lines = help.split("\n");
  lines.forEach((line, i) => {
    const m = FLAG_LINE.exec(line);
    if (!m) return;
    // The description goes on over the following lines that are indented deeper and name no flag.
    const indent = line.length - line.trimStart().length;
    const description = [m[4] ?? ""];
    for (let j = i + 1; j < lines.length; j++) {
      const next = lines[j]!;
      if (FLAG_LINE.test(next) || next.trim() === "" || next.length - next.trimStart().length <= indent + 2) break;
      description.push(next.trim());
    }
    add([m[1]!, ...(m[2] ? [m[2]] : [])], m[3], description.join(" ").trim());
  });
  for (const flag of flags) if (flag.names.some((n) => (seen.get(n) ?? 0) > 1)) flag.repeatable = true;
  return flags;
}

function sortNames(names: string[]): string[] {
  return [...names].sort((a, b) => a.length - b.length || (a < b ? -1 : 1));
}

/**
 * What to complete for a flag's value: the words of "text|json", files (and folders) for FILE or PATH,
 * folders for DIR, else nothing (NAME, N, URL, FORMAT: values of the user's choosing).
 */
export function valueCompletion(placeholder: string): "files" | "dirs" | readonly string[] {
  const words = placeholder.split("|");
  if (words.length > 1 && words.every((w) => /^[a-z][a-z0-9-]*$/.test(w))) return words;
  if (words.includes("FILE") || words.includes("PATH")) return "files";
  if (words.includes("DIR")) return "dirs";
  return [];
}

/** Values that help texts name without listing them, looked up when the script is made. */
export interface KnownValues {
  /** The shipped PodRestriction profiles, for --profile. */
  profiles: readonly string[];
  /** The policy kinds, for a flag whose value is a KIND. */
  kinds: readonly string[];
}

const NONE_KNOWN: KnownValues = { profiles: [], kinds: [] };

const CHOICE = "[A-Za-z][A-Za-z0-9-]*";
const CHOICE_LIST = new RegExp(`^(${CHOICE}(?:, ${CHOICE})*),? or (${CHOICE})(?=$|[,;:.]? )`);
const CHOICE_DEFINITION = new RegExp(`^(${CHOICE}):`);

/**
 * The fixed choices a flag's description lists when its placeholder does not ("-o, --output FORMAT   text
 * (default: …), json, yaml or junit"; "--digest-mode MODE   mutate (default): …; record: …"): the words of a
 * leading "a, b or c", or of "a: …; b: …". None when the description is prose.
 */
export function choicesInDescription(description: string): string[] {
  let plain = description;
  // Parentheses hold remarks ("(default: …)"), never choices; inner ones first.
  for (let before = ""; before !== plain;) [before, plain] = [plain, plain.replace(/\s*\([^()]*\)/g, "")];
  const list = CHOICE_LIST.exec(plain);
  if (list) return [...list[1]!.split(", "), list[2]!];
  const definitions = plain.split(/;\s*/).map((segment) => CHOICE_DEFINITION.exec(segment)?.[1]);
  if (definitions.length > 1 && definitions.every((d) => d !== undefined)) return definitions as string[];
  return [];
}

/**
 * What to complete for a flag's value: the shipped profiles for --profile, the policy kinds for a KIND, then what
 * its placeholder says (valueCompletion), then the choices its description lists.
 */
export function flagCompletion(flag: Flag, known: KnownValues = NONE_KNOWN): "files" | "dirs" | readonly string[] {
  const placeholder = flag.value ?? "";
  if (flag.names.includes("--profile") && known.profiles.length > 0) return known.profiles;
  if (/^KINDS?$/.test(placeholder) && known.kinds.length > 0) return known.kinds;
  const byPlaceholder = valueCompletion(placeholder);
  if (typeof byPlaceholder === "string" || byPlaceholder.length > 0) return byPlaceholder;
  return choicesInDescription(flag.description);
}

/** The values to offer that no help text lists: the shipped profiles and the registered policy kinds. */
export async function knownValues(): Promise<KnownValues> {
  const [{ profileNames }, { KIND_NAMES }] = await Promise.all([import("./profiles.ts"), import("../core/policy-set/policy-kinds.ts")]);
  return { profiles: await profileNames(), kinds: KIND_NAMES };
}

export async function runCompletion(argv: string[], commands: () => Promise<CompletionCommand[]>): Promise<number> {
  let shell: (typeof SHELLS)[number];
  try {
    const { positionals } = parseCommandArgs(argv, {}, true);
    if (positionals.length !== 1) throw new UsageError("give one shell: bash or zsh");
    const name = positionals[0]!;
    if (!(SHELLS as readonly string[]).includes(name)) throw new UsageError(`unsupported shell ${JSON.stringify(name)}; supported: ${SHELLS.join(", ")}`);
    shell = name as (typeof SHELLS)[number];
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("completion", e.message);
    throw e;
  }
  const [list, known] = await Promise.all([commands(), knownValues()]);
  process.stdout.write(shell === "bash" ? bashScript(list, known) : zshScript(list, known));
  return 0;
}

/** A word put into a script unquoted (command, flag or value names): refuses anything a shell would read otherwise. */
function word(w: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._/+-]*$|^--?[A-Za-z0-9][A-Za-z0-9-]*$/.test(w))
    throw new ImprimaturError("internal", `cannot put ${JSON.stringify(w)} in a completion script`);
  return w;
}

/** Single-quoted for either shell. */
function quoted(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function bashScript(commands: readonly CompletionCommand[], known: KnownValues = NONE_KNOWN): string {
  const reply = (what: "files" | "dirs" | readonly string[]) =>
    typeof what === "string" ? `_imprimatur_reply ${what} "$cur"` : `_imprimatur_reply words "$cur" "${what.map(word).join(" ")}"`;
  const cases: string[] = [];
  for (const c of commands) {
    const flags = flagsFromUsage(c.help);
    const valued = flags.filter((f) => f.value !== undefined);
    const body: string[] = [];
    body.push(`      if [[ -z $after_dashdash ]]; then`);
    if (valued.length > 0) {
      // After a flag that takes a value, complete the value: flags with the same kind of value share a line.
      const byAction = new Map<string, string[]>();
      for (const f of valued) {
        const what = flagCompletion(f, known);
        const action = typeof what !== "string" && what.length === 0 ? "return 0" : `${reply(what)}; return 0`;
        byAction.set(action, [...(byAction.get(action) ?? []), ...f.names.map(word)]);
      }
      body.push(`        case $prev in`);
      for (const [action, names] of byAction) body.push(`          ${names.join("|")}) ${action} ;;`);
      body.push(`        esac`);
    }
    const flagWords = flags.flatMap((f) => f.names);
    const hasOperands = typeof c.operands === "string" || c.operands.length > 0;
    body.push(`        if [[ $cur == -*${hasOperands ? "" : " || -z $cur"} ]]; then ${reply(flagWords)}; return 0; fi`);
    body.push(`      fi`);
    if (hasOperands) body.push(`      ${reply(c.operands)}`);
    cases.push(`    ${word(c.name)})`, ...body, `      ;;`);
  }
  return `# bash completion for imprimatur, generated by "imprimatur completion bash" from its commands' help.
# Load it with: source <(imprimatur completion bash)

# _imprimatur_reply words|files|dirs CURRENT [WORDS]: offer the words, files or folders that start with CURRENT.
_imprimatur_reply() {
  local IFS=$'\\n'
  case $1 in
    words) IFS=$' \\t\\n'; COMPREPLY=($(compgen -W "$3" -- "$2")) ;;
    files) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$2")) ;;
    dirs) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$2")) ;;
  esac
}

_imprimatur() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} cmd= after_dashdash= i
  COMPREPLY=()
  # bash splits "--flag=value" at "=": complete the value of --flag.
  if [[ $cur == = ]]; then
    cur=
  elif [[ $prev == = ]] && (( COMP_CWORD > 1 )); then
    prev=\${COMP_WORDS[COMP_CWORD-2]}
  fi
  for ((i = 1; i < COMP_CWORD; i++)); do
    if [[ -n $cmd ]]; then
      [[ \${COMP_WORDS[i]} == -- ]] && after_dashdash=1
    else
      case \${COMP_WORDS[i]} in
        --version) cmd=version ;;
        -*) ;;
        *) cmd=\${COMP_WORDS[i]} ;;
      esac
    fi
  done
  case $cmd in
    "")
      if [[ $cur == -* ]]; then ${reply(["--help", "-h", "--version"])}; else ${reply(commands.map((c) => c.name))}; fi
      ;;
${cases.join("\n")}
  esac
  return 0
}

complete -F _imprimatur imprimatur
`;
}

export function zshScript(commands: readonly CompletionCommand[], known: KnownValues = NONE_KNOWN): string {
  const action = (what: "files" | "dirs" | readonly string[]) =>
    what === "files" ? "_files" : what === "dirs" ? "_files -/" : what.length === 0 ? " " : `(${what.map(word).join(" ")})`;
  // Inside _arguments' [description] and :message: parts, brackets and colons are syntax.
  const text = (s: string) => s.replace(/[[\]:\\]/g, (ch) => `\\${ch}`);
  const cases: string[] = [];
  for (const c of commands) {
    const specs: string[] = [];
    for (const f of flagsFromUsage(c.help)) {
      const names = f.names.map((n) => word(n) + (f.value === undefined ? "" : n.startsWith("--") ? "=" : "+"));
      const description = f.description ? `[${text(f.description)}]` : "";
      const value = f.value === undefined ? "" : `:${text(f.value)}:${action(flagCompletion(f, known))}`;
      const tail = quoted(`${description}${value}`);
      if (f.repeatable) specs.push(names.length > 1 ? `'*'{${names.join(",")}}${tail}` : `'*'${names[0]}${tail}`);
      else if (names.length > 1) specs.push(`${quoted(`(${f.names.join(" ")})`)}{${names.join(",")}}${tail}`);
      else specs.push(`${names[0]}${tail}`);
    }
    if (typeof c.operands === "string" || c.operands.length > 0) specs.push(quoted(`*: :${action(c.operands)}`));
    cases.push(
      `        (${word(c.name)})`,
      `          _arguments -s -S \\`,
      ...specs.map((s, i) => `            ${s}${i < specs.length - 1 ? " \\" : ""}`),
      `          ;;`,
    );
  }
  const described = commands.map((c) => `    ${quoted(`${word(c.name)}:${c.summary}`)}`);
  return `#compdef imprimatur
# zsh completion for imprimatur, generated by "imprimatur completion zsh" from its commands' help.
# Load it with "source <(imprimatur completion zsh)" after compinit, or save it as _imprimatur in a
# folder of $fpath.

_imprimatur() {
  local curcontext=$curcontext state line
  local -a commands
  commands=(
${described.join("\n")}
  )
  _arguments -C \\
    '(- :)'{-h,--help}'[show help]' \\
    '(- :)--version[show the version]' \\
    '1: :->command' \\
    '*:: :->args' && return 0
  case $state in
    (command)
      _describe -t commands 'imprimatur command' commands
      ;;
    (args)
      curcontext=\${curcontext%:*:*}:imprimatur-$words[1]:
      case $words[1] in
${cases.join("\n")}
      esac
      ;;
  esac
}

if [[ $funcstack[1] == _imprimatur ]]; then
  _imprimatur "$@"
else
  compdef _imprimatur imprimatur
fi
`;
}
