// `serve --tls-cert/--tls-key` rereads its files: a renewed certificate reaches new connections without a restart,
// whether the files are replaced the way the kubelet updates a mounted Secret (a `..data` symlink swapped to a new
// folder, as with cert-manager) or renamed over in place; a pair whose key does not match is logged, and the
// certificate in use stays. The real command runs as a child; certificates are made with the openssl command.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { promisify } from "node:util";
import { startServeWithLines, type ServeWithLines } from "../../support/serve-lines.ts";

const run = promisify(execFile);

interface Pair {
  cert: string;
  key: string;
}

/** A self-signed serving certificate for 127.0.0.1 whose subject is CN=`name`. */
async function servingCertificate(dir: string, name: string): Promise<Pair> {
  const base = join(dir, name);
  await run("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-days",
    "2",
    "-subj",
    `/CN=${name}`,
    "-addext",
    "subjectAltName=IP:127.0.0.1",
    "-keyout",
    `${base}.key`,
    "-out",
    `${base}.crt`,
  ]);
  return { cert: await readFile(`${base}.crt`, "utf8"), key: await readFile(`${base}.key`, "utf8") };
}

/**
 * A Secret volume as the kubelet lays it out: the files are symlinks through `..data`, itself a symlink to a
 * timestamped folder; an update writes a new folder and renames a new `..data` link over the old one.
 */
class SecretVolume {
  readonly dir: string;
  private generation = 0;

  constructor(dir: string) {
    this.dir = dir;
  }

  async init(pair: Pair): Promise<void> {
    await mkdir(this.dir);
    await this.write(pair);
    await symlink("..data/tls.crt", join(this.dir, "tls.crt"));
    await symlink("..data/tls.key", join(this.dir, "tls.key"));
  }

  async write(pair: Pair): Promise<void> {
    const folder = `..2026_11_25_00_00_0${++this.generation}`;
    await mkdir(join(this.dir, folder));
    await writeFile(join(this.dir, folder, "tls.crt"), pair.cert);
    await writeFile(join(this.dir, folder, "tls.key"), pair.key);
    await symlink(folder, join(this.dir, "..data_tmp"));
    await rename(join(this.dir, "..data_tmp"), join(this.dir, "..data"));
  }
}

/** The common name of the certificate the server presents to a new connection. */
function presentedName(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port, rejectUnauthorized: false }, () => {
      const cn = socket.getPeerCertificate().subject?.CN;
      socket.end();
      resolve(Array.isArray(cn) ? cn[0]! : (cn ?? ""));
    });
    socket.on("error", reject);
  });
}

/** Connects until the server presents `name` (it rereads the files every few seconds). */
async function untilPresented(port: number, name: string): Promise<void> {
  while ((await presentedName(port)) !== name) await new Promise((r) => setTimeout(r, 200));
}

function startServe(dir: string, certFile: string, keyFile: string): Promise<ServeWithLines> {
  return startServeWithLines(["--tls-cert", certFile, "--tls-key", keyFile], { stateDir: join(dir, "state") });
}

test("a renewed certificate in a Secret volume (the ..data symlink swap) is served without a restart; a mismatched pair is refused", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-cert-reload-"));
  try {
    const [first, second, third] = await Promise.all(["serving-first", "serving-second", "serving-third"].map((n) => servingCertificate(dir, n)));
    const volume = new SecretVolume(join(dir, "tls"));
    await volume.init(first!);
    const serve = await startServe(dir, join(volume.dir, "tls.crt"), join(volume.dir, "tls.key"));
    try {
      assert.equal(await presentedName(serve.port), "serving-first");

      await volume.write(second!);
      await untilPresented(serve.port, "serving-second");
      assert.ok(serve.running(), "the same process serves the new certificate");
      assert.ok(serve.lines.some((l) => l.includes("serving certificate: reloaded from the files")));

      // cert-manager never writes this, but a hand-made Secret can: the third certificate with the second's key.
      const mark = serve.lines.length;
      await volume.write({ cert: third!.cert, key: second!.key });
      const refused = await serve.line(/serving certificate: the new files are not usable/, mark);
      assert.match(refused, /tls\.key is not the key of the certificate in .*tls\.crt/);
      assert.equal(await presentedName(serve.port), "serving-second", "the certificate in use stays");

      // Put right, it is taken.
      await volume.write(third!);
      await untilPresented(serve.port, "serving-third");
      assert.equal(await serve.stop(), 0);
    } finally {
      if (serve.running()) await serve.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("plain certificate files replaced by rename are served without a restart; an unparsable certificate keeps the old one", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-cert-reload-"));
  try {
    const [first, second] = await Promise.all(["plain-first", "plain-second"].map((n) => servingCertificate(dir, n)));
    const certFile = join(dir, "server.crt");
    const keyFile = join(dir, "server.key");
    await writeFile(certFile, first!.cert);
    await writeFile(keyFile, first!.key);
    const serve = await startServe(dir, certFile, keyFile);
    try {
      assert.equal(await presentedName(serve.port), "plain-first");

      const mark = serve.lines.length;
      await writeFile(`${certFile}.new`, "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n");
      await rename(`${certFile}.new`, certFile);
      const refused = await serve.line(/serving certificate: the new files are not usable/, mark);
      assert.match(refused, /server\.crt holds no PEM certificate/);
      assert.equal(await presentedName(serve.port), "plain-first");

      // One file after the other, as a script would: the pair is taken once both are in place.
      await writeFile(`${keyFile}.new`, second!.key);
      await rename(`${keyFile}.new`, keyFile);
      await writeFile(`${certFile}.new`, second!.cert);
      await rename(`${certFile}.new`, certFile);
      await untilPresented(serve.port, "plain-second");
      assert.equal(await serve.stop(), 0);
    } finally {
      if (serve.running()) await serve.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
