// The connector of every registry connection (the registry API, mirrors, token realms, redirect targets): undici's
// own, with the address checked before the socket opens. A name is checked by what it resolves to (the lookup
// the socket then connects with, so a second resolution cannot swap the address in between); an IP literal,
// which skips the lookup, by itself. Any refused address among a name's answers refuses the name: a DNS answer
// that mixes a public address with 127.0.0.1 is an attack, not a fallback.
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOptions } from "node:dns";
import { isIP } from "node:net";
import { buildConnector } from "undici";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { localAddressKind, type LocalAddressKind } from "./local-addresses.ts";

/** A connection refused by the guard; the transport turns it into a RegistryError that names the host. */
export class AddressRefusedError extends ImprimaturError<"address-refused"> {
  /** The address refused: "169.254.169.254". */
  readonly address: string;
  readonly kind: LocalAddressKind;
  /** The name that resolved to it; undefined when the URL named the address itself. */
  readonly resolvedFrom: string | undefined;

  constructor(address: string, kind: LocalAddressKind, resolvedFrom?: string) {
    super("address-refused", `${resolvedFrom === undefined ? `${address} is` : `${resolvedFrom} resolves to ${address},`} ${describeKind(kind)}: refused`);
    this.address = address;
    this.kind = kind;
    this.resolvedFrom = resolvedFrom;
  }
}

/** "a loopback address", "an unspecified address". */
export function describeKind(kind: LocalAddressKind): string {
  return `${/^[aeiou]/.test(kind) ? "an" : "a"} ${kind} address`;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** dns.lookup as net.connect calls it, answering only when no resolved address is a refused one. */
function guardedLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true } as LookupAllOptions, (error, addresses) => {
    if (error) return callback(error, []);
    for (const { address } of addresses) {
      const kind = localAddressKind(address);
      if (kind !== undefined) return callback(new AddressRefusedError(address, kind, hostname) as unknown as NodeJS.ErrnoException, []);
    }
    if (options.all) return callback(null, addresses);
    const first = addresses[0];
    if (!first) return callback(Object.assign(new Error(`${hostname}: no address`), { code: "ENOTFOUND" }), []);
    callback(null, first.address, first.family);
  });
}

/**
 * undici's connector for `options`; with `guard`, connections to local addresses (local-addresses.ts) fail with
 * an AddressRefusedError before any socket opens.
 */
export function registryConnector(options: buildConnector.BuildOptions, guard: boolean): buildConnector.connector {
  if (!guard) return buildConnector(options);
  const connect = buildConnector({ ...options, lookup: guardedLookup } as buildConnector.BuildOptions);
  return (target, callback) => {
    // undici hands IPv6 literals over without brackets.
    const host = target.hostname;
    if (isIP(host) !== 0) {
      const kind = localAddressKind(host);
      if (kind !== undefined) {
        queueMicrotask(() => callback(new AddressRefusedError(host, kind), null));
        return;
      }
    }
    connect(target, callback);
  };
}
