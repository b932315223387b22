// The versioned Pod Security Standards profiles (`baseline@v1.25`, `restricted@latest`): every policy version
// from v1.0 to v1.37, judged against facts written down here from Pod Security Admission's check registry
// (policy/check_*.go of k8s.io/pod-security-admission, and the pull requests that changed them; see
// docs/pod-security-standards.md), not read from the profiles' own version table:
//   - PSA_CHECKS: which checks exist from which version, and which restricted check replaces which baseline one;
//   - CHANGES: for each change of a check, a pod whose verdict turns at that version, and for the changes
//     Kubernetes made in place for every version, a pod whose verdict is the same at all of them.
// The per-version fixtures are generated from these: each pod is judged at each of the 38 versions and both levels,
// and must be allowed, or denied by exactly the expected check, as its fact says for that version. As in PSA's own
// tests (a pass and a fail fixture per check per version), no case is written per version by hand.
//
// No differential test against Pod Security Admission itself runs here: the Kubernetes tree this project builds
// its test components from (v1.20) predates pod-security-admission, so there is no PSA code at hand to compare with.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import { Ajv } from "ajv";
import { parse } from "yaml";
import { decidePodRestrictions } from "../../src/core/pod-restriction/pod-restriction-decision.ts";
import { compilePodRestriction, type PodRestriction } from "../../src/core/pod-restriction/pod-restriction.ts";
import { PodRestrictionIndex } from "../../src/core/pod-restriction/restriction-index.ts";
import { podsInObject } from "../../src/core/workload-templates.ts";
import {
  bindProfileClusterWide,
  loadProfiles,
  NEWEST_POLICY_MINOR,
  parsePolicyVersion,
  policyMinors,
  profileDocumentAt,
  profileSources,
  resolveProfileName,
  shippedProfiles,
  type Profile,
} from "../../src/policy/profiles.ts";

type Level = "baseline" | "restricted";
const LEVELS: Level[] = ["baseline", "restricted"];
const MINORS = policyMinors();

// ---------------------------------------------------------------------------------------------------------
// Facts from Pod Security Admission's registry (Kubernetes v1.37)

/** Check ID, level, the first policy version it is in, and the baseline check it replaces under restricted. */
const PSA_CHECKS: Array<{ id: string; level: Level; since: number; overrides?: string }> = [
  { id: "windowsHostProcess", level: "baseline", since: 0 },
  { id: "hostNamespaces", level: "baseline", since: 0 },
  { id: "privileged", level: "baseline", since: 0 },
  { id: "capabilities_baseline", level: "baseline", since: 0 },
  { id: "hostPathVolumes", level: "baseline", since: 0 },
  { id: "hostPorts", level: "baseline", since: 0 },
  { id: "appArmorProfile", level: "baseline", since: 0 },
  { id: "seLinuxOptions", level: "baseline", since: 0 },
  { id: "procMount", level: "baseline", since: 0 },
  { id: "seccompProfile_baseline", level: "baseline", since: 0 },
  { id: "sysctls", level: "baseline", since: 0 },
  { id: "hostProbesAndHostLifecycle", level: "baseline", since: 34 },
  { id: "restrictedVolumes", level: "restricted", since: 0, overrides: "hostPathVolumes" },
  { id: "allowPrivilegeEscalation", level: "restricted", since: 8 },
  { id: "runAsNonRoot", level: "restricted", since: 0 },
  { id: "runAsUser", level: "restricted", since: 23 },
  { id: "seccompProfile_restricted", level: "restricted", since: 19, overrides: "seccompProfile_baseline" },
  { id: "capabilities_restricted", level: "restricted", since: 22, overrides: "capabilities_baseline" },
  // PSA's procMount_restricted; the shipped profile keeps the name procMount for it.
  { id: "procMount", level: "restricted", since: 35, overrides: "procMount" },
];

