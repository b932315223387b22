// Policies from custom resources (ImagePolicy, PodRestriction, TrustRoot in imprimatur.dev/v1alpha1), and
// optionally a policy folder beside them, as one PolicySource: one set, so a name defined in both is an error.
//
// One invalid object must not hold every other policy hostage, so each object is judged alone:
//   - an object that does not compile is left out; the last version of it that was in force stays in force
//     instead, if there is one, and its status says so (Ready=False, InvalidPolicy). That version is the one
//     this process last loaded, or, in a process that never saw it (a replica started while the object is
//     broken), the one its status records (status.inForce, written with Ready=True), compiled as any other;
//   - an object that compiles alone but not with the rest (a name the folder or another object already
//     defines) is treated the same (PolicyConflict);
//   - an ImagePolicy whose attestors name a trust root no TrustRoot in force answers to (never applied, deleted,
//     or broken without a good generation) stays in force: the rules that need that root deny every image they
//     match, and its status says so (Ready=False, TrustRootNotFound). Leaving it out instead would drop its deny
//     rules and `default: deny` with it: deleting a TrustRoot must not switch a policy off;
//   - an object whose policy document is larger than status.inForce holds is treated the same (TooLarge), so
//     that every generation in force is one every replica can read back whole: otherwise a large policy that
//     breaks would stay in force on the replicas that loaded it and vanish on those started afterwards;
//   - everything else loads. Errors of the folder itself are not the objects' doing: they fail the load
//     as they do without custom resources, and the server keeps its last good set.
// Statuses are written once the app reports the load's outcome (`loaded`), so Ready=True (and the record of
// what is in force) is never written for a set that did not come into force.
import { coalesceChanges } from "../async/change-coalescer.ts";
import { loadPolicies, parsePolicyText } from "../policy/load-policies.ts";
import type { ParsedPolicies } from "../policy/parsed-policies.ts";
import { PolicyLoadError, type PolicyError, type PolicyWarning } from "../policy/policy-error.ts";
import { isObject } from "../core/primitives/json-shapes.ts";
import { contentKey, policyDocumentOf, resourceKey, resourceOrigin, type PolicyResourceObject } from "./resource-documents.ts";
import { documentTooLarge, inForceRecord, readInForceRecord, type InForceRecord, type ResourceOutcome } from "./status-conditions.ts";
import { emptyPolicySet } from "../core/policy-set/policy-kinds.ts";
import type { PolicySource, PolicyText } from "../policy/policy-source.ts";
import { profileSources, shippedProfiles } from "../policy/profiles.ts";

/** The custom resources as last listed and watched. */
export interface PolicyResourceStore {
  /** Resolves once every kind has been listed; rejects, saying why, when that does not happen. */
  synced(): Promise<void>;
  snapshot(): PolicyResourceObject[];
  /** `changed` is called when an object appears, goes, or changes content; returns a way to stop. */
  subscribe(changed: () => void, failed: (err: unknown) => void): { close(): void };
}

/** Where outcomes go: the objects' status and Events. */
export interface PolicyStatusSink {
  report(resource: PolicyResourceObject, outcome: ResourceOutcome): void;
}

/** One version of an object: its generation, its policy document as compiled, and the result. */
interface Version {
  generation: number;
  text: string;
  parsed: ParsedPolicies;
}

interface Judged {
  resource: PolicyResourceObject;
  origin: string;
  current: Version;
  /** The last good version, when the current one does not compile or conflicts. */
  previous?: Version;
  /** Which version takes part in the set: the current one, the last good one, or none. */
  use: "current" | "previous" | "none";
  rejection?: { reason: "InvalidPolicy" | "PolicyConflict" | "TooLarge" | "NotHonoured"; errors: PolicyError[] };
  /** The version status.inForce records, when it was the candidate and does not compile. */
  recordRejected?: { generation: number; errors: PolicyError[] };
  /** Rules of the version in use that deny for want of a trust root. */
  warnings?: PolicyWarning[];
}

interface LastGood extends Version {
  uid: string;
}

/** An object's text and its compiled form, kept while its content stays the same. */
interface Compiled {
  key: string;
  text: string;
  parsed: ParsedPolicies;
  /** Not compiled: the text is larger than its record could hold. */
  tooLarge?: boolean;
}

