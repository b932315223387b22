// Reading dockerconfigjson / dockercfg documents and auth files into (key, credential) pairs.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { loadAuthFile, parseDockerConfig } from "../../../src/credentials/docker-config.ts";

const SOURCE = "secret team-a/regcred";
const b64 = (s: string): string => Buffer.from(s, "utf8").toString("base64");
const configJson = (auths: unknown): string => JSON.stringify({ auths });

/** No problem line may carry a value from the document. */
function assertNoLeak(problems: string[], ...secrets: string[]): void {
  for (const problem of problems) for (const secret of secrets) assert.ok(!problem.includes(secret), `problem leaks a value: ${problem}`);
}

describe("parseDockerConfig: entries", () => {
  test("auth is base64(user:pass), split at the first colon", () => {
    const parsed = parseDockerConfig(configJson({ "registry.example.com": { auth: b64("alice:pa:ss") } }), "dockerconfigjson", SOURCE);
    assert.deepEqual(parsed, {
      entries: [{ key: "registry.example.com", credential: { source: SOURCE, username: "alice", password: "pa:ss" } }],
      problems: [],
    });
  });

  test("auth wins over username and password, as in the kubelet; an empty auth is ignored", () => {
    const parsed = parseDockerConfig(
      configJson({
        "a.example.com": { auth: b64("from-auth:p1"), username: "from-fields", password: "p2" },
        "b.example.com": { auth: "", username: "bob", password: "p3" },
      }),
      "dockerconfigjson",
      SOURCE,
    );
    assert.deepEqual(
      parsed.entries.map((e) => [e.key, e.credential.username, e.credential.password]),
      [
        ["a.example.com", "from-auth", "p1"],
        ["b.example.com", "bob", "p3"],
      ],
    );
  });

  test("identitytoken and registrytoken are kept; email is not a credential", () => {
    const parsed = parseDockerConfig(
      configJson({
        "a.example.com": { identitytoken: "refresh", email: "x@example.com" },
        "b.example.com": { registrytoken: "bearer" },
        "c.example.com": { auth: b64("<token>:"), identitytoken: "refresh2" },
      }),
      "dockerconfigjson",
      SOURCE,
    );
    assert.deepEqual(
      parsed.entries.map((e) => e.credential),
      [
        { source: SOURCE, identityToken: "refresh" },
        { source: SOURCE, registryToken: "bearer" },
        { source: SOURCE, username: "<token>", identityToken: "refresh2" },
      ],
    );
    assert.deepEqual(parsed.problems, []);
  });

  test("padded and unpadded base64 are both accepted, line breaks skipped", () => {
    // Alternately with their "=" padding kept and removed.
    const cases = ["ab:c", "ab:cd", "a:bc", "a:"];
    const auths = Object.fromEntries(cases.map((plain, i) => [`r${i}.example.com`, { auth: b64(plain).replace(/=+$/, i % 2 ? "" : "$&") }]));
    auths["wrapped.example.com"] = { auth: `${b64("user:a-longer-password").slice(0, 8)}\n${b64("user:a-longer-password").slice(8)}` };
    const parsed = parseDockerConfig(configJson(auths), "dockerconfigjson", SOURCE);
    assert.deepEqual(parsed.problems, []);
    assert.deepEqual(
      parsed.entries.map((e) => `${e.credential.username ?? ""}:${e.credential.password ?? ""}`),
      [...cases, "user:a-longer-password"],
    );
  });

  test("field names match case-insensitively, as Go's JSON decoder matches them", () => {
    const parsed = parseDockerConfig(JSON.stringify({ Auths: { "r.example.com": { Username: "u", PASSWORD: "p" } } }), "dockerconfigjson", SOURCE);
    assert.deepEqual(parsed.entries, [{ key: "r.example.com", credential: { source: SOURCE, username: "u", password: "p" } }]);
  });

  test("the legacy dockercfg shape is the map of entries itself", () => {
    const parsed = parseDockerConfig(
      JSON.stringify({ "https://index.docker.io/v1/": { auth: b64("hub:pw"), email: "e@example.com" }, "quay.io": { username: "q", password: "w" } }),
      "dockercfg",
      "secret team-a/legacy",
    );
    assert.deepEqual(parsed.entries, [
      { key: "https://index.docker.io/v1/", credential: { source: "secret team-a/legacy", username: "hub", password: "pw" } },
      { key: "quay.io", credential: { source: "secret team-a/legacy", username: "q", password: "w" } },
    ]);
  });

  test("credentials are frozen", () => {
    const [entry] = parseDockerConfig(configJson({ r: { username: "u", password: "p" } }), "dockerconfigjson", SOURCE).entries;
    assert.ok(Object.isFrozen(entry!.credential));
  });
});

