// Policies from custom resources (ImagePolicy, PodRestriction, TrustRoot in imprimatur.dev/v1alpha1), and
// optionally a policy folder beside them, as one PolicySource: one set, so a name defined in both is an error.
//
// One invalid object must not hold every other policy hostage, so each object is judged alone:
//   - an object that does not compile is left out; the last version of it that was in force (in this
//     process) stays in force instead, if there is one, and its status says so (Ready=False, InvalidPolicy);
//   - an object that compiles alone but not with the rest (a name the folder or another object already
//     defines, a trust root no TrustRoot answers to) is treated the same (PolicyConflict);
//   - everything else loads. Errors of the folder itself are not the objects' doing: they fail the load
//     as they do without custom resources, and the server keeps its last good set.
// Statuses are written once the app reports the load's outcome (`loaded`), so Ready=True is never written
// for a set that did not come into force.
import { loadPolicies, parsePolicyText, type ParsedPolicies } from "./load-policies.ts";
import { PolicyLoadError, type PolicyError } from "./policy-error.ts";
import { contentKey, policyDocumentOf, resourceOrigin, type PolicyResourceObject } from "./policy-resource-documents.ts";
import type { ResourceOutcome } from "./policy-resource-status.ts";
import type { PolicySource, PolicyText } from "./policy-source.ts";
import { profileSources, shippedProfiles } from "./profiles.ts";

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

interface Judged {
  resource: PolicyResourceObject;
  origin: string;
  text: string;
  parsed: ParsedPolicies;
  /** Which version takes part in the set: the current one, the last good one, or none. */
  use: "current" | "previous" | "none";
  rejection?: { reason: "InvalidPolicy" | "PolicyConflict"; errors: PolicyError[] };
}

interface LastGood {
  uid: string;
  generation: number;
  text: string;
  parsed: ParsedPolicies;
}

/** An object's text and its compiled form, kept while its content stays the same. */
interface Compiled {
  key: string;
  text: string;
  parsed: ParsedPolicies;
}

const DEBOUNCE_MS = 200;

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

  constructor(opts: { store: PolicyResourceStore; folder?: PolicySource; status?: PolicyStatusSink; now?: () => Date }) {
    this.store = opts.store;
    this.folder = opts.folder;
    this.status = opts.status;
    this.now = opts.now ?? (() => new Date());
    this.description = opts.folder ? `${opts.folder.description} and policy custom resources` : "policy custom resources";
  }

  async read(): Promise<{ texts: PolicyText[]; errors: PolicyError[] }> {
    await this.store.synced();
    const fromFolder = this.folder ? await this.folder.read() : { texts: [], errors: [] };
    const profiles = profileSources(await shippedProfiles());
    const snapshot = this.store.snapshot().sort((a, b) => a.kind.localeCompare(b.kind) || a.name.localeCompare(b.name));
    const present = new Set(snapshot.map((r) => resourceOrigin(r.kind, r.name)));
    for (const origin of this.compiled.keys()) if (!present.has(origin)) this.compiled.delete(origin);
    const judged: Judged[] = snapshot.map((resource) => {
      const origin = resourceOrigin(resource.kind, resource.name);
      const key = contentKey(resource);
      let c = this.compiled.get(origin);
      if (c?.key !== key) {
        const text = JSON.stringify(policyDocumentOf(resource.object));
        c = { key, text, parsed: parsePolicyText(text, origin, { profiles }) };
        this.compiled.set(origin, c);
      }
      const own = c.parsed.errors.map(withoutLocation);
      if (own.length === 0) return { resource, origin, text: c.text, parsed: c.parsed, use: "current" };
      return {
        resource,
        origin,
        text: c.text,
        parsed: c.parsed,
        use: this.previous(resource) ? "previous" : "none",
        rejection: { reason: "InvalidPolicy", errors: own },
      };
    });

    // Conflicts with the rest of the set: leave out the objects named, until the set loads (at most once each).
    if (fromFolder.errors.length === 0) {
      for (let round = 0; round <= judged.length; round++) {
        const errors = await setErrors([...fromFolder.texts, ...this.textsInUse(judged)]);
        const named = judged.filter((j) => j.use !== "none" && errors.some((e) => e.origin === j.origin));
        if (named.length === 0) break;
        for (const j of named) {
          const mine = errors.filter((e) => e.origin === j.origin).map(withoutLocation);
          if (j.use === "current") {
            j.rejection = { reason: "PolicyConflict", errors: mine };
            j.use = this.previous(j.resource) ? "previous" : "none";
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
        if (j.use === "current") this.lastGood.set(j.origin, { uid: j.resource.uid, generation: j.resource.generation, text: j.text, parsed: j.parsed });
        else if (j.use === "none") this.lastGood.delete(j.origin);
      }
    }
    if (!this.status) return;
    for (const j of judged) {
      const generation = j.resource.generation;
      if (j.rejection) {
        // What the server holds now: this load's choice if it succeeded, else the last good set's.
        const inForce = this.previous(j.resource)?.generation;
        this.status.report(j.resource, {
          state: "rejected",
          reason: j.rejection.reason,
          generation,
          errors: j.rejection.errors,
          ...(inForce !== undefined ? { inForceGeneration: inForce } : {}),
        });
      } else if (succeeded) {
        this.status.report(j.resource, { state: "in-force", generation });
      }
      // A valid object in a set that failed for other reasons: its status stays as it was.
    }
  }

  watch(changed: () => void, failed: (err: unknown) => void): { close(): void } {
    let timer: NodeJS.Timeout | undefined;
    const debounced = () => {
      clearTimeout(timer);
      timer = setTimeout(changed, DEBOUNCE_MS);
    };
    const resources = this.store.subscribe(debounced, failed);
    const folder = this.folder?.watch?.(changed, failed);
    return {
      close: () => {
        clearTimeout(timer);
        resources.close();
        folder?.close();
      },
    };
  }

  /** The version of this object last in force, if it is the same object (a recreated one starts afresh). */
  private previous(resource: PolicyResourceObject): LastGood | undefined {
    const last = this.lastGood.get(resourceOrigin(resource.kind, resource.name));
    return last && last.uid === resource.uid ? last : undefined;
  }

  private textsInUse(judged: readonly Judged[]): PolicyText[] {
    const texts: PolicyText[] = [];
    for (const j of judged) {
      const version = j.use === "current" ? j : j.use === "previous" ? this.previous(j.resource)! : undefined;
      if (version) texts.push({ origin: j.origin, text: version.text, parsed: version.parsed, locations: false });
    }
    return texts;
  }
}

/** The errors loading these texts as one set gives (duplicate names, unresolved trust roots, …). */
async function setErrors(texts: PolicyText[]): Promise<PolicyError[]> {
  try {
    await loadPolicies({ description: "policy set", read: async () => ({ texts, errors: [] }) });
    return [];
  } catch (e) {
    if (e instanceof PolicyLoadError) return e.errors;
    throw e;
  }
}

/** A custom resource has no file lines or documents: its errors name the field alone. */
function withoutLocation(e: PolicyError): PolicyError {
  const { line: _line, document: _document, ...rest } = e;
  return rest;
}