/** The safe sysctls and the policy version each became safe at (PRs 115374, 118846, 121240, 127489, 138389). */
const SAFE_SYSCTLS: Record<string, number> = {
  "kernel.shm_rmid_forced": 0,
  "net.ipv4.ip_local_port_range": 0,
  "net.ipv4.ip_unprivileged_port_start": 0,
  "net.ipv4.tcp_syncookies": 0,
  "net.ipv4.ping_group_range": 0,
  "net.ipv4.ip_local_reserved_ports": 27,
  "net.ipv4.tcp_keepalive_time": 29,
  "net.ipv4.tcp_fin_timeout": 29,
  "net.ipv4.tcp_keepalive_intvl": 29,
  "net.ipv4.tcp_keepalive_probes": 29,
  "net.ipv4.tcp_rmem": 32,
  "net.ipv4.tcp_wmem": 32,
  "net.ipv4.tcp_slow_start_after_idle": 37,
  "net.ipv4.tcp_notsent_lowat": 37,
};

type Pod = { apiVersion: "v1"; kind: "Pod"; metadata: Record<string, any>; spec: Record<string, any> };
/** A check label ("restricted/runAsUser") denies; "allow" allows. */
type Verdict = "allow" | `${Level}/${string}`;
/** The verdict from each version on, until the next key. */
type Verdicts = Record<number, Verdict>;

interface Change {
  name: string;
  /** Starts from a pod restricted allows at every version (a Windows one for `windows`). */
  windows?: boolean;
  tweak: (pod: Pod) => void;
  baseline: Verdicts;
  restricted: Verdicts;
}

const container = (pod: Pod) => pod.spec.containers[0] as Record<string, any>;
const sc = (pod: Pod) => container(pod).securityContext as Record<string, any>;
const always = (v: Verdict): Verdicts => ({ 0: v });

