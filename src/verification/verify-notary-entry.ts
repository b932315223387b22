// Whether a `notary` attestor entry is satisfied for one image: each Notary Project signature discovery found is
// verified against the entry (src/notation/notation-verification.ts) and the manifest the registry serves for the
// digest; every distinct signer that passes counts (N of M counts signers), with what the level only logged kept
// in its evidence. Otherwise the most telling reason why none did.
import type { EntryOutcome, NotaryAttestor, SignerEvidence } from "../core/image-policy/attestors.ts";
import { JWS_ENVELOPE_MEDIA_TYPE } from "../notation/notation-envelope.ts";
import type { TargetManifest } from "../notation/notation-payload.ts";
import type { RevocationFetcher } from "../notation/notation-revocation.ts";
import { verifyNotationSignature, type NotationTrust } from "../notation/notation-verification.ts";
import type { Discovery } from "./signature-discovery.ts";

export async function judgeNotaryEntry(
  leaf: NotaryAttestor,
  discovery: Discovery,
  manifest: () => Promise<TargetManifest>,
  stores?: NotaryStores,
  revocation?: RevocationFetcher,
  now = new Date(),
): Promise<EntryOutcome> {
  if (discovery.notation.length === 0) return { ok: false, reason: "no Notary Project signature found" };
  let target: TargetManifest;
  try {
    target = await manifest();
  } catch (e) {
    return { ok: false, reason: `the image's manifest could not be read to compare with the signatures: ${(e as Error).message}` };
  }
  const trust = trustOf(leaf, stores);
  const signers = new Map<string, SignerEvidence>();
  const reasons: string[] = [];
  for (const found of discovery.notation) {
    const outcome = await verifyNotationSignature(found.envelope, found.mediaType, target, trust, now, revocation);
    if (!outcome.ok) {
      reasons.push(`${found.location}: ${outcome.reason}`);
      continue;
    }
    if (signers.has(outcome.signer)) continue;
    signers.set(outcome.signer, {
      entry: leaf.path,
      attestor: leaf.label,
      signer: outcome.signer,
      format: found.mediaType === JWS_ENVELOPE_MEDIA_TYPE ? "notation-jws" : "notation-cose",
      envelope: found.location,
      ...(outcome.identity ? { identity: outcome.identity } : {}),
      ...(outcome.signedAt ? { signedAt: outcome.signedAt.toISOString() } : {}),
      ...(outcome.logged.length > 0 ? { logged: outcome.logged } : {}),
    });
  }
  if (signers.size > 0) return { ok: true, signers: [...signers.values()] };
  const n = discovery.notation.length;
  return { ok: false, reason: n === 1 ? reasons[0]! : `none of ${n} Notary Project signatures: ${reasons.slice(0, 3).join("; ")}${n > 3 ? "; …" : ""}` };
}

/** An entry's certificate stores, each as written in the policy or as read from its Secret. */
export type NotaryStores = Record<"ca" | "signingAuthority" | "tsa", readonly Uint8Array[]>;

/** `stores`: the entry's TrustRoot's, or its own with those in Secrets read (src/verification/image-verifier.ts). */
function trustOf(leaf: NotaryAttestor, stores: NotaryStores | undefined): NotationTrust {
  const der = (name: keyof NotaryStores) => {
    if (stores) return stores[name];
    const store = leaf[name];
    return "der" in store ? store.der : [];
  };
  return {
    ca: der("ca"),
    signingAuthority: der("signingAuthority"),
    tsa: der("tsa"),
    storeName: leaf.trustRoot !== undefined ? `the certificates of trust root ${leaf.trustRoot}` : `the certificates of ${leaf.label}`,
    identities: leaf.identities,
    level: leaf.level,
    verifyTimestamp: leaf.verifyTimestamp,
    revocation: leaf.revocation,
  };
}
