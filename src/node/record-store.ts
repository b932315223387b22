// The node proxy's records on disk, in the kubelet's layout: <state>/pulling/ (intents) and <state>/pulled/
// (pulled records), one JSON file per image named sha256-<hex of the value>, plus the node-local HMAC key and
// the list of images preloaded before the first start (the snapshot). Directories 0700, files 0600, every write atomic
// (temporary file, fsync, rename, fsync of the directory), so a crash leaves the old record or the new one; an
// intent's fsyncs overlap its pull (writeIntent).
// Pulled records are read once at start and kept in memory; writes go to both. Every change of a record or of the
// preloaded list, and every prune, takes the store's one lock, so a prune never interleaves with a write.
import { createHash, randomBytes } from "node:crypto";
import { close, closeSync, fsync, openSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { promisify } from "node:util";
import { basename, dirname, join } from "node:path";
import {
  decodePreloadedImages,
  decodePulledRecord,
  decodePullIntent,
  preloadedImages,
  preloadedUnder,
  pullIntent,
  type PreloadedImage,
  type ImagePulledRecord,
  type ImagePullIntent,
} from "../core/pull-verification/pull-records.ts";
import { decodeVerifiedRecord, recordVerification, type ImageVerifiedRecord, type Verification } from "../core/pull-verification/verified-records.ts";
import { makeDirectory } from "../fs/make-directory.ts";
import { NodeProxyError } from "./node-proxy-error.ts";

/** What the store knows of an image's record: none, a record, or a file that could not be read (then: verify). */
export type RecordRead = { state: "none" } | { state: "ok"; record: ImagePulledRecord } | { state: "unreadable"; reason: string };

export interface LeftoverIntent {
  file: string;
  intent?: ImagePullIntent;
  reason?: string;
}

/**
 * The first start's snapshot of the images on the node (preloaded-images.json), which marks that start as done:
 * "due" while no start has completed it and the folder shows no other sign of a start (no record, no intent), so
 * a start that failed before it (the runtime not up yet) leaves the next start a first start; "taken" once
 * written (readable or not); "missing" when records or intents exist without it (a folder from an earlier
 * version, or the file deleted), in which case it is never taken late: the images on the node then may have come
 * through the proxy, and none counts as preloaded.
 */
export type SnapshotState = "due" | "taken" | "missing";

/** Points between the writes of the store, where a test may stop the process (kill -9) to check what survives. */
export type StoreStep =
  | "intent-in-place"
  | "intent-durable"
  | "intent-removed"
  | `${"record" | "preloaded" | "verified"}-${"temporary-written" | "renamed" | "durable"}`
  | "record-pruned";

export interface RecordStoreOptions {
  /** Called after each step of a write (tests only). */
  onStep?: (step: StoreStep) => void;
}

const KEY_FILE = "credential-hash.key";
const PRELOADED_FILE = "preloaded-images.json";
const PULLING = "pulling";
const PULLED = "pulled";
const VERIFIED = "verified";

const fsyncFd = promisify(fsync);
const closeFd = promisify(close);

export function recordFileName(value: string): string {
  return `sha256-${createHash("sha256").update(value).digest("hex")}`;
}

export class RecordStore {
  /** The HMAC key for credential hashes. */
  readonly key: Buffer;
  private readonly pulled = new Map<string, RecordRead & { state: "ok" | "unreadable" }>();
  /** Records of verification at pull time, by file name; an unreadable one is left out (the image is verified again). */
  private readonly verified = new Map<string, ImageVerifiedRecord>();
  /** A name pulled through the proxy → the image it was last verified as (the newest record naming it). */
  private readonly verifiedNames = new Map<string, string>();
  /** imageRef → the repositories it was preloaded under. */
  private preloaded: ReadonlyMap<string, ReadonlySet<string>>;
  private preloadedReadable: boolean;
  private snapshotState: SnapshotState = "due";
  private intentsInFlight = 0;
  private readonly intents = new Map<string, { pulls: number; durable: Promise<void> }>();
  /** The tail of the chain of changes: one at a time. */
  private lock: Promise<unknown> = Promise.resolve();
  /** Record writes so far, and for each record file the count at its last write (see writeTicket). */
  private writes = 0;
  private readonly lastWrite = new Map<string, number>();
  private readonly onStep: ((step: StoreStep) => void) | undefined;

  readonly dir: string;

  private constructor(
    dir: string,
    key: Buffer,
    preloaded: { images: ReadonlyMap<string, ReadonlySet<string>>; readable: boolean },
    onStep: ((step: StoreStep) => void) | undefined,
  ) {
    this.dir = dir;
    this.onStep = onStep;
    this.key = key;
    this.preloaded = preloaded.images;
    this.preloadedReadable = preloaded.readable;
  }

  /** Opens (creating on first start) the state folder and reads every pulled record. */
  static async open(dir: string, opts: RecordStoreOptions = {}): Promise<RecordStore> {
    await makeDirectory(dir, 0o700);
    await makeDirectory(join(dir, PULLING), 0o700);
    await makeDirectory(join(dir, PULLED), 0o700);
    await makeDirectory(join(dir, VERIFIED), 0o700);
    // The key may be left by a start that failed before its snapshot: that start is not over, and the key is reused.
    const key = await loadOrCreateKey(join(dir, KEY_FILE));
    const preloaded = await readPreloaded(join(dir, PRELOADED_FILE));
    const store = new RecordStore(dir, key, preloaded, opts.onStep);
    // Temporary files of writes a crash interrupted are dropped; the target kept its old content (or, for the
    // snapshot, stays absent: still due).
    for (const sub of ["", PULLING, PULLED, VERIFIED]) {
      for (const name of await readdir(join(dir, sub))) if (name.startsWith(".") && name.endsWith(".tmp")) await rm(join(dir, sub, name), { force: true });
    }
    for (const name of await readdir(join(dir, PULLED))) {
      if (!isRecordName(name)) continue;
      store.pulled.set(name, await readPulledFile(join(dir, PULLED), name));
    }
    const verified = await readVerifiedFolder(join(dir, VERIFIED));
    // Oldest first, so that a name verified as two images points at the newer.
    for (const record of verified.sort((a, b) => Date.parse(a.verifiedTime) - Date.parse(b.verifiedTime))) store.keepVerified(record);
    store.snapshotState = snapshotState(preloaded.present, store.pulled.size > 0 || (await readdir(join(dir, PULLING))).some(isRecordName));
    return store;
  }

  /** Whether the first start's snapshot of preloaded images is still to be taken, taken, or missing for good. */
  get snapshot(): SnapshotState {
    return this.snapshotState;
  }

  /** The record of an image, from memory. */
  get(imageRef: string): RecordRead {
    return this.pulled.get(recordFileName(imageRef)) ?? { state: "none" };
  }

  /**
   * Whether the image was on the node under this repository before the proxy first ran, and has not been pulled
   * under it through the proxy since. An unreadable list, or an unreadable record of the image, counts nothing as
   * preloaded.
   */
  isPreloaded(imageRef: string, repository: string): boolean {
    const read = this.get(imageRef);
    if (!this.preloadedReadable || read.state === "unreadable") return false;
    return preloadedUnder(this.preloaded, read.state === "ok" ? read.record : undefined, imageRef, repository);
  }

  async writePreloaded(images: readonly PreloadedImage[]): Promise<void> {
    await this.locked(async () => {
      await writeAtomically(join(this.dir, PRELOADED_FILE), JSON.stringify(preloadedImages(images, new Date()), null, 2), this.step("preloaded"));
      this.preloaded = preloadedMap(images);
      this.preloadedReadable = true;
      this.snapshotState = "taken";
    });
  }

  /**
   * Changes an image's record through `change`, one change at a time; the result is on disk when this resolves.
   * Readers see it at once: it records a pull that succeeded, and if the write fails or the node crashes first,
   * the pull's intent stays behind and the image needs credentials again (fail safe).
   */
  async update(imageRef: string, change: (current: RecordRead) => ImagePulledRecord): Promise<ImagePulledRecord> {
    return this.locked(async () => {
      const next = change(this.get(imageRef));
      const file = recordFileName(imageRef);
      this.pulled.set(file, { state: "ok", record: next });
      this.lastWrite.set(file, ++this.writes);
      await writeAtomically(join(this.dir, PULLED, file), JSON.stringify(next, null, 2), this.step("record"));
      return next;
    });
  }

  async remove(imageRef: string): Promise<void> {
    await this.locked(async () => {
      const file = recordFileName(imageRef);
      await rm(join(this.dir, PULLED, file), { force: true });
      this.pulled.delete(file);
      this.lastWrite.delete(file);
      await this.dropVerified(file);
    });
  }

  /** The record of the image's verification at pull time, if one was written and reads back whole. */
  verification(imageRef: string): ImageVerifiedRecord | undefined {
    return this.verified.get(recordFileName(imageRef));
  }

  /** The image a name was last verified and pulled as (the runtime's image id), or undefined. */
  verifiedAs(name: string): string | undefined {
    return this.verifiedNames.get(name);
  }

  /**
   * Records a verified pull: in memory at once (the kubelet may ask for the image right after the pull), on disk
   * when this resolves. A write that fails or a crash before it leaves the image to be verified again after a restart.
   */
  async recordVerified(v: Verification): Promise<ImageVerifiedRecord> {
    const file = recordFileName(v.imageRef);
    const next = recordVerification(this.verified.get(file), v, new Date());
    this.keepVerified(next);
    // Counted as written now: a prune by an image list taken before this pull ended spares it.
    this.lastWrite.set(`${VERIFIED}/${file}`, ++this.writes);
    return this.locked(async () => {
      await writeAtomically(join(this.dir, VERIFIED, file), JSON.stringify(this.verified.get(file) ?? next, null, 2), this.step("verified"));
      return next;
    });
  }

  private keepVerified(record: ImageVerifiedRecord): void {
    this.verified.set(recordFileName(record.imageRef), record);
    for (const name of record.names) this.verifiedNames.set(name, record.imageRef);
  }

  private async dropVerified(file: string): Promise<void> {
    const record = this.verified.get(file);
    await rm(join(this.dir, VERIFIED, file), { force: true });
    this.verified.delete(file);
    this.lastWrite.delete(`${VERIFIED}/${file}`);
    if (record) for (const name of record.names) if (this.verifiedNames.get(name) === record.imageRef) this.verifiedNames.delete(name);
  }

  /** Taken before the runtime's image list that a prune uses: records written after it are not pruned by that list. */
  writeTicket(): number {
    return this.writes;
  }

  /**
   * Records (readable or not) and preloaded entries of images that are no longer on the node, by the images the
   * runtime listed after `listedAt` (writeTicket) was taken. A preloaded entry goes with its image: if the image
   * comes back, it came through a pull and is no longer preloaded.
   */
  async prune(present: ReadonlySet<string>, listedAt: number): Promise<string[]> {
    return this.locked(async () => {
      const gone: string[] = [];
      const presentFiles = new Set([...present].map(recordFileName));
      for (const [file, read] of [...this.pulled]) {
        if (presentFiles.has(file) || (this.lastWrite.get(file) ?? 0) > listedAt) continue;
        await rm(join(this.dir, PULLED, file), { force: true });
        this.onStep?.("record-pruned");
        this.pulled.delete(file);
        this.lastWrite.delete(file);
        gone.push(read.state === "ok" ? read.record.imageRef : file);
      }
      for (const [file, record] of [...this.verified]) {
        if (presentFiles.has(file) || (this.lastWrite.get(`${VERIFIED}/${file}`) ?? 0) > listedAt) continue;
        await this.dropVerified(file);
        if (!gone.includes(record.imageRef)) gone.push(record.imageRef);
      }
      const keptPreloaded = [...this.preloaded].filter(([imageRef]) => present.has(imageRef));
      if (this.preloadedReadable && keptPreloaded.length < this.preloaded.size) {
        const images = keptPreloaded.map(([imageRef, repositories]) => ({ imageRef, repositories: [...repositories] }));
        await writeAtomically(join(this.dir, PRELOADED_FILE), JSON.stringify(preloadedImages(images, new Date()), null, 2), this.step("preloaded"));
        this.preloaded = preloadedMap(images);
      }
      return gone;
    });
  }

  /**
   * Pulls of one image name in flight share its intent file, removed after the last of them. On return the intent
   * is in place, which a crash of the proxy leaves behind (the kubelet's own guarantee: it writes intents
   * without fsync). `durable` resolves once it also survives a power loss: the fsyncs run while the pull does, and
   * the pull's answer waits for them, so no pod uses the image before its intent is on disk.
   */
  writeIntent(image: string): { durable: Promise<void> } {
    let intent = this.intents.get(image);
    if (!intent) {
      const written = writeThenSync(join(this.dir, PULLING, recordFileName(image)), JSON.stringify(pullIntent(image), null, 2));
      this.onStep?.("intent-in-place");
      const durable = written.sync().then(() => this.onStep?.("intent-durable"));
      durable.catch(() => {}); // each pull awaits it; this only keeps a failure before then from going unhandled
      intent = { pulls: 0, durable };
      this.intents.set(image, intent);
    }
    intent.pulls++;
    this.intentsInFlight++;
    return { durable: intent.durable };
  }

  async removeIntent(image: string): Promise<void> {
    if (!this.releaseIntent(image)) return;
    await rm(join(this.dir, PULLING, recordFileName(image)), { force: true });
    this.onStep?.("intent-removed");
  }

  /** The pull is over but its record could not be written: the intent file stays for the next start to finish. */
  keepIntent(image: string): void {
    this.releaseIntent(image);
  }

  /** One pull of the image is over; true when it was the last. */
  private releaseIntent(image: string): boolean {
    const intent = this.intents.get(image);
    if (!intent) return false;
    this.intentsInFlight--;
    if (--intent.pulls > 0) return false;
    this.intents.delete(image);
    return true;
  }

  /** Intents left by a previous run that stopped between writing an intent and removing it. */
  async leftoverIntents(): Promise<LeftoverIntent[]> {
    return readIntents(join(this.dir, PULLING));
  }

  async dropIntentFile(file: string): Promise<void> {
    await rm(file, { force: true });
  }

  /** Every record, for `node-records` and metrics. */
  records(): Array<{ file: string } & (RecordRead & { state: "ok" | "unreadable" })> {
    return [...this.pulled].map(([file, read]) => ({ file, ...read }));
  }

  counts(): { pulled: number; unreadable: number; intentsInFlight: number; verified: number } {
    let unreadable = 0;
    for (const r of this.pulled.values()) if (r.state === "unreadable") unreadable++;
    return { pulled: this.pulled.size - unreadable, unreadable, intentsInFlight: this.intentsInFlight, verified: this.verified.size };
  }

  private locked<T>(work: () => Promise<T>): Promise<T> {
    const next = this.lock.then(work, work);
    this.lock = next.catch(() => undefined);
    return next;
  }

  private step(kind: "record" | "preloaded" | "verified"): ((done: "temporary-written" | "renamed" | "durable") => void) | undefined {
    const onStep = this.onStep;
    return onStep ? (done) => onStep(`${kind}-${done}`) : undefined;
  }
}

/** Reads a state folder without changing it (for `node-records`). */
export async function readRecordsFolder(dir: string): Promise<{
  records: ReturnType<RecordStore["records"]>;
  intents: LeftoverIntent[];
  preloaded: PreloadedImage[];
  snapshot: SnapshotState;
  /** When the snapshot was taken (a readable one). */
  snapshotTime?: string;
}> {
  await stat(join(dir, PULLED)); // a clear ENOENT for a folder that is not a state folder
  const records: ReturnType<RecordStore["records"]> = [];
  for (const name of (await readdir(join(dir, PULLED))).sort()) {
    if (isRecordName(name)) records.push({ file: name, ...(await readPulledFile(join(dir, PULLED), name)) });
  }
  const intents = (await readIntents(join(dir, PULLING)).catch(() => [] as LeftoverIntent[])).map((i) => ({ ...i, file: basename(i.file) }));
  const preloaded = await readPreloaded(join(dir, PRELOADED_FILE));
  return {
    records,
    intents,
    preloaded: [...preloaded.images].map(([imageRef, repositories]) => ({ imageRef, repositories: [...repositories] })),
    snapshot: snapshotState(preloaded.present, records.length > 0 || intents.length > 0),
    ...(preloaded.recordedTime ? { snapshotTime: preloaded.recordedTime } : {}),
  };
}

/** Every intent file of the folder (full paths), read strictly; an unreadable one comes with the reason. */
async function readIntents(folder: string): Promise<LeftoverIntent[]> {
  const out: LeftoverIntent[] = [];
  for (const name of await readdir(folder)) {
    if (!isRecordName(name)) continue;
    const file = join(folder, name);
    try {
      out.push({ file, intent: decodePullIntent(await readFile(file, "utf8")) });
    } catch (e) {
      out.push({ file, reason: (e as Error).message });
    }
  }
  return out;
}

async function readPulledFile(folder: string, name: string): Promise<RecordRead & { state: "ok" | "unreadable" }> {
  let record: ImagePulledRecord;
  try {
    record = decodePulledRecord(await readFile(join(folder, name), "utf8"));
  } catch (e) {
    return { state: "unreadable", reason: (e as Error).message };
  }
  // A record found under another image's name was moved or forged: as good as unreadable.
  if (recordFileName(record.imageRef) !== name) return { state: "unreadable", reason: `the file name is not that of its imageRef ${record.imageRef}` };
  return { state: "ok", record };
}

/** The readable verification records of the folder; one that does not read back whole, or under another image's name, is left out. */
async function readVerifiedFolder(folder: string): Promise<ImageVerifiedRecord[]> {
  const out: ImageVerifiedRecord[] = [];
  for (const name of await readdir(folder)) {
    if (!isRecordName(name)) continue;
    try {
      const record = decodeVerifiedRecord(await readFile(join(folder, name), "utf8"));
      if (recordFileName(record.imageRef) === name) out.push(record);
    } catch {
      // unreadable: as if never verified, so the image is verified again before a pod uses it
    }
  }
  return out;
}

/** An intent's or a record's file (temporary files start with a dot). */
function isRecordName(name: string): boolean {
  return name.startsWith("sha256-");
}

function snapshotState(present: boolean, startedBefore: boolean): SnapshotState {
  if (present) return "taken";
  return startedBefore ? "missing" : "due";
}

/** The snapshot: `present` unless the file does not exist (an unreadable one is present: it was taken). */
async function readPreloaded(
  file: string,
): Promise<{ images: ReadonlyMap<string, ReadonlySet<string>>; readable: boolean; present: boolean; recordedTime?: string }> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { images: new Map(), readable: true, present: false };
    return { images: new Map(), readable: false, present: true };
  }
  try {
    const decoded = decodePreloadedImages(text);
    return { images: preloadedMap(decoded.images), readable: true, present: true, recordedTime: decoded.recordedTime };
  } catch {
    return { images: new Map(), readable: false, present: true };
  }
}