const CHANGES: Change[] = [
  ...Object.entries(SAFE_SYSCTLS).map(([name, since]): Change => ({
    name: `sysctl ${name} (safe from v1.${since})`,
    tweak: (p) => (p.spec.securityContext.sysctls = [{ name, value: "1" }]),
    baseline: since === 0 ? always("allow") : { 0: "baseline/sysctls", [since]: "allow" },
    restricted: since === 0 ? always("allow") : { 0: "baseline/sysctls", [since]: "allow" },
  })),
  {
    name: "sysctl kernel.msgmax (never safe)",
    tweak: (p) => (p.spec.securityContext.sysctls = [{ name: "kernel.msgmax", value: "65536" }]),
    baseline: always("baseline/sysctls"),
    restricted: always("baseline/sysctls"),
  },
  {
    // Pod Security Admission refuses the name "" (a sysctl without a name); only an offline manifest can hold one.
    name: "a sysctl without a name (never safe)",
    tweak: (p) => (p.spec.securityContext.sysctls = [{ value: "1" }]),
    baseline: always("baseline/sysctls"),
    restricted: always("baseline/sysctls"),
  },
  {
    name: "SELinux type container_engine_t (allowed from v1.31, PR 126165)",
    tweak: (p) => (sc(p).seLinuxOptions = { type: "container_engine_t" }),
    baseline: { 0: "baseline/seLinuxOptions", 31: "allow" },
    restricted: { 0: "baseline/seLinuxOptions", 31: "allow" },
  },
  {
    name: "SELinux type container_kvm_t (allowed in every version)",
    tweak: (p) => (p.spec.securityContext.seLinuxOptions = { type: "container_kvm_t" }),
    baseline: always("allow"),
    restricted: always("allow"),
  },
  {
    name: "seccomp pod annotation unconfined (checked before v1.19, the field from v1.19)",
    tweak: (p) => (p.metadata.annotations = { "seccomp.security.alpha.kubernetes.io/pod": "unconfined" }),
    baseline: { 0: "baseline/seccompProfile_baseline", 19: "allow" },
    restricted: { 0: "baseline/seccompProfile_baseline", 19: "allow" },
  },
  {
    name: "seccomp container annotation unconfined",
    tweak: (p) => (p.metadata.annotations = { "container.seccomp.security.alpha.kubernetes.io/app": "unconfined" }),
    baseline: { 0: "baseline/seccompProfile_baseline", 19: "allow" },
    restricted: { 0: "baseline/seccompProfile_baseline", 19: "allow" },
  },
  {
    name: "seccomp annotations docker/default and localhost/ (allowed in every version)",
    tweak: (p) =>
      (p.metadata.annotations = {
        "seccomp.security.alpha.kubernetes.io/pod": "docker/default",
        "container.seccomp.security.alpha.kubernetes.io/app": "localhost/profile.json",
      }),
    baseline: always("allow"),
    restricted: always("allow"),
  },
  {
    name: "seccompProfile Unconfined on a container (fields checked from v1.19)",
    tweak: (p) => (sc(p).seccompProfile = { type: "Unconfined" }),
    baseline: { 0: "allow", 19: "baseline/seccompProfile_baseline" },
    restricted: { 0: "allow", 19: "restricted/seccompProfile_restricted" },
  },
  {
    // Baseline allows a set profile only when it is RuntimeDefault or Localhost, as PSA's check does: a profile with
    // another type, or none, is refused like Unconfined (the apiserver's validation refuses both before admission,
    // so only an offline manifest can hold them).
    name: "seccompProfile with no type, or an unknown one, on the pod (fields checked from v1.19)",
    tweak: (p) => (p.spec.securityContext.seccompProfile = {}),
    baseline: { 0: "allow", 19: "baseline/seccompProfile_baseline" },
    restricted: { 0: "allow", 19: "restricted/seccompProfile_restricted" },
  },
  {
    name: "seccompProfile of an unknown type on a container (fields checked from v1.19)",
    tweak: (p) => (sc(p).seccompProfile = { type: "runtimeDefault" }),
    baseline: { 0: "allow", 19: "baseline/seccompProfile_baseline" },
    restricted: { 0: "allow", 19: "restricted/seccompProfile_restricted" },
  },
  {
    name: "no seccomp profile (required by restricted from v1.19)",
    tweak: (p) => delete p.spec.securityContext.seccompProfile,
    baseline: always("allow"),
    restricted: { 0: "allow", 19: "restricted/seccompProfile_restricted" },
  },
  {
    name: "allowPrivilegeEscalation unset (required false from v1.8)",
    tweak: (p) => delete sc(p).allowPrivilegeEscalation,
    baseline: always("allow"),
    restricted: { 0: "allow", 8: "restricted/allowPrivilegeEscalation" },
  },
  {
    name: "capabilities not dropped (drop ALL required from v1.22)",
    tweak: (p) => delete sc(p).capabilities,
    baseline: always("allow"),
    restricted: { 0: "allow", 22: "restricted/capabilities_restricted" },
  },
  {
    name: "capability NET_RAW added (baseline's check, restricted's from v1.22)",
    tweak: (p) => (sc(p).capabilities.add = ["NET_RAW"]),
    baseline: always("baseline/capabilities_baseline"),
    restricted: { 0: "baseline/capabilities_baseline", 22: "restricted/capabilities_restricted" },
  },
  {
    name: "runAsUser 0 (forbidden from v1.23)",
    tweak: (p) => (sc(p).runAsUser = 0),
    baseline: always("allow"),
    restricted: { 0: "allow", 23: "restricted/runAsUser" },
  },
  {
    name: "Windows pod without allowPrivilegeEscalation (required v1.8 to v1.24, Windows exempt from v1.25)",
    windows: true,
    tweak: (p) => delete sc(p).allowPrivilegeEscalation,
    baseline: always("allow"),
    restricted: { 0: "allow", 8: "restricted/allowPrivilegeEscalation", 25: "allow" },
  },
  {
    name: "Windows pod without a seccomp profile (required v1.19 to v1.24)",
    windows: true,
    tweak: (p) => delete p.spec.securityContext.seccompProfile,
    baseline: always("allow"),
    restricted: { 0: "allow", 19: "restricted/seccompProfile_restricted", 25: "allow" },
  },
  {
    name: "Windows pod without drop ALL (required v1.22 to v1.24)",
    windows: true,
    tweak: (p) => delete sc(p).capabilities,
    baseline: always("allow"),
    restricted: { 0: "allow", 22: "restricted/capabilities_restricted", 25: "allow" },
  },
  {
    name: "Windows pod without runAsNonRoot (never exempt)",
    windows: true,
    tweak: (p) => delete p.spec.securityContext.runAsNonRoot,
    baseline: always("allow"),
    restricted: always("restricted/runAsNonRoot"),
  },
  {
    name: "hostUsers false, runAsNonRoot false (exempt from v1.35, PR 132157)",
    tweak: (p) => Object.assign(p.spec, { hostUsers: false, securityContext: { ...p.spec.securityContext, runAsNonRoot: false } }),
    baseline: always("allow"),
    restricted: { 0: "restricted/runAsNonRoot", 35: "allow" },
  },
  {
    name: "hostUsers false, runAsUser 0 (forbidden from v1.23, exempt from v1.35)",
    tweak: (p) => {
      p.spec.hostUsers = false;
      sc(p).runAsUser = 0;
    },
    baseline: always("allow"),
    restricted: { 0: "allow", 23: "restricted/runAsUser", 35: "allow" },
  },
  {
    name: "runAsNonRoot false with hostUsers true (no exemption)",
    tweak: (p) => Object.assign(p.spec, { hostUsers: true, securityContext: { ...p.spec.securityContext, runAsNonRoot: false } }),
    baseline: always("allow"),
    restricted: always("restricted/runAsNonRoot"),
  },
  {
    name: "hostUsers false, procMount Unmasked (baseline exempts from v1.35, restricted never)",
    tweak: (p) => {
      p.spec.hostUsers = false;
      sc(p).procMount = "Unmasked";
    },
    baseline: { 0: "baseline/procMount", 35: "allow" },
    restricted: { 0: "baseline/procMount", 35: "restricted/procMount" },
  },
  {
    name: "procMount Unmasked without a user namespace",
    tweak: (p) => (sc(p).procMount = "Unmasked"),
    baseline: always("baseline/procMount"),
    restricted: { 0: "baseline/procMount", 35: "restricted/procMount" },
  },
  {
    name: "liveness probe with a host (forbidden from v1.34, PR 125271)",
    tweak: (p) => (container(p).livenessProbe = { httpGet: { host: "10.0.0.1", port: 8080 } }),
    baseline: { 0: "allow", 34: "baseline/hostProbesAndHostLifecycle" },
    restricted: { 0: "allow", 34: "baseline/hostProbesAndHostLifecycle" },
  },
  {
    name: "preStop hook with a tcpSocket host (forbidden from v1.34)",
    tweak: (p) => (container(p).lifecycle = { preStop: { tcpSocket: { host: "metadata.internal", port: 80 } } }),
    baseline: { 0: "allow", 34: "baseline/hostProbesAndHostLifecycle" },
    restricted: { 0: "allow", 34: "baseline/hostProbesAndHostLifecycle" },
  },
  {
    name: "image volume (allowed by restricted in every version: PR 130394 changed the v1.0 check)",
    tweak: (p) => (p.spec.volumes = [{ name: "data", image: { reference: "registry.example/data:1.0" } }]),
    baseline: always("allow"),
    restricted: always("allow"),
  },
  {
    name: "appArmorProfile field Unconfined (checked in every version: the v1.0 check reads the fields)",
    tweak: (p) => (p.spec.securityContext.appArmorProfile = { type: "Unconfined" }),
    baseline: always("baseline/appArmorProfile"),
    restricted: always("baseline/appArmorProfile"),
  },
  {
    name: "AppArmor annotation unconfined",
    tweak: (p) => (p.metadata.annotations = { "container.apparmor.security.beta.kubernetes.io/app": "unconfined" }),
    baseline: always("baseline/appArmorProfile"),
    restricted: always("baseline/appArmorProfile"),
  },
  {
    name: "hostPath volume (restrictedVolumes takes hostPathVolumes' place under restricted)",
    tweak: (p) => (p.spec.volumes = [{ name: "host", hostPath: { path: "/var/log" } }]),
    baseline: always("baseline/hostPathVolumes"),
    restricted: always("restricted/restrictedVolumes"),
  },
  {
    name: "nfs volume",
    tweak: (p) => (p.spec.volumes = [{ name: "share", nfs: { server: "nfs.example", path: "/export" } }]),
    baseline: always("allow"),
    restricted: always("restricted/restrictedVolumes"),
  },
  {
    name: "hostNetwork",
    tweak: (p) => (p.spec.hostNetwork = true),
    baseline: always("baseline/hostNamespaces"),
    restricted: always("baseline/hostNamespaces"),
  },
  {
    name: "hostPort",
    tweak: (p) => (container(p).ports = [{ containerPort: 8080, hostPort: 8080 }]),
    baseline: always("baseline/hostPorts"),
    restricted: always("baseline/hostPorts"),
  },
];

