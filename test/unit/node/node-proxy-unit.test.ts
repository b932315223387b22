// The shipped host service (deploy/node-proxy/host/): the systemd unit, its environment file and the kubelet
// setting, read as systemd and the kubelet read them. That the unit's command runs the proxy from its bundle,
// with a real kubelet in front, is test/e2e/node-proxy-kubelet.test.ts; the bundle's archive is tested here.
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, readFile, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, test } from "node:test";
import { parse } from "yaml";
import { archiveFolder } from "../../../scripts/build-node-bundle.ts";
import { expandCommand, parseEnvironmentFile, parseUnit, SHIPPED_UNIT, unitCommand } from "../../support/node-proxy-process.ts";

const HOST = fileURLToPath(new URL("../../../deploy/node-proxy/host/", import.meta.url));
const EXAMPLE_ENV = join(HOST, "node-proxy.env");

describe("imprimatur-node-proxy.service", () => {
  test("starts after containerd and before the kubelet, restarts always and without a limit, enabled with the kubelet", async () => {
    const unit = parseUnit(await readFile(SHIPPED_UNIT, "utf8"));
    const [u, s, install] = [unit.get("Unit")!, unit.get("Service")!, unit.get("Install")!];
    assert.deepEqual(u.get("After"), ["containerd.service"]);
    assert.deepEqual(u.get("Before"), ["kubelet.service"]);
    assert.deepEqual(u.get("StartLimitIntervalSec"), ["0"]);
    assert.deepEqual(s.get("Restart"), ["always"]);
    assert.deepEqual(s.get("EnvironmentFile"), ["/etc/imprimatur/node-proxy.env", "-/opt/imprimatur/build.env"]);
    assert.deepEqual(s.get("RuntimeDirectory"), ["imprimatur"], "/run/imprimatur for the socket");
    assert.ok(install.get("WantedBy")![0]!.split(" ").includes("kubelet.service"));
  });

  test("its command with the example environment file: the bundled node runs the bundled app with every flag", async () => {
    const { argv, env } = await unitCommand(await readFile(SHIPPED_UNIT, "utf8"), (path) => (path === "/etc/imprimatur/node-proxy.env" ? EXAMPLE_ENV : path));
    assert.deepEqual(argv, [
      "/opt/imprimatur/node",
      "/opt/imprimatur/app/bin/imprimatur.js",
      "node-proxy",
      "--listen",
      "unix:///run/imprimatur/image.sock",
      "--runtime-endpoint",
      "unix:///run/containerd/containerd.sock",
      "--state-dir",
      "/var/lib/imprimatur/node-proxy",
      "--metrics-address",
      "127.0.0.1:9465",
      "--verification-policy",
      "NeverVerifyPreloadedImages",
    ]);
    assert.equal(env.IMPRIMATUR_LOG_LEVEL, "info");
  });

  test("the socket the unit waits for is the one the example listens on and the kubelet setting names", async () => {
    const unit = await readFile(SHIPPED_UNIT, "utf8");
    const listen = parseEnvironmentFile(await readFile(EXAMPLE_ENV, "utf8")).IMPRIMATUR_NODE_PROXY_ARGS!.match(/--listen (\S+)/)![1]!;
    assert.equal(listen, "unix:///run/imprimatur/image.sock");
    assert.ok(parseUnit(unit).get("Service")!.get("ExecStartPost")![0]!.includes(listen.slice("unix://".length)));
    const kubelet = parse(await readFile(join(HOST, "kubelet-config.yaml"), "utf8"));
    assert.equal(kubelet.kind, "KubeletConfiguration");
    assert.equal(kubelet.imageServiceEndpoint, listen);
    assert.equal(kubelet.containerRuntimeEndpoint, "unix:///run/containerd/containerd.sock");
  });
});

describe("reading units and environment files as systemd does", () => {
  test("$NAME alone is split into words (none when empty), ${NAME} stays one word, $$ is a dollar, quotes group", () => {
    const env = { ARGS: " --a 1   --b  2 ", EMPTY: "", ONE: "x y" };
    assert.deepEqual(expandCommand("/bin/p run $ARGS $EMPTY $UNSET end", env), ["/bin/p", "run", "--a", "1", "--b", "2", "end"]);
    assert.deepEqual(expandCommand("/bin/p ${ONE} pre${ONE}post $$HOME 'a b' \"c d\"", env), ["/bin/p", "x y", "prex ypost", "$HOME", "a b", "c d"]);
    assert.throws(() => expandCommand("-/bin/p", env), /prefixes are not supported/);
    assert.throws(() => expandCommand("/bin/p 'open", env), /unbalanced quote/);
  });

  test("environment files: comments, quotes, continuations; a line that is no assignment is an error", () => {
    assert.deepEqual(parseEnvironmentFile("# c\n; c\nA=1\nB = \"two words\"\nC='3'\nD=a \\\nb\n\n"), { A: "1", B: "two words", C: "3", D: "a  b" });
    assert.throws(() => parseEnvironmentFile("not an assignment"), /not an environment line/);
  });

  test("units: repeated keys kept in order; a line outside a section is an error", () => {
    const unit = parseUnit("[Service]\nEnvironmentFile=/a\nEnvironmentFile=-/b\n# comment\n");
    assert.deepEqual(unit.get("Service")!.get("EnvironmentFile"), ["/a", "-/b"]);
    assert.throws(() => parseUnit("Key=value"), /not a unit line/);
  });

  test("an optional EnvironmentFile that is missing is skipped; a required one is an error", async () => {
    const unit = "[Service]\nEnvironmentFile=-/nowhere/optional.env\nEnvironmentFile=/nowhere/required.env\nExecStart=/bin/true\n";
    await assert.rejects(
      unitCommand(unit, (p) => p),
      { code: "ENOENT", path: "/nowhere/required.env" },
    );
    const { argv } = await unitCommand(unit.replace("EnvironmentFile=/nowhere/required.env\n", ""), (p) => p);
    assert.deepEqual(argv, ["/bin/true"]);
  });
});

describe("the bundle's archive", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "imprimatur-bundle-archive-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test("the same files give the same bytes, whatever their times, group and other write bits", async () => {
    const make = async (name: string, when: Date, loose: boolean) => {
      const folder = join(dir, name, "imprimatur-node-proxy-test");
      await mkdir(join(folder, "app", "src"), { recursive: true });
      // Written in another order each time: the archive sorts names.
      const files: Array<[string, string, number]> = [
        ["node", "#!/bin/sh\n", 0o755],
        ["app/src/b.ts", "export const b = 2;\n", 0o644],
        ["app/src/a.ts", "export const a = 1;\n", 0o644],
      ];
      for (const [file, content, mode] of loose ? files.reverse() : files) {
        await writeFile(join(folder, file), content);
        await chmod(join(folder, file), loose ? mode | 0o022 : mode);
        await utimes(join(folder, file), when, when);
      }
      return archiveFolder(folder);
    };
    const first = await make("one", new Date("2001-01-01T00:00:00Z"), false);
    const second = await make("two", new Date(), true);
    assert.match(first.sha256, /^[0-9a-f]{64}$/);
    assert.equal(second.sha256, first.sha256);
    assert.deepEqual(await readFile(second.archive), await readFile(first.archive));
    assert.equal(await readFile(`${first.archive}.sha256`, "utf8"), `${first.sha256}  imprimatur-node-proxy-test.tar.gz\n`);
  });
});