function preloadedMap(images: readonly PreloadedImage[]): Map<string, ReadonlySet<string>> {
  return new Map(images.map((i) => [i.imageRef, new Set(i.repositories)]));
}

async function loadOrCreateKey(file: string): Promise<Buffer> {
  try {
    const key = await readFile(file);
    if (key.length !== 32)
      throw new NodeProxyError(
        "invalid-credential-key",
        `${file}: the credential hash key must be 32 bytes, found ${key.length}; records keyed with it cannot be trusted`,
      );
    return key;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
  const key = randomBytes(32);
  await writeAtomically(file, key);
  return key;
}

/** Write to a temporary file beside the target, fsync it, rename it over the target, fsync the folder. */
async function writeAtomically(file: string, content: string | Buffer, step?: (done: "temporary-written" | "renamed" | "durable") => void): Promise<void> {
  const tmp = temporaryName(file);
  const handle = await open(tmp, "wx", 0o600);
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  step?.("temporary-written");
  try {
    await rename(tmp, file);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
  step?.("renamed");
  await syncFolder(dirname(file));
  step?.("durable");
}

/**
 * The same write in two steps: in place at once (temporary file renamed over the target, so readers never see
 * half of it), then `sync()` makes it durable (the file, then the folder). Until then a power loss may lose it.
 * The first step uses blocking calls: three small syscalls without fsync take about 45 µs here, four trips
 * through libuv's thread pool about 250 µs, and a pull waits for this step.
 */
function writeThenSync(file: string, content: string): { sync(): Promise<void> } {
  const tmp = temporaryName(file);
  const fd = openSync(tmp, "wx", 0o600);
  try {
    writeFileSync(fd, content);
    renameSync(tmp, file);
  } catch (e) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  return {
    sync: async () => {
      try {
        await fsyncFd(fd); // the renamed file: the descriptor follows the inode
      } finally {
        await closeFd(fd);
      }
      await syncFolder(dirname(file));
    },
  };
}

/** A dot name beside the target, so that readers looking for sha256-* never see a half-written file. */
function temporaryName(file: string): string {
  return join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
}

async function syncFolder(dir: string): Promise<void> {
  const folder = await open(dir, "r");
  try {
    await folder.sync();
  } finally {
    await folder.close();
  }
}
