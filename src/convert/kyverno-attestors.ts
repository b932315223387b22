// Kyverno's attestor sets (verifyImages[].attestors, and attestations[].attestors) as Imprimatur's. The shapes
// are the same design's: sets of entries with a `count` (absent: all), entries that are keys, keyless identities,
// certificates or a nested set. What differs is what Imprimatur keeps in a TrustRoot (a custom Rekor, CT log or
// Fulcio root) and what it does not verify (certificates, KMS keys).
import { identityFields, isJson, listOf, pemBlocks, type FindingLog, type Json } from "./conversion.ts";

const PUBLIC_REKOR = "https://rekor.sigstore.dev";

/** The sets converted; entries that cannot be carried over are left out with a finding (weaker: fewer to satisfy). */
/** `notary`: the verifyImages entry is of type Notary, whose attestors are certificates (Notation's trust store). */
export function convertKyvernoAttestorSets(raw: unknown, path: string, log: FindingLog, kind: { notary?: boolean } = {}): Json[] {
  const sets: Json[] = [];
  listOf(raw).forEach((set, i) => {
    const at = `${path}[${i}]`;
    if (!isJson(set)) return log.weaker(at, "not an attestor set: left out");
    const entries: Json[] = [];
    // An entry left out is one way fewer to satisfy a set that counts some of its entries (stricter), but one
    // requirement fewer of a set that needs them all (weaker): the set decides which, once all are read.
    const dropped: Array<[string, string]> = [];
    const drop = (path: string, message: string) => void dropped.push([path, message]);
    listOf(set.entries).forEach((entry, j) => {
      const converted = convertEntry(entry, `${at}.entries[${j}]`, log, drop, kind);
      if (converted) entries.push(converted);
    });
    const counted = typeof set.count === "number" && set.count > 0 ? set.count : undefined;
    const weaker = counted === undefined || counted > entries.length;
    for (const [path, message] of dropped) {
      if (weaker)
        log.weaker(path, `${message}, and this set ${counted === undefined ? "needs all of its entries" : `needs ${counted}`}: one requirement fewer`);
      else log.note(path, `${message}; the set still needs ${counted} of the entries left (stricter)`);
    }
    if (entries.length === 0) return log.weaker(at, "no entry of this set could be carried over: the set is left out, and with it what it required");
    const count = counted !== undefined ? Math.min(counted, entries.length) : undefined;
    sets.push({ ...(count !== undefined ? { count } : {}), entries });
  });
  return sets;
}

type Drop = (path: string, message: string) => void;

function convertEntry(entry: unknown, at: string, log: FindingLog, drop: Drop, kind: { notary?: boolean }): Json | undefined {
  if (!isJson(entry)) {
    drop(at, "not an attestor entry: left out");
    return undefined;
  }
  if (kind.notary) return notaryEntry(entry, at, log, drop);
  if (entry.repository !== undefined) log.note(`${at}.repository`, "a signature repository per entry is not carried over: give it on the rule (repository)");
  if (isJson(entry.keys)) return keysEntry(entry.keys, `${at}.keys`, log, drop);
  if (isJson(entry.keyless)) return keylessEntry(entry.keyless, `${at}.keyless`, log);
  if (entry.certificates !== undefined) {
    drop(`${at}.certificates`, "certificate attestors are not verified by Imprimatur: the entry is left out");
    return undefined;
  }
  if (entry.attestor !== undefined) {
    // A nested attestor: one set, or a list of them.
    const nested = convertKyvernoAttestorSets(Array.isArray(entry.attestor) ? entry.attestor : [entry.attestor], `${at}.attestor`, log, kind);
    if (nested.length > 0) return { attestors: nested };
    drop(`${at}.attestor`, "the nested attestor could not be carried over: the entry is left out");
    return undefined;
  }
  drop(at, "an attestor entry of an unknown kind: left out");
  return undefined;
}

/**
 * A Notary verifyImages entry's attestor: `certificates.cert` (and `certChain`) are the certificates Kyverno's
 * Notation verifier trusts, any signing identity under them: a notary entry with them as its `ca` store.
 */