/** A record compiled, or the errors that kept it from being compiled or came of it. */
interface CompiledRecord {
  key: string;
  compiled: { text: string; parsed: ParsedPolicies } | { errors: PolicyError[] };
}

/** A reload follows a change after a quiet spell by this much: the objects of one small `kubectl apply` come within it. */
const SETTLE_MS = 20;
/** While changes keep coming (thousands of objects applied), the reload waits until none came for this long. */
const QUIET_MS = 200;

export class ResourcePolicySource implements PolicySource {
  readonly description: string;
  private readonly store: PolicyResourceStore;
  private readonly folder: PolicySource | undefined;
  private readonly status: PolicyStatusSink | undefined;
  private readonly now: () => Date;
  /** By origin: the version of each object last in force. */
  private readonly lastGood = new Map<string, LastGood>();
  /** The judgement of the last read, waiting for the load's outcome. */
  private pending: Judged[] = [];
  /** By origin: each object compiled once per content (a thousand policies take seconds to compile). */
  private readonly compiled = new Map<string, Compiled>();
  /** By origin: the version each object's status records, compiled once per record. */
  private readonly recordsCompiled = new Map<string, CompiledRecord>();
  /** Where PolicyExceptions are honoured (serve --exceptions-namespace); one elsewhere is never in force. */
  private readonly exceptionNamespaces: ReadonlySet<string>;

  constructor(opts: {
    store: PolicyResourceStore;
    folder?: PolicySource;
    status?: PolicyStatusSink;
    now?: () => Date;
    exceptionNamespaces?: readonly string[];
  }) {
    this.store = opts.store;
    this.exceptionNamespaces = new Set(opts.exceptionNamespaces ?? []);
    this.folder = opts.folder;
    this.status = opts.status;
    this.now = opts.now ?? (() => new Date());
    this.description = opts.folder ? `${opts.folder.description} and policy custom resources` : "policy custom resources";
  }

  async read(): Promise<{ texts: PolicyText[]; errors: PolicyError[] }> {
    await this.store.synced();
    const fromFolder = this.folder ? await this.folder.read() : { texts: [], errors: [] };
    const profiles = profileSources(await shippedProfiles());
    const snapshot = this.store.snapshot().sort((a, b) => a.kind.localeCompare(b.kind) || resourceKey(a).localeCompare(resourceKey(b)));
    const present = new Set(snapshot.map(resourceOrigin));
    for (const cache of [this.compiled, this.recordsCompiled]) for (const origin of cache.keys()) if (!present.has(origin)) cache.delete(origin);
    const judged: Judged[] = snapshot.map((resource) => {
      const origin = resourceOrigin(resource);
      if (resource.kind === "PolicyException" && !this.exceptionNamespaces.has(resource.namespace ?? "")) {
        // Not compiled at all: what it would set aside must not depend on whether it compiles.
        const current = { generation: resource.generation, text: "", parsed: { policies: emptyPolicySet(), errors: [] } };
        return {
          resource,
          origin,
          current,
          use: "none",
          rejection: { reason: "NotHonoured", errors: [{ origin, message: notHonoured(resource.namespace ?? "") }] },
        };
      }
      const key = contentKey(resource);
      let c = this.compiled.get(origin);
      if (c?.key !== key) {
        const text = JSON.stringify(policyDocumentOf(resource.object));
        const tooLarge = documentTooLarge(text, origin);
        c = tooLarge
          ? { key, text, parsed: { policies: emptyPolicySet(), errors: [tooLarge] }, tooLarge: true }
          : { key, text, parsed: parsePolicyText(text, origin, { profiles }) };
        this.compiled.set(origin, c);
      }
      const current = { generation: resource.generation, text: c.text, parsed: c.parsed };
      const own = c.parsed.errors.map(withoutLocation);
      if (own.length === 0) return { resource, origin, current, use: "current" };
      const fallback = this.lastGoodOf(resource, origin, profiles);
      return {
        resource,
        origin,
        current,
        ...fallback,
        use: fallback.previous ? "previous" : "none",
        rejection: { reason: c.tooLarge ? "TooLarge" : "InvalidPolicy", errors: own },
      };
    });

    // Conflicts with the rest of the set: leave out the objects named, until the set loads (at most once each).
    if (fromFolder.errors.length === 0) {
      for (let round = 0; round <= judged.length; round++) {
        const { errors, warnings } = await setOutcome([...fromFolder.texts, ...this.textsInUse(judged)]);
        const named = judged.filter((j) => j.use !== "none" && errors.some((e) => e.origin === j.origin));
        if (named.length === 0) {
          for (const j of judged) {
            const mine = warnings.filter((w) => w.origin === j.origin).map(withoutLocation);
            if (j.use !== "none" && mine.length > 0) j.warnings = mine;
          }
          break;
        }
        for (const j of named) {
          const mine = errors.filter((e) => e.origin === j.origin).map(withoutLocation);
          if (j.use === "current") {
            j.rejection = { reason: "PolicyConflict", errors: mine };
            Object.assign(j, this.lastGoodOf(j.resource, j.origin, profiles));
            j.use = j.previous ? "previous" : "none";
          } else {
            // The last good version conflicts now too: nothing of this object stays in force.
            j.use = "none";
            j.rejection ??= { reason: "PolicyConflict", errors: mine };
          }
        }
      }
    }
    this.pending = judged;
    return { texts: [...fromFolder.texts, ...this.textsInUse(judged)], errors: fromFolder.errors };
  }

