// serve's flags read into ServeOptions: the defaults, a full set of flags, the first problem of a bad set with
// the same words serve prints, and the flags laid over the server's configuration.
import { availableParallelism } from "node:os";
import { test } from "node:test";
import assert from "node:assert/strict";
import { resolve } from "node:path";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { layConfigFlags, readServeFlags, ServeFlagError, type ConfigFlags, type ServeOptions } from "../../../src/cli/serve-flags.ts";

function options(argv: string[]): ServeOptions {
  const read = readServeFlags(argv);
  if ("problem" in read) assert.fail(`unexpected problem: ${read.problem}`);
  return read.options;
}

function problem(argv: string[]): string {
  const read = readServeFlags(argv);
  if (!("problem" in read)) assert.fail(`no problem with ${argv.join(" ")}`);
  return read.problem;
}

test("no flags: the defaults serve has always had", () => {
  const o = options([]);
  assert.equal(o.host, "0.0.0.0");
  assert.equal(o.port, 8443);
  assert.equal(o.metricsPort, undefined);
  assert.equal(o.workers, 1, "one process, as before --workers");
  assert.equal(o.stateDir, resolve(".state"));
  assert.equal(o.drainMs, 5000);
  assert.equal(o.policies, undefined);
  assert.equal(o.policyCrds, false);
  assert.equal(o.allowEmptyPolicies, false);
  assert.deepEqual(o.exceptionNamespaces, []);
  assert.deepEqual(o.profiles, []);
  assert.deepEqual(o.tlsHosts, []);
  assert.equal(o.certificateFiles, undefined);
  assert.equal(o.selfManagedTls, undefined);
  assert.equal(o.configFile, undefined);
  assert.equal(o.podSecurity, undefined);
  assert.deepEqual(o.callers, { clientCa: undefined, tokens: undefined, allowedNames: undefined, allowUnauthenticated: false });
  assert.deepEqual(o.clusters, { home: undefined, files: new Map() });
  assert.deepEqual(o.configFlags, {
    failOpen: false,
    allowTtl: undefined,
    denyTtl: undefined,
    auditLog: undefined,
    registries: undefined,
    authFile: undefined,
    digestMode: undefined,
  });
});

