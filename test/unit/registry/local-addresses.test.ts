// Which addresses count as local (refused unless a registry is listed with allowLocalAddresses), in every form
// an address can take: IPv4, IPv6, IPv4-mapped IPv6 and NAT64.
import { test } from "node:test";
import assert from "node:assert/strict";
import { localAddressKind } from "../../../src/registry/local-addresses.ts";

const cases: Array<[string, ReturnType<typeof localAddressKind>]> = [
  ["127.0.0.1", "loopback"],
  ["127.255.255.254", "loopback"],
  ["::1", "loopback"],
  ["::ffff:127.0.0.1", "loopback"],
  ["::ffff:7f00:1", "loopback"],
  ["64:ff9b::7f00:1", "loopback"],
  ["169.254.169.254", "cloud metadata"],
  ["::ffff:169.254.169.254", "cloud metadata"],
  ["64:ff9b::a9fe:a9fe", "cloud metadata"],
  ["fd00:ec2::254", "cloud metadata"],
  ["fd20:ce::254", "cloud metadata"],
  ["100.100.100.200", "cloud metadata"],
  ["168.63.129.16", "cloud metadata"],
  ["169.254.0.1", "link-local"],
  ["169.254.255.255", "link-local"],
  ["fe80::1", "link-local"],
  ["febf:ffff::1", "link-local"],
  ["0.0.0.0", "unspecified"],
  ["0.255.255.255", "unspecified"],
  ["::", "unspecified"],
  // Everything else is reachable, in-cluster private ranges included.
  ["10.0.0.1", undefined],
  ["172.16.0.1", undefined],
  ["192.168.1.1", undefined],
  ["100.100.100.201", undefined],
  ["169.253.255.255", undefined],
  ["169.255.0.0", undefined],
  ["126.255.255.255", undefined],
  ["128.0.0.0", undefined],
  ["1.0.0.0", undefined],
  ["8.8.8.8", undefined],
  ["fec0::1", undefined],
  ["fd00:ec2::253", undefined],
  ["fc00::1", undefined],
  ["::2", undefined],
  ["2001:db8::1", undefined],
  ["64:ff9b::808:808", undefined],
  ["registry.example.com", undefined],
  ["", undefined],
];

for (const [address, kind] of cases) {
  test(`${address || "(empty)"}: ${kind ?? "not local"}`, () => {
    assert.equal(localAddressKind(address), kind);
  });
}