function basePod(windows: boolean): Pod {
  // Restricted allows it at every version: it sets what any version requires. The Windows one keeps the Linux
  // fields too (the API would refuse them), so that a change removes exactly one requirement.
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "fixture", namespace: "default" },
    spec: {
      ...(windows ? { os: { name: "windows" } } : {}),
      securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } },
      containers: [{ name: "app", image: "registry.example/app:1.0", securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } } }],
    },
  };
}

function verdictAt(verdicts: Verdicts, minor: number): Verdict {
  const from = Object.keys(verdicts)
    .map(Number)
    .filter((v) => v <= minor)
    .sort((a, b) => a - b)
    .at(-1)!;
  return verdicts[from]!;
}

// ---------------------------------------------------------------------------------------------------------

let profiles: Map<string, Profile>;
const bound = new Map<string, PodRestrictionIndex>();
const policyAt = (level: Level, minor: number): PodRestriction => bindProfileClusterWide(`${level}@v1.${minor}`, profiles);

function judge(index: PodRestrictionIndex, object: Pod) {
  const [pod] = podsInObject(object);
  assert.ok(pod);
  return decidePodRestrictions(index, pod, "default", undefined);
}

before(async () => {
  profiles = await shippedProfiles();
  for (const level of LEVELS) for (const minor of MINORS) bound.set(`${level}@v1.${minor}`, new PodRestrictionIndex([policyAt(level, minor)]));
});

