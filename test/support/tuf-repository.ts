// A TUF repository (spec 1.0: root, timestamp, snapshot, targets) built and served on 127.0.0.1 by the tests,
// so that `imprimatur trust-root update` runs against a real TUF client (tuf-js through @sigstore/tuf) without
// the Sigstore CDN, which cannot be reached here. Metadata objects and canonical signing come from @tufjs/models.
import { createHash, generateKeyPairSync, sign, type KeyObject } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Key, Metadata, MetaFile, Root, Signature, Snapshot, TargetFile, Targets, Timestamp } from "@tufjs/models";
import { recordPrivateKey } from "./secret-ledger.ts";

export interface TufRepository {
  /** http://127.0.0.1:PORT */
  url: string;
  /** 1.root.json, the trust anchor a client starts from (`--root`). */
  rootJson: string;
  /** Every request path served, in order. */
  requests: string[];
  close(): Promise<void>;
}

interface SigningKey {
  key: Key;
  privateKey: KeyObject;
}

function ed25519Key(): SigningKey {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  recordPrivateKey(privateKey, "a TUF signing key");
  const raw = publicKey.export({ type: "spki", format: "der" }).subarray(-32);
  const keyVal = { public: raw.toString("hex") };
  const keyID = createHash("sha256")
    .update(JSON.stringify({ keytype: "ed25519", keyval: keyVal, scheme: "ed25519" }))
    .digest("hex");
  return { key: new Key({ keyID, keyType: "ed25519", scheme: "ed25519", keyVal }), privateKey };
}

function signWith<T extends Root | Timestamp | Snapshot | Targets>(metadata: Metadata<T>, signer: SigningKey): Metadata<T> {
  metadata.sign((data) => new Signature({ keyID: signer.key.keyID, sig: sign(null, data, signer.privateKey).toString("hex") }));
  return metadata;
}

/**
 * Serves `targets` (name → content). `breakTimestamp` signs timestamp.json with a key the root does not list
 * (a client must refuse it); `expired` dates every role in the past.
 */
export async function startTufRepository(targets: Record<string, string>, opts: { breakTimestamp?: boolean; expired?: boolean } = {}): Promise<TufRepository> {
  const expires = new Date(Date.now() + (opts.expired ? -1 : 1) * 24 * 3600e3).toISOString().replace(/\.\d{3}Z$/, "Z");
  const keys = { root: ed25519Key(), targets: ed25519Key(), snapshot: ed25519Key(), timestamp: ed25519Key() };
  const root = new Root({ version: 1, specVersion: "1.0", expires, consistentSnapshot: false });
  for (const [role, k] of Object.entries(keys)) root.addKey(k.key, role);
  const files = new Map<string, string>();
  const targetFiles = Object.fromEntries(
    Object.entries(targets).map(([name, content]) => [
      name,
      new TargetFile({ path: name, length: Buffer.byteLength(content), hashes: { sha256: createHash("sha256").update(content).digest("hex") } }),
    ]),
  );
  for (const [name, content] of Object.entries(targets)) files.set(`/targets/${name}`, content);
  const targetsJson = JSON.stringify(
    signWith(new Metadata(new Targets({ version: 1, specVersion: "1.0", expires, targets: targetFiles })), keys.targets).toJSON(),
  );
  const snapshotJson = JSON.stringify(
    signWith(
      new Metadata(new Snapshot({ version: 1, specVersion: "1.0", expires, meta: { "targets.json": new MetaFile({ version: 1 }) } })),
      keys.snapshot,
    ).toJSON(),
  );
  const timestampSigner = opts.breakTimestamp ? ed25519Key() : keys.timestamp;
  const timestampJson = JSON.stringify(
    signWith(new Metadata(new Timestamp({ version: 1, specVersion: "1.0", expires, snapshotMeta: new MetaFile({ version: 1 }) })), timestampSigner).toJSON(),
  );
  const rootJson = JSON.stringify(signWith(new Metadata(root), keys.root).toJSON());
  files.set("/1.root.json", rootJson);
  files.set("/targets.json", targetsJson);
  files.set("/snapshot.json", snapshotJson);
  files.set("/timestamp.json", timestampJson);

  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    requests.push(path);
    const body = files.get(path);
    if (body === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    rootJson,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
