// `imprimatur convert`: another tool's image policies as Imprimatur's (src/convert/). The documents go to
// standard output, each with a comment naming its original and every field not carried over; the findings go to
// standard error, one line each, then a summary. Every document written is loaded as `serve` would load it first:
// a converter that wrote a policy Imprimatur refuses is a bug, reported and not printed.
import { stringify } from "yaml";
import { convertObject, CONVERTIBLE_KINDS } from "../convert/convert-object.ts";
import type { ConversionFinding, ConvertedDocument } from "../convert/conversion.ts";
import { parsePolicyText } from "../policy/load-policies.ts";
import { renderPolicyError } from "../policy/policy-error.ts";
import { parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { readManifests } from "./manifests.ts";

export const CONVERT_USAGE = `Usage: imprimatur convert -f FILE|DIR [-f …] [-o yaml|json]

Converts image policies of other tools into ImagePolicies (NamespacedImagePolicies for namespaced originals):
  ${CONVERTIBLE_KINDS.join("\n  ")}
The result goes to standard output, each document under a comment naming its original and every field that was
not carried over. Standard error has one line per such field, "weaker" when the converted policy would admit what
the original refuses (a requirement dropped), "note" when it is as strict or stricter, and a summary.
docs/migrating.md has the field-by-field tables, and how to run Imprimatur beside Kyverno.

  -f, --filename FILE  a file, a folder (its *.yaml, *.yml, *.json), or - for standard input (repeatable)
  -o, --output FORMAT  yaml (default: the documents with their comments) or json ({documents, findings})
  -h, --help           show this help

Exit status: 0 everything converted as strict as the original; 1 something converted weaker (each said on
standard error); 2 usage errors, input that cannot be read, or no object to convert.
`;

const OUTPUTS = ["yaml", "json"] as const;

export async function runConvert(argv: string[]): Promise<number> {
  let files: string[];
  let output: (typeof OUTPUTS)[number];
  try {
    const { values } = parseCommandArgs(argv, {
      filename: { type: "string", short: "f", multiple: true, default: [] },
      output: { type: "string", short: "o", default: "yaml" },
    });
    files = values.filename!;
    if (files.length === 0) throw new UsageError("give the policies to convert with -f FILE (or -f - for standard input)");
    if (!OUTPUTS.includes(values.output as (typeof OUTPUTS)[number]))
      throw new UsageError(`--output must be one of ${OUTPUTS.join(", ")}, got ${values.output}`);
    output = values.output as (typeof OUTPUTS)[number];
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("convert", e.message);
    throw e;
  }

  const problems: string[] = [];
  const objects = await readManifests(files, problems);
  for (const p of problems) process.stderr.write(`imprimatur convert: ${p}\n`);
  if (objects.length === 0) {
    if (problems.length === 0) process.stderr.write(`imprimatur convert: no object in ${files.join(", ")}\n`);
    return 2;
  }
  const documents: Array<ConvertedDocument & { findings: ConversionFinding[] }> = [];
  const findings: ConversionFinding[] = [];
  for (const { file, object } of objects) {
    const result = convertObject(object, file);
    findings.push(...result.findings);
    for (const d of result.documents) documents.push({ ...d, findings: result.findings });
  }
  // What was written must load as serve loads it.
  const refused = documents.flatMap((d) => {
    const origin = `${d.object.kind as string}/${(d.object.metadata as { name: string }).name}`;
    return parsePolicyText(JSON.stringify(d.object), origin).errors.map((e) => renderPolicyError(e));
  });
  if (refused.length > 0) {
    for (const r of refused) process.stderr.write(`imprimatur convert: the converted policy does not load (a bug of convert; please report it): ${r}\n`);
    return 2;
  }

  process.stdout.write(output === "json" ? `${JSON.stringify({ documents: documents.map((d) => d.object), findings }, null, 2)}\n` : yamlOf(documents));
  for (const f of findings) process.stderr.write(`${f.source}${f.path ? ` ${f.path}` : ""}: ${f.weaker ? "weaker" : "note"}: ${f.message}\n`);
  const weaker = findings.filter((f) => f.weaker).length;
  process.stderr.write(
    `${objects.length} ${objects.length === 1 ? "object" : "objects"}: ${documents.length} ${documents.length === 1 ? "policy" : "policies"} written; ` +
      `${weaker} weaker, ${findings.length - weaker} ${findings.length - weaker === 1 ? "note" : "notes"}\n`,
  );
  if (documents.length === 0) return 2;
  return weaker > 0 ? 1 : 0;
}

/** The documents as YAML, each under comments: its original, then every field of it not carried over. */
function yamlOf(documents: ReadonlyArray<ConvertedDocument & { findings: ConversionFinding[] }>): string {
  return documents
    .map((d) => {
      const lines = [`# Converted by imprimatur convert from ${d.from}.`];
      for (const f of d.findings) lines.push(`# ${f.weaker ? "WEAKER" : "note"}: ${f.path ? `${f.path}: ` : ""}${f.message}`);
      return `${lines.map((l) => l.replace(/\n/g, " ")).join("\n")}\n${stringify(d.object, { lineWidth: 0, aliasDuplicateObjects: false })}`;
    })
    .join("---\n");
}