// The folders the tests write profiles and pods to, removed when the file's tests are done.
const temporaryDirs: string[] = [];
async function temporaryDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  temporaryDirs.push(dir);
  return dir;
}
after(() => Promise.all(temporaryDirs.map((dir) => rm(dir, { recursive: true, force: true }))));
describe("policy versions: names", () => {
  it("parses versions as Pod Security Admission's labels do", () => {
    const cases: Array<[string, number | "latest" | undefined]> = [
      ["latest", "latest"],
      ["v1.0", 0],
      ["v1.9", 9],
      ["v1.25", 25],
      ["v1.37", 37],
      ["v1.38", 38],
      ["v1.123", 123],
      ["1.25", undefined],
      ["v0.9", undefined],
      ["v2.0", undefined],
      ["v1.025", undefined],
      ["v1.00", undefined],
      ["V1.25", undefined],
      ["Latest", undefined],
      ["v1", undefined],
      ["v1.", undefined],
      ["v1.2.3", undefined],
      ["v1.-1", undefined],
      [" v1.2", undefined],
      ["v1.2 ", undefined],
      ["", undefined],
    ];
    for (const [text, expected] of cases) assert.equal(parsePolicyVersion(text), expected, JSON.stringify(text));
  });

  it("resolves plain, versioned and latest names, and refuses the others naming the valid ones", () => {
    for (const name of ["restricted", "restricted@latest"]) {
      const r = resolveProfileName(name, profiles);
      assert.ok(r.ok && r.version === "latest" && r.raw === profiles.get("restricted")!.raw, name);
    }
    const v125 = resolveProfileName("baseline@v1.25", profiles);
    assert.ok(v125.ok && v125.version === 25 && v125.profile.name === "baseline");
    const refused: Array<[string, RegExp]> = [
      ["strict", /^unknown profile "strict"; shipped profiles: baseline, restricted$/],
      ["strict@v1.25", /^unknown profile "strict@v1\.25"; shipped profiles: baseline, restricted$/],
      ["restricted@1.25", /"restricted@1\.25": .*v1\.0 to v1\.37, or latest \(= v1\.37\); got "1\.25"$/],
      ["restricted@v0.9", /got "v0\.9"$/],
      ["restricted@v2.0", /got "v2\.0"$/],
      ["restricted@", /got ""$/],
      ["restricted@v1.38", /policy version v1\.38 is newer than the shipped profiles, which know v1\.0 to v1\.37, or latest/],
    ];
    for (const [name, message] of refused) {
      const r = resolveProfileName(name, profiles);
      assert.ok(!r.ok, name);
      assert.match(r.message, message);
      assert.throws(
        () => bindProfileClusterWide(name, profiles),
        (e: Error) => message.test(e.message.split("--profile: ")[1] ?? ""),
      );
    }
  });

  it("spec.profile takes the same names: the checks of that version, labelled by the plain profile name", () => {
    const catalog = profileSources(profiles);
    const compile = (profile: string, extra: Record<string, unknown> = {}) =>
      compilePodRestriction(
        { apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name: "pinned" }, spec: { profile, ...extra } },
        { profiles: catalog },
      );
    const pinned = compile("restricted@v1.22");
    assert.ok(pinned.policy, JSON.stringify(pinned.issues));
    assert.deepEqual(pinned.policy.profiles, ["restricted@v1.22", "baseline@v1.22"]);
    assert.deepEqual(
      pinned.policy.checks.map((c) => c.name),
      policyAt("restricted", 22).checks.map((c) => c.name),
    );
    assert.ok(!pinned.policy.checks.some((c) => c.name === "restricted/runAsUser"));
    // A policy's own check may take the place of a check of the version it includes.
    const overriding = compile("restricted@v1.25", {
      checks: [{ name: "strictUser", overrides: ["runAsUser"], spec: { securityContext: { runAsUser: { ranges: [{ min: 1000 }] } } } }],
    });
    assert.ok(overriding.policy, JSON.stringify(overriding.issues));
    assert.ok(!overriding.policy.checks.some((c) => c.name === "restricted/runAsUser"));
    // ...but not of one that version does not have.
    const tooEarly = compile("restricted@v1.22", { checks: [{ name: "strictUser", overrides: ["runAsUser"], spec: {} }] });
    assert.match(tooEarly.issues[0]?.message ?? "", /"runAsUser", which is not a check of profile "restricted"/);
    for (const [name, message] of [
      ["restricted@v1.38", /newer than the shipped profiles/],
      ["restricted@1.25", /got "1\.25"/],
      ["nope@v1.25", /^unknown profile "nope@v1\.25"/],
    ] as const) {
      const r = compile(name);
      assert.equal(r.policy, undefined, name);
      assert.deepEqual(r.issues[0]?.path, ["spec", "profile"]);
      assert.match(r.issues[0]!.message, message);
    }
  });
});

