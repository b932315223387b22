import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../../src/config/config-error.ts";
import { loadRegistriesFile } from "../../../src/config/registries-file.ts";
import { testTls, type TlsFiles } from "./fake-registry.ts";

let dir: string;
let tls: TlsFiles;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-registries-"));
  tls = await testTls();
  await writeFile(join(dir, "ca.pem"), tls.caPem);
  await writeFile(join(dir, "client.pem"), tls.clientCertPem);
  await writeFile(join(dir, "client-key.pem"), tls.clientKeyPem);
  await writeFile(join(dir, "other-key.pem"), tls.keyPem);
  await writeFile(join(dir, "not-pem.txt"), "hello");
});
after(() => rm(dir, { recursive: true, force: true }));

let counter = 0;
async function file(yaml: string): Promise<string> {
  const path = join(dir, `registries-${++counter}.yaml`);
  await writeFile(path, yaml);
  return path;
}

const HEADER = "apiVersion: imprimatur.dev/v1alpha1\nkind: RegistryConfig\n";

test("reads TLS material relative to the file, insecure hosts, mirrors, local addresses and lent credentials", async () => {
  const path = await file(`${HEADER}registries:
  - host: Registry.Example.com:5000
    ca: ca.pem
    clientCertificate: client.pem
    clientKey: client-key.pem
  - host: 127.0.0.1:5001
    insecure: true
    allowLocalAddresses: true
  - host: index.docker.io
    mirrors: [mirror.example.com, 127.0.0.1:5001]
    allowLocalAddresses: false
    serverCredentialsForNamespacedPolicies: true
`);
  const settings = await loadRegistriesFile(path);
  assert.deepEqual([...settings.keys()], ["registry.example.com:5000", "127.0.0.1:5001", "docker.io"]);
  assert.deepEqual(settings.get("registry.example.com:5000"), {
    host: "registry.example.com:5000",
    ca: tls.caPem,
    clientCert: tls.clientCertPem,
    clientKey: tls.clientKeyPem,
  });
  assert.deepEqual(settings.get("127.0.0.1:5001"), { host: "127.0.0.1:5001", insecure: true, allowLocalAddresses: true });
  assert.deepEqual(settings.get("docker.io"), {
    host: "docker.io",
    mirrors: ["mirror.example.com", "127.0.0.1:5001"],
    serverCredentialsForNamespacedPolicies: true,
  });
});

test("an empty registries list is no settings", async () => {
  assert.equal((await loadRegistriesFile(await file(`${HEADER}registries: []\n`))).size, 0);
  assert.equal((await loadRegistriesFile(await file(HEADER))).size, 0);
});

