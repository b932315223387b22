// docs/schemas.md publishes the JSON Schemas for editors. This keeps it true: it names every schema in the
// repository with its kind, each kind's page links to it, the `$schema` comments it shows resolve to the
// schemas from where it says they stand, and no document the loaders accept (the examples in README and docs/,
// the shipped policies, manifests and tests) is marked wrong by its schema in an editor.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv, type ValidateFunction } from "ajv";
import { parseAllDocuments } from "yaml";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { createCertificateAuthority, issueCertificate } from "../../src/tls/tls-bootstrap.ts";
import { anchorOf, docPages, fences } from "../support/docs.ts";
import { kindLoaderProblems } from "../support/kind-loaders.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const PAGE = "docs/schemas.md";

let scratch: string;
before(async () => {
  scratch = await mkdtemp(join(tmpdir(), "imprimatur-schema-docs-"));
  // The files the docs' RegistryConfig example names, so that it loads.
  const ca = await createCertificateAuthority("schema docs CA");
  const client = await issueCertificate(ca, { commonName: "puller", client: true });
  await writeFile(join(scratch, "ca.pem"), ca.certPem);
  await writeFile(join(scratch, "client.pem"), client.certPem);
  await writeFile(join(scratch, "client-key.pem"), client.keyPem);
});
after(() => rm(scratch, { recursive: true, force: true }));

const read = (path: string) => readFile(join(ROOT, path), "utf8");

async function exists(path: string): Promise<boolean> {
  return stat(join(ROOT, path)).then(
    () => true,
    () => false,
  );
}

/** The rows of the first Markdown table after `after` in `text`, as cells. */
function tableAfter(text: string, after: string): string[][] {
  const start = text.indexOf(after);
  assert.ok(start >= 0, `${PAGE} has "${after}"`);
  const lines = text.slice(start).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const rows: string[][] = [];
  for (const line of lines.slice(first)) {
    if (!line.startsWith("|")) break;
    const cells = line
      .slice(1, -1)
      .split("|")
      .map((c) => c.trim());
    if (!cells.every((c) => /^-+$/.test(c))) rows.push(cells);
  }
  return rows.slice(1);
}

async function schemaFiles(dir = "src"): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...(await schemaFiles(path)));
    else if (entry.name.endsWith(".schema.json")) out.push(path);
  }
  return out.sort();
}

interface KindRow {
  kind: string;
  schema: string;
  references: string[];
}

async function kindRows(): Promise<KindRow[]> {
  return tableAfter(await read(PAGE), "| kind").map((cells) => ({
    kind: /^`(\w+)`$/.exec(cells[0]!)?.[1] ?? `(unreadable: ${cells[0]})`,
    schema: /^`([^`]+)`$/.exec(cells[2]!)?.[1] ?? `(unreadable: ${cells[2]})`,
    references: [...cells[3]!.matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]!),
  }));
}

test("docs/schemas.md names every JSON Schema in the repository, each with the kind it is the schema of", async () => {
  const rows = await kindRows();
  assert.deepEqual(rows.map((r) => r.schema).sort(), await schemaFiles());
  for (const row of rows) {
    const schema = JSON.parse(await read(row.schema)) as { title: string; properties: { kind: { const: string } } };
    assert.equal(schema.properties.kind.const, row.kind, row.schema);
    assert.ok(schema.title.startsWith(`${row.kind} (`), `${row.schema}: its title names ${row.kind}`);
  }
});

test("each kind's reference page exists, has the section linked, and links to docs/schemas.md", async () => {
  for (const row of await kindRows()) {
    assert.ok(row.references.length > 0, `${row.kind} has a reference page`);
    for (const link of row.references) {
      const [target, anchor] = link.split("#") as [string, string | undefined];
      const path = normalize(join("docs", target));
      const text = await read(path);
      if (anchor !== undefined) {
        const anchors = [...text.matchAll(/^#+ (.*)$/gm)].map((m) => anchorOf(m[1]!));
        assert.ok(anchors.includes(anchor), `${path} has a heading for #${anchor}`);
      }
      const toSchemas = relative(dirname(path), PAGE);
      assert.ok(text.includes(`](${toSchemas})`), `${path} links to ${toSchemas} (for ${row.kind})`);
    }
  }
});