describe("policy versions: which checks each version has", () => {
  for (const level of LEVELS) {
    it(`${level}: every version from v1.0 to v1.${NEWEST_POLICY_MINOR} has exactly Pod Security Admission's checks`, () => {
      for (const minor of MINORS) {
        const present = PSA_CHECKS.filter((c) => c.since <= minor && (level === "restricted" || c.level === "baseline"));
        const replaced = new Set(present.filter((c) => c.level === "restricted" && c.overrides).map((c) => `baseline/${c.overrides}`));
        const expected = present.map((c) => `${c.level}/${c.id}`).filter((label) => !replaced.has(label) || label.startsWith("restricted/"));
        const actual = policyAt(level, minor).checks.map((c) => c.name!);
        assert.deepEqual([...actual].sort(), [...expected].sort(), `${level}@v1.${minor}`);
      }
    });
  }

  it("latest, the plain name and the newest version are the same profile, and the newest is what the file says", () => {
    for (const level of LEVELS) {
      const names = (name: string) => bindProfileClusterWide(name, profiles).checks.map((c) => c.name);
      assert.deepEqual(names(`${level}@latest`), names(level));
      assert.deepEqual(names(`${level}@v1.${NEWEST_POLICY_MINOR}`), names(level));
      // At the newest version the table replaces nothing: the document is the file's, less the table itself.
      const file = structuredClone(profiles.get(level)!.raw) as { metadata: { annotations: Record<string, string> } };
      delete file.metadata.annotations["imprimatur.dev/policy-versions"];
      const newest = profileDocumentAt(profiles.get(level)!, NEWEST_POLICY_MINOR) as typeof file & { spec: { profile?: string } };
      if (newest.spec.profile) newest.spec.profile = newest.spec.profile.replace(/@v1\.\d+$/, "");
      newest.metadata.annotations["imprimatur.dev/description"] = file.metadata.annotations["imprimatur.dev/description"]!;
      assert.deepEqual(newest, file);
    }
  });

  it("the Pod Security Standards case table decides the same at the newest version as with the plain name", () => {
    const cases = parse(readFileSync(new URL("../fixtures/pss/cases.yaml", import.meta.url), "utf8")) as Array<{ name: string; pod: Pod }>;
    for (const level of LEVELS) {
      const plain = new PodRestrictionIndex([bindProfileClusterWide(level, profiles)]);
      const newest = bound.get(`${level}@v1.${NEWEST_POLICY_MINOR}`)!;
      for (const c of cases) {
        const rules = (index: PodRestrictionIndex) => judge(index, c.pod).violations.map((v) => `${v.field} ${v.rule}`);
        assert.deepEqual(rules(newest), rules(plain), `${level}: ${c.name}`);
      }
    }
  });

  it("every version's document is a valid PodRestriction by the published JSON Schema", async () => {
    const schema = JSON.parse(readFileSync(new URL("../../src/core/pod-restriction/pod-restriction.schema.json", import.meta.url), "utf8"));
    const valid = new Ajv({ allErrors: true, strict: true }).compile(schema);
    for (const level of LEVELS)
      for (const minor of MINORS) assert.ok(valid(profileDocumentAt(profiles.get(level)!, minor)), `${level}@v1.${minor}: ${JSON.stringify(valid.errors)}`);
  });
});