  /** Called by the app with the outcome of the load that followed the last read. */
  loaded(outcome: { errors: readonly PolicyError[] }): void {
    const judged = this.pending;
    this.pending = [];
    const succeeded = outcome.errors.length === 0;
    if (succeeded) {
      const present = new Set(judged.map((j) => j.origin));
      for (const origin of this.lastGood.keys()) if (!present.has(origin)) this.lastGood.delete(origin);
      for (const j of judged) {
        const version = inUse(j);
        if (version) this.lastGood.set(j.origin, { uid: j.resource.uid, ...version });
        else this.lastGood.delete(j.origin);
      }
    }
    if (!this.status) return;
    for (const j of judged) {
      const generation = j.resource.generation;
      if (j.rejection) {
        // What the server holds now: this load's choice if it succeeded, else the last good set's. The record
        // follows this load's choice; a failed load changes nothing in force, so it leaves the record alone.
        const inForce = succeeded ? inUse(j) : this.inMemory(j.resource);
        const record: InForceRecord | null | undefined = succeeded ? (inForce ? inForceRecord(inForce.generation, inForce.text) : null) : undefined;
        this.status.report(j.resource, {
          state: "rejected",
          reason: j.rejection.reason,
          generation,
          errors: j.rejection.errors,
          ...(inForce !== undefined ? { inForceGeneration: inForce.generation } : {}),
          ...(inForce === undefined && j.recordRejected ? { recordRejected: j.recordRejected } : {}),
          ...(record !== undefined ? { record } : {}),
        });
      } else if (succeeded) {
        this.status.report(j.resource, {
          state: "in-force",
          generation,
          record: inForceRecord(generation, j.current.text),
          ...(j.warnings ? { unresolved: { reason: "TrustRootNotFound", errors: j.warnings } } : {}),
        });
      }
      // A valid object in a set that failed for other reasons: its status stays as it was.
    }
  }

  watch(changed: () => void, failed: (err: unknown) => void): { close(): void } {
    const reloads = coalesceChanges(changed, SETTLE_MS, QUIET_MS);
    const resources = this.store.subscribe(() => reloads.changed(), failed);
    const folder = this.folder?.watch?.(changed, failed);
    return {
      close: () => {
        reloads.close();
        resources.close();
        folder?.close();
      },
    };
  }

  /** The version of this object this process last loaded, if it is the same object (a recreated one starts afresh). */
  private inMemory(resource: PolicyResourceObject): LastGood | undefined {
    const last = this.lastGood.get(resourceOrigin(resource));
    return last && last.uid === resource.uid ? last : undefined;
  }