// [name, file, line, field, message]: each problem is reported as "file:line (field): message".
const errors: Array<[string, string, number, string, string]> = [
  ["wrong apiVersion", "apiVersion: v1\nkind: RegistryConfig\n", 1, "apiVersion", 'must be "imprimatur.dev/v1alpha1"'],
  ["wrong kind", "apiVersion: imprimatur.dev/v1alpha1\nkind: ServerConfig\n", 2, "kind", 'must be "RegistryConfig"'],
  ["not a mapping", "- a\n", 1, "", "the file must be a YAML mapping"],
  ["unknown top-level field", `${HEADER}mirrors: []\n`, 3, "mirrors", "unknown field"],
  ["registries not a list", `${HEADER}registries: {host: a.io}\n`, 3, "registries", "must be a list"],
  ["unknown field in an entry", `${HEADER}registries:\n  - host: a.io\n    cert: x.pem\n`, 5, "registries[0].cert", "unknown field"],
  ["missing host", `${HEADER}registries:\n  - insecure: true\n`, 4, "registries[0].host", 'must be a registry host such as "registry.example.com:5000"'],
  [
    "host that reads as a Docker Hub path",
    `${HEADER}registries:\n  - host: myregistry\n`,
    4,
    "registries[0].host",
    '"myregistry" is not a registry host as image references write it',
  ],
  ["host with a path", `${HEADER}registries:\n  - host: a.io/team\n`, 4, "registries[0].host", '"a.io/team" is not a registry host'],
  [
    "host listed twice",
    `${HEADER}registries:\n  - host: docker.io\n  - host: index.docker.io\n`,
    5,
    "registries[1].host",
    "docker.io is already listed at registries[0]",
  ],
  ["unreadable CA file", `${HEADER}registries:\n  - host: a.io\n    ca: missing.pem\n`, 5, "registries[0].ca", "cannot read missing.pem: ENOENT"],
  ["CA file that is not PEM", `${HEADER}registries:\n  - host: a.io\n    ca: not-pem.txt\n`, 5, "registries[0].ca", "does not hold a PEM certificate"],
  [
    "certificate without key",
    `${HEADER}registries:\n  - host: a.io\n    clientCertificate: client.pem\n`,
    4,
    "registries[0].clientKey",
    "clientCertificate and clientKey go together; give both or neither",
  ],
  [
    "key of another certificate",
    `${HEADER}registries:\n  - host: a.io\n    clientCertificate: client.pem\n    clientKey: other-key.pem\n`,
    6,
    "registries[0].clientKey",
    "other-key.pem is not the key of client.pem",
  ],
  [
    "key file that is not a key",
    `${HEADER}registries:\n  - host: a.io\n    clientCertificate: client.pem\n    clientKey: not-pem.txt\n`,
    6,
    "registries[0].clientKey",
    "not-pem.txt does not hold a PEM private key",
  ],
  [
    "insecure with a CA",
    `${HEADER}registries:\n  - host: a.io\n    insecure: true\n    ca: ca.pem\n`,
    6,
    "registries[0].ca",
    "has no effect with insecure: true (plain HTTP, no TLS); remove one of them",
  ],
  ["insecure not a boolean", `${HEADER}registries:\n  - host: a.io\n    insecure: "yes"\n`, 5, "registries[0].insecure", "must be true or false"],
  ["mirrors not a list", `${HEADER}registries:\n  - host: docker.io\n    mirrors: m.io\n`, 5, "registries[0].mirrors", "must be a list of hosts"],
  [
    "allowLocalAddresses not a boolean",
    `${HEADER}registries:\n  - host: a.io\n    allowLocalAddresses: "yes"\n`,
    5,
    "registries[0].allowLocalAddresses",
    "must be true or false",
  ],
  [
    "serverCredentialsForNamespacedPolicies not a boolean",
    `${HEADER}registries:\n  - host: a.io\n    serverCredentialsForNamespacedPolicies: 1\n`,
    5,
    "registries[0].serverCredentialsForNamespacedPolicies",
    "must be true or false",
  ],
  [
    "mirror that is the registry",
    `${HEADER}registries:\n  - host: docker.io\n    mirrors: [m.io, index.docker.io]\n`,
    5,
    "registries[0].mirrors[1]",
    "is the registry itself; list only other hosts",
  ],
  ["mirror listed twice", `${HEADER}registries:\n  - host: docker.io\n    mirrors: [m.io, M.io]\n`, 5, "registries[0].mirrors[1]", "m.io is listed twice"],
];

for (const [name, yaml, line, field, message] of errors) {
  test(`error: ${name}`, async () => {
    const path = await file(yaml);
    await assert.rejects(loadRegistriesFile(path), (e: ConfigError) => {
      assert.equal(e.code, "invalid-config");
      assert.ok(e.message.startsWith(`${path}:${line}${field ? ` (${field})` : ""}: ${message}`), `message was: ${e.message}`);
      return true;
    });
  });
}

test("error: every problem is reported at once, in line order, each with its line and field", async () => {
  const path = await file(`apiVersion: v1
kind: RegistryConfig
extra: 1
registries:
  - host: a.io
    insecure: true
    ca: ca.pem
    mirrors: [a.io, bad host]
  - host: myregistry
    clientKey: client-key.pem
`);
  await assert.rejects(loadRegistriesFile(path), (e: ConfigError) => {
    assert.ok(e instanceof ConfigError);
    assert.deepEqual(
      e.problems.map((p) => [p.line, p.path]),
      [
        [1, "apiVersion"],
        [3, "extra"],
        [7, "registries[0].ca"],
        [8, "registries[0].mirrors[0]"],
        [8, "registries[0].mirrors[1]"],
        [9, "registries[1].host"],
        [9, "registries[1].clientCertificate"],
      ],
    );
    assert.equal(e.message.split("\n").length, 7);
    for (const line of e.message.split("\n")) assert.ok(line.startsWith(`${path}:`), line);
    return true;
  });
});

test("error: a missing file and invalid YAML name the file", async () => {
  const missing = join(dir, "nope.yaml");
  await assert.rejects(loadRegistriesFile(missing), { code: "unreadable", message: `${missing}: cannot read registries file: ENOENT` });
  const broken = await file("registries: [\n");
  await assert.rejects(
    loadRegistriesFile(broken),
    (e: ConfigError) => e.code === "invalid-config" && /^\S+:2: not valid YAML: /.test(e.message) && e.message.startsWith(broken),
  );
  const twice = await file(`${HEADER}---\n${HEADER}`);
  await assert.rejects(loadRegistriesFile(twice), { message: `${twice}:4: holds 2 YAML documents; expected one` });
});
