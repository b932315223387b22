// The addresses the registry client does not connect to unless the registries file allows it for the host
// (allowLocalAddresses): the server's own machine (loopback, unspecified), its link (link-local) and the cloud
// providers' metadata services, which hand out the node's credentials to whoever asks from the node. Image
// references, a rule's signature repository, token realms and redirects are written by people and registries
// the server does not trust; without this any of them could make the server ask those services for it.
// Private ranges (10/8, fc00::/7…) stay reachable: in-cluster registries live there. Pure: no I/O.
import { BlockList, isIP } from "node:net";

export type LocalAddressKind = "cloud metadata" | "loopback" | "link-local" | "unspecified";

// Metadata services by provider: 169.254.169.254 (AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean…),
// fd00:ec2::254 (AWS over IPv6), fd20:ce::254 (GCP over IPv6), 100.100.100.200 (Alibaba Cloud) and Azure's
// host endpoint 168.63.129.16. The first is link-local as well; it is named for what it is.
const METADATA_V4 = ["169.254.169.254", "100.100.100.200", "168.63.129.16"];
const METADATA_V6 = ["fd00:ec2::254", "fd20:ce::254"];

/** IPv6 prefix under which NAT64 (RFC 6052) carries an IPv4 address in the last 32 bits. */
const NAT64_PREFIX = "64:ff9b::";

function blockList(v4: Array<[string, number]>, v6: Array<[string, number]>): BlockList {
  const list = new BlockList();
  for (const [address, prefix] of v4) {
    // BlockList matches IPv4-mapped IPv6 (::ffff:a.b.c.d) against IPv4 rules itself; NAT64 needs its own rule.
    list.addSubnet(address, prefix, "ipv4");
    list.addSubnet(`${NAT64_PREFIX}${address}`, 96 + prefix, "ipv6");
  }
  for (const [address, prefix] of v6) list.addSubnet(address, prefix, "ipv6");
  return list;
}

// First match wins: the metadata addresses before the link-local range that holds one of them.
const KINDS: ReadonlyArray<[LocalAddressKind, BlockList]> = [
  [
    "cloud metadata",
    blockList(
      METADATA_V4.map((a) => [a, 32]),
      METADATA_V6.map((a) => [a, 128]),
    ),
  ],
  ["loopback", blockList([["127.0.0.0", 8]], [["::1", 128]])],
  ["link-local", blockList([["169.254.0.0", 16]], [["fe80::", 10]])],
  // 0.0.0.0 and "::" reach the machine itself on Linux; the rest of 0.0.0.0/8 is "this network".
  ["unspecified", blockList([["0.0.0.0", 8]], [["::", 128]])],
];

/** What kind of local address `address` (an IP literal, without brackets) is; undefined for any other address. */
export function localAddressKind(address: string): LocalAddressKind | undefined {
  const family = isIP(address);
  if (family === 0) return undefined;
  const type = family === 4 ? "ipv4" : "ipv6";
  return KINDS.find(([, list]) => list.check(address, type))?.[0];
}