test("the $schema comments docs/schemas.md shows resolve to a schema from the file they stand in", async () => {
  const page = await read(PAGE);
  const schemas = await schemaFiles();
  const rows = tableAfter(page, "| the YAML file");
  assert.ok(rows.length >= 5);
  for (const [file, comment] of rows) {
    const at = /^`([^`]+)`/.exec(file!)?.[1];
    const target = /^`# yaml-language-server: \$schema=([^`]+)`$/.exec(comment!)?.[1];
    assert.ok(at && target, `a row names a file and a comment: ${file} | ${comment}`);
    const resolved = normalize(join(dirname(at), target));
    assert.ok(schemas.includes(resolved), `${target} from ${at} is ${resolved}, a schema`);
    const kind = /\(an? (\w+)\)/.exec(file!)?.[1];
    if (kind) assert.match(await read(resolved), new RegExp(`"const": "${kind}"`), `${at}: the schema of a ${kind}`);
  }
  // The example: a policy in policies/examples/ that the schema and the loader both accept.
  const example = /```yaml\n(# yaml-language-server: \$schema=([^\n]+)\n[\s\S]*?)```/.exec(page);
  assert.ok(example, "the page shows an example with the comment");
  const schemaPath = normalize(join("policies/examples", example[2]!));
  assert.ok(await exists(schemaPath), schemaPath);
  const validate = compile(JSON.parse(await read(schemaPath)));
  const doc = parseAllDocuments(example[1]!)[0]!.toJS();
  assert.ok(validate(doc), JSON.stringify(validate.errors));
  assert.deepEqual(parsePolicyText(example[1]!, "example.yaml").errors, []);
});

// ---------------------------------------------------------------------------------------------------------
// What the loaders accept, the schemas accept

// strictRequired off: a oneOf branch requires a property defined beside it (CallerTokens: token or tokenSha256).
const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false, allowUnionTypes: true });
const compiled = new Map<unknown, ValidateFunction>();
function compile(schema: object): ValidateFunction {
  const id = (schema as { $id: string }).$id;
  if (!compiled.has(id)) compiled.set(id, ajv.getSchema(id) ?? ajv.compile(schema));
  return compiled.get(id)!;
}

/** Whether the kind's own loader accepts the document, read from `origin`'s folder (its relative paths). */
async function loaderAccepts(kind: string, doc: Record<string, unknown>, originDir: string): Promise<boolean> {
  const problems = await kindLoaderProblems(doc, originDir, scratch);
  assert.ok(problems, `a loader for ${kind}`);
  return problems.length === 0;
}

interface Found {
  where: string;
  dir: string;
  doc: Record<string, unknown>;
}

/** The YAML documents of fenced blocks in README.md, examples/README.md and docs/*.md. */
async function documentedExamples(): Promise<Found[]> {
  const out: Found[] = [];
  for (const page of docPages()) {
    for (const { lang, body, line } of fences(page)) {
      if (lang !== "yaml" && lang !== "yml") continue;
      for (const d of parseAllDocuments(body)) {
        if (d.errors.length > 0) continue;
        let doc: unknown;
        try {
          doc = d.toJS();
        } catch {
          continue; // an illustration, such as an alias whose anchor is left out
        }
        if (doc && typeof doc === "object" && !Array.isArray(doc)) out.push({ where: `${page}:${line}`, dir: scratch, doc: doc as Record<string, unknown> });
      }
    }
  }
  return out;
}

/** The YAML documents of the shipped policies, example manifests and policy tests. */
async function shippedDocuments(): Promise<Found[]> {
  const out: Found[] = [];
  for (const folder of ["policies", "examples", "policy-tests"]) {
    for (const f of await readdir(join(ROOT, folder), { recursive: true })) {
      if (!/\.ya?ml$/.test(f)) continue;
      for (const d of parseAllDocuments(await read(`${folder}/${f}`))) {
        const doc = d.toJS() as unknown;
        if (doc && typeof doc === "object" && !Array.isArray(doc))
          out.push({ where: `${folder}/${f}`, dir: dirname(join(ROOT, folder, f)), doc: doc as Record<string, unknown> });
      }
    }
  }
  return out;
}

test("every document the loaders accept, in the docs' examples and the shipped files, satisfies its kind's schema", async () => {
  const byKind = new Map<string, ValidateFunction>();
  for (const row of await kindRows()) byKind.set(row.kind, compile(JSON.parse(await read(row.schema))));
  const counts = new Map<string, number>();
  for (const { where, dir, doc } of [...(await documentedExamples()), ...(await shippedDocuments())]) {
    const kind = doc.kind as string;
    const validate = byKind.get(kind);
    if (!validate || doc.apiVersion === undefined) continue;
    if (!(await loaderAccepts(kind, doc, dir))) continue;
    assert.ok(validate(doc), `${where}: the ${kind} loads, and its schema must accept it: ${JSON.stringify(validate.errors)}`);
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  for (const kind of ["ImagePolicy", "PodRestriction", "PolicyTest", "ServerConfig", "RegistryConfig"])
    assert.ok((counts.get(kind) ?? 0) > 0, `some ${kind} example or shipped file was checked`);
});