describe("policy versions: generated fixtures, one pod per change judged at every version", () => {
  it("every version boundary of the profiles' tables has a fact here that turns at it", () => {
    const covered = new Set<string>();
    for (const change of CHANGES)
      for (const level of LEVELS) {
        const verdicts = change[level];
        for (const minor of Object.keys(verdicts).map(Number)) {
          if (minor === 0) continue;
          for (const v of [verdicts[minor]!, verdictAt(verdicts, minor - 1)]) if (v !== "allow") covered.add(`${v}@${minor}`);
        }
      }
    for (const level of LEVELS)
      for (const [check, variants] of profiles.get(level)!.versions)
        for (const { from } of variants) if (from > 0) assert.ok(covered.has(`${level}/${check}@${from}`), `no fixture turns at ${level}/${check} v1.${from}`);
  });

  for (const change of CHANGES) {
    it(change.name, () => {
      const object = basePod(change.windows === true);
      change.tweak(object);
      for (const level of LEVELS) {
        for (const minor of MINORS) {
          const expected = verdictAt(change[level], minor);
          const decision = judge(bound.get(`${level}@v1.${minor}`)!, object);
          const reasons = decision.violations.map((v) => `${v.field} ${v.rule}: ${v.message}`).join("\n");
          const at = `${level}@v1.${minor}`;
          if (expected === "allow") assert.ok(decision.allowed, `${at} should allow, denied:\n${reasons}`);
          else {
            assert.ok(!decision.allowed, `${at} should deny by ${expected}, allowed`);
            assert.deepEqual([...new Set(decision.violations.map((v) => v.rule))], [expected], `${at}:\n${reasons}`);
          }
        }
      }
    });
  }

  it("the base pods are allowed by both levels at every version", () => {
    for (const windows of [false, true])
      for (const level of LEVELS)
        for (const minor of MINORS) assert.ok(judge(bound.get(`${level}@v1.${minor}`)!, basePod(windows)).allowed, `${level}@v1.${minor}`);
  });
});

