import { test } from "node:test";
import assert from "node:assert/strict";
import { endpointsFor, registrySettingsMap, settingsForHost } from "../../../src/registry/registry-settings.ts";

test("Docker Hub is reached at registry-1.docker.io, with credentials looked up for docker.io", () => {
  assert.deepEqual(endpointsFor(new Map(), "docker.io"), [
    {
      registry: "docker.io",
      host: "registry-1.docker.io",
      credentialHost: "docker.io",
      origin: "https://registry-1.docker.io",
      insecure: false,
      mirror: false,
    },
  ]);
});

test("mirrors come first, in order, each looked up under its own host", () => {
  const settings = registrySettingsMap([
    { host: "index.docker.io", mirrors: ["mirror-a.example.com", "127.0.0.1:5001"] },
    { host: "127.0.0.1:5001", insecure: true },
  ]);
  assert.deepEqual(
    endpointsFor(settings, "docker.io").map((e) => [e.host, e.credentialHost, e.origin, e.mirror]),
    [
      ["mirror-a.example.com", "mirror-a.example.com", "https://mirror-a.example.com", true],
      ["127.0.0.1:5001", "127.0.0.1:5001", "http://127.0.0.1:5001", true],
      ["registry-1.docker.io", "docker.io", "https://registry-1.docker.io", false],
    ],
  );
});

test("plain HTTP only for a host listed insecure; port 443 and case do not matter", () => {
  const settings = registrySettingsMap([{ host: "Registry.Example.com", insecure: true }]);
  assert.equal(endpointsFor(settings, "registry.example.com")[0]?.origin, "http://registry.example.com");
  assert.equal(endpointsFor(settings, "registry.example.com:5000")[0]?.origin, "https://registry.example.com:5000");
  assert.equal(endpointsFor(new Map(), "registry.example.com:443")[0]?.origin, "https://registry.example.com");
});

test("Docker Hub's settings apply to its API host; a host listed twice is an error", () => {
  const settings = registrySettingsMap([{ host: "docker.io", ca: "PEM" }]);
  assert.equal(settingsForHost(settings, "registry-1.docker.io")?.ca, "PEM");
  assert.throws(() => registrySettingsMap([{ host: "docker.io" }, { host: "index.docker.io" }]), {
    name: "RegistrySettingsError",
    code: "duplicate-host",
    message: "registry docker.io is listed twice",
  });
});