function notaryEntry(entry: Json, at: string, log: FindingLog, drop: Drop): Json | undefined {
  if (entry.attestor !== undefined) {
    drop(`${at}.attestor`, "a nested attestor under a Notary entry is not carried over: the entry is left out");
    return undefined;
  }
  const certificates = isJson(entry.certificates) ? entry.certificates : undefined;
  const pem = [certificates?.cert, certificates?.certChain].filter((c): c is string => typeof c === "string" && c.trim() !== "").join("\n");
  if (pem === "") {
    drop(at, "a Notary attestor without certificates.cert: left out");
    return undefined;
  }
  if (certificates?.rekor !== undefined || certificates?.ctlog !== undefined)
    log.note(`${at}.certificates`, "rekor and ctlog do not apply to Notary Project signatures: not carried over");
  log.note(`${at}.certificates`, "a notary entry trusting these certificates, any signing identity under them, at Notation's strict level");
  return { notary: { certs: pem } };
}

function keysEntry(keys: Json, at: string, log: FindingLog, drop: Drop): Json | undefined {
  const tlog = tlogOptions(keys, at, log);
  if (keys.kms !== undefined) {
    drop(`${at}.kms`, "KMS keys are not read by Imprimatur: the entry is left out (export the public key, and give it as publicKeys)");
    return undefined;
  }
  if (typeof keys.signatureAlgorithm === "string" && keys.signatureAlgorithm !== "sha256")
    log.note(`${at}.signatureAlgorithm`, `${keys.signatureAlgorithm}: Imprimatur verifies with the digest the key's type uses`);
  if (isJson(keys.secret) && typeof keys.secret.name === "string") {
    const namespace = typeof keys.secret.namespace === "string" ? keys.secret.namespace : "kyverno";
    return { staticKey: { keyRef: `k8s://${namespace}/${keys.secret.name}`, ...tlog } };
  }
  const text = typeof keys.publicKeys === "string" ? keys.publicKeys.trim() : "";
  if (text.startsWith("k8s://")) return { staticKey: { keyRef: text, ...tlog } };
  const pems = pemBlocks(text);
  if (pems.length === 0) {
    drop(`${at}.publicKeys`, "no PEM public key here: the entry is left out");
    return undefined;
  }
  if (pems.length === 1) return { staticKey: { key: pems[0], ...tlog } };
  // Several keys in one entry: each must have signed (a nested set of all of them), never fewer.
  log.note(`${at}.publicKeys`, `${pems.length} keys in one entry: converted to a nested set that requires a signature by each`);
  return { attestors: [{ entries: pems.map((key) => ({ staticKey: { key, ...tlog } })) }] };
}

function keylessEntry(keyless: Json, at: string, log: FindingLog): Json {
  const out: Json = identityFields(keyless);
  if (isJson(keyless.additionalExtensions)) out.additionalExtensions = keyless.additionalExtensions;
  if (keyless.roots !== undefined)
    log.note(
      `${at}.roots`,
      "a custom Fulcio root belongs in a TrustRoot (kind TrustRoot, then trustRoot: NAME here); until then the public-good root is used, which refuses these certificates",
    );
  if (keyless.url !== undefined) log.note(`${at}.url`, "the Fulcio URL is not needed to verify: a TrustRoot holds a private Fulcio's root");
  Object.assign(out, tlogOptions(keyless, at, log));
  return { keyless: out };
}

/** ignoreTlog from rekor.ignoreTlog; a custom Rekor or CT log is a TrustRoot's (noted: stricter until then). */
function tlogOptions(entry: Json, at: string, log: FindingLog): Json {
  const rekor = isJson(entry.rekor) ? entry.rekor : {};
  const ctlog = isJson(entry.ctlog) ? entry.ctlog : {};
  if (typeof rekor.url === "string" && rekor.url.replace(/\/$/, "") !== PUBLIC_REKOR)
    log.note(`${at}.rekor.url`, "a private Rekor belongs in a TrustRoot (trustRoot: NAME); until then the public-good log is asked, which refuses its entries");
  if (rekor.pubkey !== undefined) log.note(`${at}.rekor.pubkey`, "a Rekor key belongs in a TrustRoot (trustRoot: NAME)");
  if (ctlog.pubkey !== undefined) log.note(`${at}.ctlog.pubkey`, "a CT log key belongs in a TrustRoot (trustRoot: NAME)");
  if (ctlog.ignoreSCT === true) log.note(`${at}.ctlog.ignoreSCT`, "Imprimatur always checks a Fulcio certificate's SCT: stricter");
  return rekor.ignoreTlog === true ? { ignoreTlog: true } : {};
}