test("a full set of flags: each where serve's steps read it", () => {
  const o = options([
    ...["--policies", "pol", "--policy-crds", "--require-policies", "--allow-empty-policies"],
    ...["--exceptions-namespace", "ex1", "--exceptions-namespace", "ex2", "--profile", "baseline"],
    ...["--host", "127.0.0.1", "--port", "9443", "--metrics-port", "9090", "--state-dir", "st", "--drain", "0"],
    ...["--url", "https://imprimatur.example:9443", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-san", "a.example"],
    ...["--namespaces", "ns.yaml", "--kubeconfig", "kc.yaml", "--cluster-name", "home", "--cluster-kubeconfig", "east=east.kubeconfig"],
    ...["--client-ca", "ca.pem", "--client-ca-allowed-names", "apiserver,other", "--caller-tokens", "tokens.yaml", "--allow-unauthenticated"],
    ...["--config", "server.yaml", "--fail-open", "--allow-ttl", "2h", "--deny-ttl", "later", "--audit-log", "audit.jsonl"],
    ...["--registries", "reg.yaml", "--authfile", "auth.json", "--digest-mode", "record"],
    ...["--pod-security-config", "psa.yaml", "--background-scan", "--scan-rate", "5"],
  ]);
  assert.equal(o.policies, "pol");
  assert.equal(o.policyCrds, true);
  assert.equal(o.requirePolicies, true);
  assert.equal(o.allowEmptyPolicies, true);
  assert.deepEqual(o.exceptionNamespaces, ["ex1", "ex2"]);
  assert.deepEqual(o.profiles, ["baseline"]);
  assert.equal(o.host, "127.0.0.1");
  assert.equal(o.port, 9443);
  assert.equal(o.metricsPort, 9090);
  assert.equal(options(["--workers", "3"]).workers, 3);
  assert.equal(options(["--workers", "auto"]).workers, Math.min(64, availableParallelism()));
  assert.equal(o.stateDir, resolve("st"));
  assert.equal(o.drainMs, 0);
  assert.equal(o.url, "https://imprimatur.example:9443");
  assert.deepEqual(o.certificateFiles, { cert: "c.pem", key: "k.pem" });
  assert.deepEqual(o.tlsHosts, ["a.example"]);
  assert.equal(o.namespacesFile, "ns.yaml");
  assert.equal(o.kubeconfig, "kc.yaml");
  assert.deepEqual(o.clusters, { home: "home", files: new Map([["east", "east.kubeconfig"]]) });
  assert.deepEqual(o.callers, { clientCa: "ca.pem", tokens: "tokens.yaml", allowedNames: ["apiserver", "other"], allowUnauthenticated: true });
  assert.equal(o.configFile, "server.yaml");
  // The TTLs stay as given: they are checked when laid over the config file.
  assert.deepEqual(o.configFlags, {
    failOpen: true,
    allowTtl: "2h",
    denyTtl: "later",
    auditLog: resolve("audit.jsonl"),
    registries: resolve("reg.yaml"),
    authFile: resolve("auth.json"),
    digestMode: "record",
  });
  // --pod-security-config implies --pod-security.
  assert.deepEqual(o.podSecurity, { configFile: "psa.yaml" });
  assert.equal(o.scan["background-scan"], true);
  assert.equal(o.scan["scan-rate"], "5");
});

test("--tls-secret carries its companions, and only they", () => {
  const o = options(["--tls-secret", "imprimatur/tls", "--leader-election-id", "lease", "--tls-sync-interval", "2s", "--tls-san", "x.example"]);
  assert.deepEqual(o.selfManagedTls, {
    "tls-secret": "imprimatur/tls",
    "webhook-configuration": undefined,
    "leader-election-namespace": undefined,
    "leader-election-id": "lease",
    "tls-timeline": undefined,
    "tls-sync-interval": "2s",
  });
  assert.equal(o.certificateFiles, undefined);
  assert.deepEqual(o.tlsHosts, ["x.example"]);
});

test("a bad set of flags: the first problem, in the words serve has always used", () => {
  assert.match(problem(["--no-such-flag"]), /Unknown option '--no-such-flag'/);
  assert.equal(problem(["--drain", "soon"]), "--drain must be a duration such as 5s, got soon");
  assert.equal(problem(["--digest-mode", "pin"]), "--digest-mode must be mutate or record, got pin");
  assert.equal(problem(["--port", "65536"]), "--port must be a port number, got 65536");
  assert.equal(problem(["--port=-1"]), "--port must be a port number, got -1");
  assert.equal(problem(["--metrics-port", "http"]), "--metrics-port must be a port number, got http");
  assert.equal(problem(["--workers", "0"]), "--workers must be a number of processes from 1 to 64, or auto, got 0");
  assert.equal(problem(["--workers", "two"]), "--workers must be a number of processes from 1 to 64, or auto, got two");
  assert.equal(
    problem(["--workers", "2", "--policy-crds", "--cluster-kubeconfig", "east=e.yaml"]),
    "--workers above 1 cannot be combined with --policy-crds and --cluster-kubeconfig yet",
  );
  assert.equal(problem(["--tls-cert", "c.pem"]), "--tls-cert and --tls-key go together");
  assert.equal(problem(["--tls-secret", "ns/tls", "--tls-cert", "c.pem", "--tls-key", "k.pem"]), "--tls-secret and --tls-cert/--tls-key are alternatives");
  assert.equal(problem(["--leader-election-id", "x"]), "--leader-election-id needs --tls-secret");
  assert.equal(problem(["--client-ca-any-name"]), "--client-ca-any-name needs --client-ca");
  assert.equal(problem(["--cluster-kubeconfig", "east"]), '--cluster-kubeconfig: "east" is not NAME=FILE');
  // Checked in serve's order: the drain before the port, the port before the callers.
  assert.equal(problem(["--port", "x", "--drain", "soon"]), "--drain must be a duration such as 5s, got soon");
  assert.equal(problem(["--client-ca-any-name", "--port", "x"]), "--port must be a port number, got x");
});

test("the flags laid over the config file: a TTL that is no duration is a ServeFlagError naming the flag", () => {
  const given: ConfigFlags = {
    failOpen: true,
    allowTtl: "2h",
    denyTtl: undefined,
    auditLog: "/var/log/audit.jsonl",
    registries: undefined,
    authFile: "/etc/auth.json",
    digestMode: "record",
  };
  const config = layConfigFlags(structuredClone(DEFAULT_SERVER_CONFIG), given);
  assert.equal(config.failOpen, true);
  assert.equal(config.allowTtlMs, 7_200_000);
  assert.equal(config.denyTtlMs, DEFAULT_SERVER_CONFIG.denyTtlMs);
  assert.equal(config.auditLog, "/var/log/audit.jsonl");
  assert.equal(config.registries, DEFAULT_SERVER_CONFIG.registries);
  assert.equal(config.authFile, "/etc/auth.json");
  assert.equal(config.digests.mode, "record");

  assert.throws(
    () => layConfigFlags(structuredClone(DEFAULT_SERVER_CONFIG), { ...given, denyTtl: "later" }),
    (e: unknown) => e instanceof ServeFlagError && e.code === "not-a-duration" && e.message === "--deny-ttl: not a duration: later",
  );
});