describe("parseDockerConfig: malformed entries are skipped and reported, the rest load", () => {
  const secretPassword = "hunter2-SECRET";
  const malformed: Array<[string, unknown, RegExp]> = [
    ["bad-char.example.com", { auth: "not base64!" }, /auth is not valid base64/],
    ["bad-padding.example.com", { auth: "YWJj=" }, /auth is not valid base64/],
    ["bad-length.example.com", { auth: "YWJjZ" }, /auth is not valid base64/],
    // Bytes fb ff 3a 78 are "+/86eA==" in the standard alphabet; the URL-safe "-_86eA==" is not accepted.
    ["url-alphabet.example.com", { auth: "-_86eA==" }, /auth is not valid base64/],
    ["no-colon.example.com", { auth: b64(`alice${secretPassword}`) }, /auth does not decode to "username:password" \(no colon\)/],
    ["number.example.com", { username: "u", password: 12345 }, /password is not a string/],
    ["not-object.example.com", `alice:${secretPassword}`, /is not a JSON object/],
    ["empty.example.com", {}, /holds no credential/],
    ["email-only.example.com", { email: "e@example.com" }, /holds no credential/],
    ["empty-auth.example.com", { auth: b64(":") }, /holds no credential/],
  ];

  test("each problem names the source and the key, never the value", () => {
    const auths: Record<string, unknown> = { "good.example.com": { username: "ok", password: secretPassword } };
    for (const [key, entry] of malformed) auths[key] = entry;
    auths["also-good.example.com"] = { auth: b64(`carol:${secretPassword}`) };
    const parsed = parseDockerConfig(configJson(auths), "dockerconfigjson", SOURCE);

    assert.deepEqual(
      parsed.entries.map((e) => e.key),
      ["good.example.com", "also-good.example.com"],
    );
    assert.equal(parsed.problems.length, malformed.length);
    malformed.forEach(([key, , reason], i) => {
      const problem = parsed.problems[i]!;
      assert.ok(problem.startsWith(`${SOURCE}: entry ${JSON.stringify(key)}: `), problem);
      assert.match(problem, reason);
    });
    assertNoLeak(parsed.problems, secretPassword, "alice", b64(`alice${secretPassword}`), "12345");
  });
});

describe("parseDockerConfig: whole documents", () => {
  test("invalid JSON throws, naming the source and a position but not quoting the text", () => {
    const text = '{"auths": {"r": {"password": "hunter2-SECRET" oops}}}';
    assert.throws(
      () => parseDockerConfig(text, "dockerconfigjson", SOURCE),
      (err: Error) => {
        assert.match(err.message, /^secret team-a\/regcred: not valid JSON \(at character \d+\)$/);
        assert.ok(!err.message.includes("hunter2"));
        return true;
      },
    );
  });

  test("a document that is not an object, or auths that is not one, throws", () => {
    assert.throws(() => parseDockerConfig("[]", "dockercfg", SOURCE), {
      name: "DockerConfigError",
      code: "invalid-document",
      message: "secret team-a/regcred: not a JSON object",
    });
    assert.throws(() => parseDockerConfig('{"auths": []}', "dockerconfigjson", SOURCE), { code: "invalid-document", message: /"auths" is not a JSON object/ });
  });

  test("a dockerconfigjson without auths (or with null) has no entries, like the kubelet reads it", () => {
    assert.deepEqual(parseDockerConfig("{}", "dockerconfigjson", SOURCE), { entries: [], problems: [] });
    assert.deepEqual(parseDockerConfig('{"auths": null}', "dockerconfigjson", SOURCE), { entries: [], problems: [] });
  });
});

describe("loadAuthFile", () => {
  const dir = mkdtempSync(join(tmpdir(), "imprimatur-authfile-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text, { mode: 0o600 });
    return path;
  };

  test("reads the dockerconfigjson shape, naming the file as the source", async () => {
    const path = write("auth.json", configJson({ "registry.example.com": { auth: b64("u:p") } }));
    assert.deepEqual(await loadAuthFile(path), {
      entries: [{ key: "registry.example.com", credential: { source: `authfile ${path}`, username: "u", password: "p" } }],
      problems: [],
    });
  });

  test("reads the legacy shape when the file has none of config.json's members", async () => {
    const path = write("dockercfg.json", JSON.stringify({ "quay.io": { username: "q", password: "w" } }));
    const loaded = await loadAuthFile(path);
    assert.deepEqual(loaded.entries, [{ key: "quay.io", credential: { source: `authfile ${path}`, username: "q", password: "w" } }]);
  });

  test("a config.json with credential helpers: auths load, the helpers are reported as unsupported", async () => {
    const path = write(
      "config.json",
      JSON.stringify({ credHelpers: { "gcr.io": "gcloud" }, credsStore: "desktop", auths: { "gcr.io": {}, "quay.io": { auth: b64("q:w") } } }),
    );
    const loaded = await loadAuthFile(path);
    assert.deepEqual(
      loaded.entries.map((e) => e.key),
      ["quay.io"],
    );
    assert.deepEqual(loaded.problems, [
      `authfile ${path}: entry "gcr.io": holds no credential (no auth, username, password, identitytoken or registrytoken; credential helpers are not supported)`,
      `authfile ${path}: "credHelpers" is ignored (credential helpers are not supported)`,
      `authfile ${path}: "credsStore" is ignored (credential helpers are not supported)`,
    ]);
  });

  test("a file that cannot be read, or is not JSON, rejects naming the file", async () => {
    const missing = join(dir, "missing.json");
    await assert.rejects(loadAuthFile(missing), { code: "unreadable", message: `auth file ${missing}: cannot read it (ENOENT)` });
    const broken = write("broken.json", "{ not json");
    await assert.rejects(loadAuthFile(broken), (err: Error) => err.message.startsWith(`auth file ${broken}: not valid JSON`));
    const list = write("list.json", "[1]");
    await assert.rejects(loadAuthFile(list), { message: `auth file ${list}: not a JSON object` });
  });
});
