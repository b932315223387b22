// The policies the primary put in force, as workers load them (serve --workers). The primary alone reads the
// policy source (the folder's watch, the custom resources' informers and statuses): a worker must judge by exactly
// the set the primary loaded, not by what its own read of a changing folder would find a moment later. So the
// primary records what each load read — every text, and every file a policy named beside it (a key, a trust
// root) with what reading it gave — and sends that; a worker loads it through the same loader, from memory.
import { parsePolicyText } from "../policy/load-policies.ts";
import type { ParsedPolicies } from "../policy/parsed-policies.ts";
import type { PolicyError } from "../policy/policy-error.ts";
import type { PolicySource, PolicyText } from "../policy/policy-source.ts";
import { profileSources, shippedProfiles } from "../policy/profiles.ts";

/** One load's texts, as plain data (structured-cloneable): what a worker needs to load the same set. */
export interface PolicySnapshot {
  /** The primary's count of sets put in force: results cached for one set are never used for another. */
  version: number;
  description: string;
  texts: SnapshotText[];
  errors: PolicyError[];
}

export interface SnapshotText {
  origin: string;
  text: string;
  locations?: false;
  /** Files the text named beside it, as reading them gave: present when the text could name any (a folder's file). */
  related?: Array<{ path: string; text?: string; error?: string }>;
}

/**
 * The primary's source, recording what each read gave and what the load then read beside the texts. `snapshot()`
 * is the last read, for after its load succeeded (loads are serialized: src/policy/policy-loader.ts).
 */
export class RecordingPolicySource implements PolicySource {
  private readonly source: PolicySource;
  private last: Omit<PolicySnapshot, "version"> | undefined;

  constructor(source: PolicySource) {
    this.source = source;
  }

  get description(): string {
    return this.source.description;
  }

  async read(): Promise<{ texts: PolicyText[]; errors: PolicyError[] }> {
    const read = await this.source.read();
    const texts: SnapshotText[] = [];
    const recorded = read.texts.map((t) => {
      const entry: SnapshotText = { origin: t.origin, text: t.text, ...(t.locations === false ? { locations: false as const } : {}) };
      texts.push(entry);
      if (!t.related) return t;
      const related = t.related;
      const seen: NonNullable<SnapshotText["related"]> = (entry.related = []);
      return {
        ...t,
        related: (path: string) => {
          try {
            const text = related(path);
            seen.push({ path, text });
            return text;
          } catch (e) {
            seen.push({ path, error: (e as Error).message });
            throw e;
          }
        },
      };
    });
    this.last = { description: this.source.description, texts, errors: read.errors };
    return { texts: recorded, errors: read.errors };
  }

  watch(changed: () => void, failed: (err: unknown) => void): { close(): void } {
    return this.source.watch?.(changed, failed) ?? { close: () => undefined };
  }

  loaded(outcome: { errors: readonly PolicyError[] }): void {
    this.source.loaded?.(outcome);
  }

  /** The last read, numbered `version`; undefined before the first. */
  snapshot(version: number): PolicySnapshot | undefined {
    return this.last && { ...this.last, version };
  }
}

/** A worker's source: the primary's last snapshot, read from memory; `changed` when a new one arrives. */
export class SnapshotPolicySource implements PolicySource {
  private current: PolicySnapshot;
  private lastRead: number;
  private readonly listeners = new Set<() => void>();
  /** Custom resources' texts compiled before, by origin: a reload compiles only what changed. */
  private compiled = new Map<string, { text: string; parsed: ParsedPolicies }>();

  constructor(first: PolicySnapshot) {
    this.current = first;
    this.lastRead = first.version;
  }

  get description(): string {
    return this.current.description;
  }

  /** The version of the snapshot read last: the set the last load put together (loads are serialized). */
  get lastReadVersion(): number {
    return this.lastRead;
  }

  /** A newer snapshot from the primary; an older one (a message overtaken) is ignored. */
  replace(next: PolicySnapshot): boolean {
    if (next.version <= this.current.version) return false;
    this.current = next;
    for (const listener of this.listeners) listener();
    return true;
  }

  async read(): Promise<{ texts: PolicyText[]; errors: PolicyError[] }> {
    const { texts, errors, version } = this.current;
    this.lastRead = version;
    const profiles = profileSources(await shippedProfiles());
    const compiled = new Map<string, { text: string; parsed: ParsedPolicies }>();
    const read = texts.map((t): PolicyText => {
      const base = { origin: t.origin, text: t.text, ...(t.locations === false ? { locations: false as const } : {}) };
      if (t.related) return { ...base, related: replayed(t.origin, t.related) };
      // Without related files a text's compile depends on its text alone: kept from the last read when unchanged.
      const before = this.compiled.get(t.origin);
      const parsed = before?.text === t.text ? before.parsed : parsePolicyText(t.text, t.origin, { profiles });
      compiled.set(t.origin, { text: t.text, parsed });
      return { ...base, parsed };
    });
    this.compiled = compiled;
    return { texts: read, errors };
  }

  watch(changed: () => void): { close(): void } {
    this.listeners.add(changed);
    return { close: () => this.listeners.delete(changed) };
  }
}

/** What reading each named file gave the primary; a file it did not read is an error here too, never a read. */
function replayed(origin: string, files: NonNullable<SnapshotText["related"]>): (path: string) => string {
  return (path) => {
    const found = files.find((f) => f.path === path);
    if (!found) throw new Error(`${path}: not read when the primary loaded ${origin}`);
    if (found.error !== undefined) throw new Error(found.error);
    return found.text ?? "";
  };
}
