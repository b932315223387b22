// Trusted identities of a `notary` attestor entry, as Notation's trust policy writes them:
// "x509.subject: C=US, ST=WA, O=Example, CN=Builder" (an RFC 4514 distinguished name), or "*". Parsed when the
// policy loads, so that a mistyped identity is a load error with its field path and not a denial of every pod.
// The distinguished name is read by @peculiar/x509 (RFC 4514 escapes and quoting); the rules on top are Notation's:
// C, ST and O required, each attribute once, one value per RDN, no identity a subset of another.
// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata polyfill loaded first.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

/** An identity: attribute type (Notation's name) → value, every one of which the leaf's subject must have. */
export type TrustedIdentity = ReadonlyMap<string, string>;

export const X509_SUBJECT_PREFIX = "x509.subject:";

/** The attribute types Notation names, by its names and their OIDs. */
const NAME_OIDS: Readonly<Record<string, string>> = {
  C: "2.5.4.6",
  ST: "2.5.4.8",
  L: "2.5.4.7",
  O: "2.5.4.10",
  OU: "2.5.4.11",
  CN: "2.5.4.3",
  SERIALNUMBER: "2.5.4.5",
  STREET: "2.5.4.9",
  POSTALCODE: "2.5.4.17",
};
const OID_NAMES: Readonly<Record<string, string>> = Object.fromEntries(Object.entries(NAME_OIDS).map(([name, oid]) => [oid, name]));

/** Notation's name of an attribute type given by @peculiar/x509's name or an OID; undefined for others. */
export function attributeName(type: string): string | undefined {
  if (NAME_OIDS[type]) return type;
  return OID_NAMES[type];
}

/** An identity as a policy writes it (RFC 4514 escapes where a value needs them): "x509.subject: C=US, ST=WA, O=Acme". */
export function formatTrustedIdentity(identity: TrustedIdentity): string {
  const escape = (value: string) =>
    value
      .replace(/[\\,+"<>;=]/g, (c) => `\\${c}`)
      .replace(/^[ #]/, (c) => `\\${c}`)
      .replace(/ $/, "\\ ");
  return `${X509_SUBJECT_PREFIX} ${[...identity].map(([type, value]) => `${type}=${escape(value)}`).join(", ")}`;
}

/** Parses one "x509.subject: …" entry; the reason when it is not one. */
export function parseTrustedIdentity(text: string): { identity: TrustedIdentity } | { error: string } {
  if (!text.startsWith(X509_SUBJECT_PREFIX)) return { error: `a trusted identity is "*" or starts with "${X509_SUBJECT_PREFIX}", got ${JSON.stringify(text)}` };
  const dn = text.slice(X509_SUBJECT_PREFIX.length).trim();
  let name: x509.Name;
  try {
    name = new x509.Name(dn, { SERIALNUMBER: NAME_OIDS.SERIALNUMBER!, STREET: NAME_OIDS.STREET!, POSTALCODE: NAME_OIDS.POSTALCODE! });
  } catch (e) {
    return { error: `${JSON.stringify(dn)} is not a distinguished name: ${(e as Error).message}` };
  }
  const identity = new Map<string, string>();
  for (const rdn of name.toJSON()) {
    const entries = Object.entries(rdn);
    if (entries.length !== 1 || entries[0]![1].length !== 1) return { error: `${JSON.stringify(dn)}: multi-valued RDNs are not allowed` };
    const [type, values] = entries[0]!;
    const attribute = attributeName(type);
    if (!attribute) return { error: `${JSON.stringify(dn)}: unsupported attribute ${type} (use ${Object.keys(NAME_OIDS).join(", ")})` };
    if (identity.has(attribute)) return { error: `${JSON.stringify(dn)}: ${attribute} appears twice` };
    identity.set(attribute, values[0]!);
  }
  for (const required of ["C", "ST", "O"]) if (!identity.has(required)) return { error: `${JSON.stringify(dn)}: ${required} is required` };
  return { identity };
}

/**
 * Notation refuses a list in which one identity's attributes are a subset of another's: the narrower one would
 * never decide anything. The indexes of the first such pair, or undefined.
 */
export function overlappingIdentities(identities: readonly TrustedIdentity[]): [broader: number, narrower: number] | undefined {
  for (let i = 0; i < identities.length; i++)
    for (let j = 0; j < identities.length; j++) {
      if (i === j) continue;
      const a = identities[i]!;
      const b = identities[j]!;
      if (a.size <= b.size && [...a].every(([k, v]) => b.get(k) === v)) return [i, j];
    }
  return undefined;
}
