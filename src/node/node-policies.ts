// The policies a verifying node proxy judges pulls by, read as `serve` reads them (a folder, the policy custom
// resources, or both), reloaded when they change, each set with its generation: a hash of the documents it was
// loaded from. Records of what was verified name the generation, so a change of policy makes every image on the
// node be verified again before a pod uses it.
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import { verdictHoldsForEveryPod } from "../core/pull-verification/verified-records.ts";
import { policyCount, type PolicySet } from "../core/policy-set/policy-kinds.ts";
import { PolicyLoadError, type PolicyError } from "../policy/policy-error.ts";
import { serializedPolicyLoader } from "../policy/policy-loader.ts";
import type { PolicySource, PolicyText } from "../policy/policy-source.ts";
import { nodePolicySet } from "./node-engine.ts";

/** The policies in force at the node. */
export interface NodePolicySet {
  set: PolicySet;
  /** sha256 of the documents the set was loaded from, in a stable order. */
  generation: string;
  /** Whether a verdict for one pod holds for every pod under this set (verified-records.ts). */
  everyPod: boolean;
}

/** A source that remembers the generation of what it last read; loads are serialised, so that is the set being loaded. */
class GenerationOfReads implements PolicySource {
  readonly description: string;
  private readonly inner: PolicySource;
  lastGeneration = "";

  constructor(inner: PolicySource) {
    this.inner = inner;
    this.description = inner.description;
  }

  async read(): ReturnType<PolicySource["read"]> {
    const read = await this.inner.read();
    this.lastGeneration = generationOf(read.texts);
    return read;
  }

  watch(changed: () => void, failed: (err: unknown) => void): { close(): void } {
    return this.inner.watch?.(changed, failed) ?? { close() {} };
  }

  loaded(outcome: { errors: readonly PolicyError[] }): void {
    this.inner.loaded?.(outcome);
  }
}

/**
 * The generation of a set of documents: their texts, sorted, hashed. Where they are (a folder moved, a file renamed)
 * does not change what they say; the files a policy names beside it (a trust root) are among the texts.
 */
export function generationOf(texts: readonly PolicyText[]): string {
  const hash = createHash("sha256");
  for (const text of texts.map((t) => t.text).sort()) hash.update(`${Buffer.byteLength(text)}:${text}`);
  return `sha256:${hash.digest("hex")}`;
}

export class NodePolicies {
  private readonly source: GenerationOfReads;
  private readonly load: (allowEmpty?: boolean) => Promise<PolicySet>;
  private readonly logger: Logger;
  private inForce: NodePolicySet | undefined;
  private watcher: { close(): void } | undefined;

  constructor(source: PolicySource, logger: Logger) {
    this.source = new GenerationOfReads(source);
    this.logger = logger;
    this.load = serializedPolicyLoader(this.source, { profiles: [], logger });
  }

  /** The first set; throws PolicyLoadError (with file, line and reason) when it does not load. */
  async first(allowEmpty: boolean): Promise<NodePolicySet> {
    const set = await this.load(allowEmpty);
    this.inForce = this.prepared(set);
    if (policyCount(this.inForce.set) === 0) this.logger.warn({ policies: this.source.description }, "no image policy is in force: every pull is allowed");
    return this.inForce;
  }

  /** The set in force; first() must have resolved. */
  current(): NodePolicySet {
    if (!this.inForce) throw new Error("NodePolicies.current() before first()");
    return this.inForce;
  }

  /** Reloads on every change of the source; a set that fails to load leaves the last good one in force. */
  watch(onChange: (policies: NodePolicySet) => void): void {
    this.watcher = this.source.watch(
      () => void this.reload(onChange),
      (err) => this.logger.warn({ err }, "cannot watch the policies; restart the proxy to reload them"),
    );
    // A change between first() and now (the proxy builds its engine in between) came before the watch: read once
    // more. The same documents are the same generation, and change nothing.
    void this.reload(onChange);
  }

  async reload(onChange: (policies: NodePolicySet) => void): Promise<PolicyLoadError | undefined> {
    try {
      const next = this.prepared(await this.load());
      const changed = next.generation !== this.inForce?.generation;
      this.inForce = next;
      if (changed) {
        this.logger.info(
          { generation: next.generation, policies: next.set.ImagePolicy.map((p) => p.name) },
          "policies reloaded: images are verified again before use",
        );
        onChange(next);
      }
      return undefined;
    } catch (e) {
      if (!(e instanceof PolicyLoadError)) throw e;
      this.logger.error({ errors: e.errors }, "policy reload failed; keeping the last good policies");
      return e;
    }
  }

  close(): void {
    this.watcher?.close();
  }

  private prepared(loaded: PolicySet): NodePolicySet {
    const set = nodePolicySet(loaded);
    return { set, generation: this.source.lastGeneration, everyPod: verdictHoldsForEveryPod(set) };
  }
}