describe("policy versions: a broken version table is a load error naming it", () => {
  const profileWith = (table: string) =>
    [
      "apiVersion: imprimatur.dev/v1alpha1",
      "kind: PodRestriction",
      "metadata:",
      "  name: mini",
      "  annotations:",
      "    imprimatur.dev/policy-versions: |",
      ...table.split("\n").map((l) => `      ${l}`),
      "spec:",
      "  checks:",
      "    - name: privileged",
      "      spec: { containers: [{ securityContext: { privileged: { allowNil: true, require: false } } }] }",
      "",
    ].join("\n");
  const cases: Array<[string, string, RegExp]> = [
    ["unknown check", "nope:\n  - from: v1.2", /nope: not a check of profile "mini"/],
    ["not a list", "privileged: v1.2", /privileged: must be a list of the versions it changed at/],
    ["bad version", "privileged:\n  - from: 1.2", /privileged\[0\]\.from: must be a version from v1\.0 to v1\.37, got 1\.2$/],
    ["future version", "privileged:\n  - from: v1.38", /privileged\[0\]\.from: must be a version from v1\.0 to v1\.37/],
    ["versions out of order", "privileged:\n  - from: v1.5\n    spec: null\n  - from: v1.5", /privileged\[1\]\.from: versions must grow, oldest first/],
    ["unknown field", "privileged:\n  - from: v1.2\n    binding: {}\n  - from: v1.3", /privileged\[0\]: unknown field "binding"/],
    [
      "last entry not as written",
      "privileged:\n  - from: v1.2\n    spec: null",
      /privileged: the last version is the check as written, so it replaces no field/,
    ],
    ["not a mapping", "- privileged", /must map check names to their versions/],
    ["not YAML", "privileged: [", /\): YAML line \d+: /],
  ];
  for (const [name, table, message] of cases) {
    it(name, async () => {
      const dir = await temporaryDir("imprimatur-profile-table-");
      await writeFile(join(dir, "mini.yaml"), profileWith(table));
      await assert.rejects(loadProfiles(dir), (e: Error) => {
        assert.match(e.message, /mini\.yaml.*metadata\.annotations\[imprimatur\.dev\/policy-versions\]/);
        assert.match(e.message, message);
        return true;
      });
    });
  }

  it("a valid table loads, and a check first listed after v1.0 is absent before it", async () => {
    const dir = await temporaryDir("imprimatur-profile-table-");
    await writeFile(join(dir, "mini.yaml"), profileWith("privileged:\n  - from: v1.3\n    description: early\n  - from: v1.7"));
    const mini = (await loadProfiles(dir)).get("mini")!;
    const checksAt = (minor: number) => (profileDocumentAt(mini, minor) as { spec: { checks: Array<{ description?: string }> } }).spec.checks;
    assert.deepEqual(checksAt(2), []);
    assert.equal(checksAt(3)[0]!.description, "early");
    assert.equal(checksAt(7)[0]!.description, undefined);
  });
});

describe("policy versions: check --profile", () => {
  const BIN = fileURLToPath(new URL("../../bin/imprimatur.js", import.meta.url));
  const POLICIES = fileURLToPath(new URL("../fixtures/e2e-policies/", import.meta.url));
  const run = (args: string[]) => {
    const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8" });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  it("judges with the profile at the named version, and refuses an invalid version with exit 2", async () => {
    const dir = await temporaryDir("imprimatur-profile-versions-");
    const file = join(dir, "root.yaml");
    const pod = basePod(false);
    sc(pod).runAsUser = 0;
    container(pod).image = "registry.example.com/app:1.0"; // the fixture policies' trusted registry
    await writeFile(file, JSON.stringify(pod));
    const before = run(["check", "--policies", POLICIES, "--profile", "restricted@v1.22", "-f", file]);
    assert.equal(before.code, 0, before.stdout + before.stderr);
    const after = run(["check", "--policies", POLICIES, "--profile", "restricted@v1.23", "-f", file, "--output", "json"]);
    assert.equal(after.code, 1, after.stderr);
    const [result] = JSON.parse(after.stdout).results as Array<{ violations: Array<{ policy: string; rule: string }> }>;
    assert.deepEqual(
      result!.violations.map((v) => [v.policy, v.rule]),
      [["profile-restricted-v1.23", "restricted/runAsUser"]],
    );
    const invalid = run(["check", "--policies", POLICIES, "--profile", "restricted@1.25", "-f", file]);
    assert.equal(invalid.code, 2);
    assert.match(invalid.stderr, /profile "restricted@1\.25": the policy version must be written as Pod Security Admission's labels write it/);
  });

  it("imprimatur profiles prints a version's checks and document", () => {
    const text = run(["profiles", "restricted@v1.22"]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^restricted@v1\.22\tPod Security Standards restricted \(policy version v1\.22\)/);
    assert.doesNotMatch(text.stdout, /runAsUser/);
    const yaml = run(["profiles", "baseline@v1.18", "--output", "yaml"]);
    assert.equal(yaml.code, 0, yaml.stderr);
    const doc = parse(yaml.stdout) as { kind: string; spec: { checks: Array<{ name: string; metadata?: unknown; spec?: unknown }> } };
    assert.equal(doc.kind, "PodRestriction");
    const seccomp = doc.spec.checks.find((c) => c.name === "seccompProfile_baseline")!;
    assert.ok(seccomp.metadata && !seccomp.spec, "before v1.19 the seccomp check reads the annotations only");
    assert.equal(run(["profiles", "baseline@v1.99"]).code, 2);
  });
});