  /**
   * The last good version of an object whose current one cannot be used: the one in memory, or the one its
   * status records when that is later (a process started while the object is broken has none in memory). The
   * record is compiled like the object itself; when it does not compile, the memory's version, if any, is used.
   */
  private lastGoodOf(resource: PolicyResourceObject, origin: string, profiles: ReadonlyMap<string, unknown>): Pick<Judged, "previous" | "recordRejected"> {
    const memory = this.inMemory(resource);
    const recorded = readInForceRecord(resource.object);
    if (recorded === undefined || ("generation" in recorded && memory && memory.generation >= recorded.generation)) return memory ? { previous: memory } : {};
    const key = JSON.stringify([resource.uid, resource.generation, resource.kind, resource.name, recorded]);
    let c = this.recordsCompiled.get(origin);
    if (c?.key !== key) {
      c = { key, compiled: compileRecord(resource, origin, recorded, profiles) };
      this.recordsCompiled.set(origin, c);
    }
    const generation = "generation" in recorded ? recorded.generation : 0;
    const errors = "errors" in c.compiled ? c.compiled.errors : c.compiled.parsed.errors;
    if (errors.length === 0 && "parsed" in c.compiled) return { previous: { generation, text: c.compiled.text, parsed: c.compiled.parsed } };
    if (memory) return { previous: memory };
    return { recordRejected: { generation, errors: errors.map(withoutLocation) } };
  }

  private textsInUse(judged: readonly Judged[]): PolicyText[] {
    const texts: PolicyText[] = [];
    for (const j of judged) {
      const version = inUse(j);
      if (version) texts.push({ origin: j.origin, text: version.text, parsed: version.parsed, locations: false });
    }
    return texts;
  }
}

/** The version of a judged object that takes part in the set, if one does. */
function inUse(j: Judged): Version | undefined {
  return j.use === "current" ? j.current : j.use === "previous" ? j.previous : undefined;
}

/**
 * A version recorded in status.inForce, compiled as the object's own would be. The record is only trusted as
 * far as it goes: it must be an earlier generation of this object, and its document this object's kind and
 * name; anything else is an error on status.inForce, and the record is not used.
 */
function compileRecord(
  resource: PolicyResourceObject,
  origin: string,
  recorded: InForceRecord | { error: PolicyError },
  profiles: ReadonlyMap<string, unknown>,
): CompiledRecord["compiled"] {
  const refused = (path: string, message: string) => ({ errors: [{ origin, path, message }] });
  if ("error" in recorded) return refused(recorded.error.path ?? "status.inForce", recorded.error.message);
  if (recorded.generation < 1 || recorded.generation > resource.generation)
    return refused("status.inForce.generation", `${recorded.generation} is not a generation of this object (now ${resource.generation})`);
  if (recorded.document === undefined)
    return refused("status.inForce.document", `generation ${recorded.generation} was not recorded (its policy is larger than the record allows)`);
  let document: unknown;
  try {
    document = JSON.parse(recorded.document);
  } catch {
    return refused("status.inForce.document", "is not JSON");
  }
  const meta = isObject(document) && isObject(document.metadata) ? document.metadata : {};
  if (!isObject(document) || document.kind !== resource.kind || meta.name !== resource.name || meta.namespace !== resource.namespace)
    return refused("status.inForce.document", `is not a policy document of ${origin}`);
  return { text: recorded.document, parsed: parsePolicyText(recorded.document, origin, { profiles }) };
}

function notHonoured(namespace: string): string {
  return `not honoured: PolicyExceptions count only in the namespaces serve --exceptions-namespace names, and ${namespace} is not one`;
}

/** The errors loading these texts as one set gives (duplicate names, …), or what it warns of (unresolved trust roots). */
async function setOutcome(texts: PolicyText[]): Promise<{ errors: PolicyError[]; warnings: PolicyWarning[] }> {
  try {
    const { warnings } = await loadPolicies({ description: "policy set", read: async () => ({ texts, errors: [] }) });
    return { errors: [], warnings };
  } catch (e) {
    if (e instanceof PolicyLoadError) return { errors: e.errors, warnings: [] };
    throw e;
  }
}

/** A custom resource has no file lines or documents: its errors name the field alone. */
function withoutLocation<E extends PolicyError>(e: E): E {
  const { line: _line, document: _document, ...rest } = e;
  return rest as E; // both are optional in every PolicyError
}
