// The PSA checks, one file each under src/core/pod-security/checks/, against the shipped profiles: each check of
// a profile has exactly one file, at the same level and with the versions of the profile's version table, and the
// index lists them in Pod Security Admission's registry order (policy/registry.go: the baseline check IDs sorted,
// then the restricted ones sorted). The files are found by reading the folder, so one the index forgets shows.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { bindProfileClusterWide, NEWEST_POLICY_MINOR, shippedProfiles, type Profile } from "../../../src/policy/profiles.ts";
import { podRestrictionFindings } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";
import { psaCheckOf } from "../../../src/core/pod-security/psa-messages.ts";
import type { PsaCheck, PsaLevel } from "../../../src/core/pod-security/checks/check-support.ts";
import type { PodUnderReview } from "../../../src/core/pod-under-review.ts";
import { PSA_CHECKS } from "../../../src/core/pod-security/checks/index.ts";

const CHECKS_DIR = fileURLToPath(new URL("../../../src/core/pod-security/checks/", import.meta.url));
const NOT_CHECKS = new Set(["check-support.ts", "index.ts"]);

/** A check of a shipped profile, named as PSA names it, with the versions its profile's table gives. */
interface ProfileCheck {
  id: string;
  level: PsaLevel;
  versions: string[];
}

let profiles: Map<string, Profile>;
/** File name → the checks it exports. */
let checkFiles: Map<string, PsaCheck[]>;
let profileChecks: ProfileCheck[];

before(async () => {
  profiles = await shippedProfiles();
  checkFiles = new Map();
  for (const file of readdirSync(CHECKS_DIR).filter((f) => f.endsWith(".ts") && !NOT_CHECKS.has(f))) {
    const exports: Record<string, unknown> = await import(pathToFileURL(CHECKS_DIR + file).href);
    checkFiles.set(file, Object.values(exports).filter(isCheck));
  }
  profileChecks = (["baseline", "restricted"] as const).flatMap((level) => {
    const profile = profiles.get(level);
    assert.ok(profile, level);
    // The profile's own checks (the restricted one also holds baseline's, labelled baseline/).
    const own = profile.policy.checks.map((c) => c.name ?? "").filter((name) => name.startsWith(`${level}/`));
    return own.map((rule) => {
      const name = rule.slice(level.length + 1);
      const table = profile.versions.get(name);
      return {
        // As psaCheckOf maps them: restricted's procMount is PSA's procMount_restricted.
        id: level === "restricted" && name === "procMount" ? "procMount_restricted" : name,
        level,
        // A check not in the table is the same in every version.
        versions: table ? table.map((variant) => `v1.${variant.from}`) : ["v1.0"],
      };
    });
  });
});

function isCheck(value: unknown): value is PsaCheck {
  return typeof value === "object" && value !== null && typeof (value as PsaCheck).id === "string" && typeof (value as PsaCheck).detail === "function";
}

/** The one convention for file names: the check ID in kebab-case, "_" as "-". */
function fileNameOf(id: string): string {
  return `${id.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`).replace(/_/g, "-")}.ts`;
}

test("the shipped profiles name the checks PSA has (a sanity check of the expectations below)", () => {
  assert.equal(profileChecks.filter((c) => c.level === "baseline").length, 12);
  assert.equal(profileChecks.filter((c) => c.level === "restricted").length, 7);
  for (const c of profileChecks)
    assert.deepEqual(psaCheckOf(`${c.level}/${c.id === "procMount_restricted" ? "procMount" : c.id}`), { id: c.id, level: c.level });
});

test("each check file exports one check, named after its ID", () => {
  for (const [file, checks] of checkFiles) {
    assert.equal(checks.length, 1, `${file} exports ${checks.length} checks`);
    assert.equal(file, fileNameOf(checks[0]?.id ?? ""));
  }
});

test("no two files declare the same check ID", () => {
  const seen = new Map<string, string>();
  for (const [file, checks] of checkFiles) {
    for (const check of checks) {
      assert.ok(!seen.has(check.id), `${check.id} in ${seen.get(check.id)} and ${file}`);
      seen.set(check.id, file);
    }
  }
});

test("every check of the shipped profiles has exactly one check file, at the same level, and no file is for another check", () => {
  const declared = [...checkFiles.values()].flat();
  for (const expected of profileChecks) {
    const files = declared.filter((c) => c.id === expected.id);
    assert.equal(files.length, 1, expected.id);
    assert.equal(files[0]?.level, expected.level, expected.id);
  }
  assert.deepEqual(declared.map((c) => c.id).sort(), profileChecks.map((c) => c.id).sort());
});

test("each check's versions are its profile's version table", () => {
  for (const expected of profileChecks) {
    const check = PSA_CHECKS.find((c) => c.id === expected.id);
    assert.deepEqual(check?.versions, expected.versions, expected.id);
  }
});

test("the index lists every check file's check, in PSA's order: baseline IDs sorted, then restricted IDs sorted", () => {
  assert.deepEqual(new Set(PSA_CHECKS), new Set([...checkFiles.values()].flat()));
  const sortedIds = (level: PsaLevel) =>
    profileChecks
      .filter((c) => c.level === level)
      .map((c) => c.id)
      .sort(byteOrder);
  assert.deepEqual(
    PSA_CHECKS.map((c) => c.id),
    [...sortedIds("baseline"), ...sortedIds("restricted")],
  );
});

function byteOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A pod that fails every check (in some version), with `specExtra` added to its spec. */
function podFailingEveryCheck(specExtra: Record<string, unknown> = {}): PodUnderReview {
  const bad = {
    securityContext: {
      privileged: true,
      allowPrivilegeEscalation: true,
      capabilities: { add: ["SYS_ADMIN"] },
      runAsNonRoot: false,
      runAsUser: 0,
      seccompProfile: { type: "Unconfined" },
      appArmorProfile: { type: "Unconfined" },
      procMount: "Unmasked",
      seLinuxOptions: { type: "spc_t", user: "u", role: "r" },
      windowsOptions: { hostProcess: true },
    },
    ports: [{ containerPort: 1, hostPort: 80 }],
    readinessProbe: { httpGet: { host: "h", port: 1 } },
    lifecycle: { preStop: { tcpSocket: { host: "h", port: 1 } } },
  };
  const [pod] = podsInObject({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: "p",
      annotations: {
        "container.apparmor.security.beta.kubernetes.io/a": "unconfined",
        "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
        "container.seccomp.security.alpha.kubernetes.io/a": "unconfined",
      },
    },
    spec: {
      hostNetwork: true,
      hostPID: true,
      hostIPC: true,
      securityContext: { ...bad.securityContext, sysctls: [{ name: "kernel.msgmax", value: "1" }] },
      initContainers: [{ name: "i", image: "i", ...bad }],
      containers: [
        { name: "a", image: "a", ...bad },
        { name: "b", image: "b" },
      ],
      ephemeralContainers: [{ name: "e", image: "e", ...bad }],
      volumes: [
        { name: "h", hostPath: { path: "/" } },
        { name: "n", nfs: { server: "s", path: "/" } },
      ],
      ...specExtra,
    },
  });
  assert.ok(pod);
  return pod;
}

test("each finding of a check lies on a field the check says it reads", () => {
  const pod = podFailingEveryCheck();
  const found = new Set<string>();
  for (const level of ["baseline", "restricted"]) {
    for (let minor = 0; minor <= NEWEST_POLICY_MINOR; minor++) {
      for (const finding of podRestrictionFindings(bindProfileClusterWide(`${level}@v1.${minor}`, profiles), pod)) {
        const id = psaCheckOf(finding.rule)?.id;
        const check = PSA_CHECKS.find((c) => c.id === id);
        assert.ok(check, finding.rule);
        assert.ok(
          check.reads.some((read) => readPattern(read).test(finding.field)),
          `${check.id}: ${finding.field} is not among ${check.reads.join(", ")}`,
        );
        found.add(check.id);
      }
    }
  }
  // The pod fails every check, so every check's reads were tried.
  assert.deepEqual([...found].sort(), PSA_CHECKS.map((c) => c.id).sort());
});

/** The checks that find something on `pod` under `level` at v1.`minor`. */
function failedChecks(pod: PodUnderReview, level: string, minor: number): Set<string> {
  return new Set(podRestrictionFindings(bindProfileClusterWide(`${level}@v1.${minor}`, profiles), pod).map((f) => psaCheckOf(f.rule)?.id ?? f.rule));
}

test("the fields that exempt a pod from a check are among the fields it reads, and only those checks read them", () => {
  const exemptions: Array<[field: string, specExtra: Record<string, unknown>, exempted: string[]]> = [
    // From v1.25 Windows pods are exempt from the Linux-only restricted checks.
    ["spec.os.name", { os: { name: "windows" } }, ["allowPrivilegeEscalation", "capabilities_restricted", "seccompProfile_restricted"]],
    // From v1.35 pods in a user namespace are exempt from baseline's procMount and the checks of running as root.
    ["spec.hostUsers", { hostUsers: false }, ["procMount", "runAsNonRoot", "runAsUser"]],
  ];
  const pod = podFailingEveryCheck();
  for (const [field, specExtra, expected] of exemptions) {
    const exemptPod = podFailingEveryCheck(specExtra);
    const exempted = new Set<string>();
    for (const level of ["baseline", "restricted"]) {
      for (let minor = 0; minor <= NEWEST_POLICY_MINOR; minor++) {
        const still = failedChecks(exemptPod, level, minor);
        for (const id of failedChecks(pod, level, minor)) if (!still.has(id)) exempted.add(id);
      }
    }
    assert.deepEqual([...exempted].sort(), expected, field);
    for (const check of PSA_CHECKS) assert.equal(check.reads.includes(field), exempted.has(check.id), `${check.id} and ${field}`);
  }
});

/** A `reads` path as a pattern for a finding's field: `[*]` any index, `[prefix/*]` any key with the prefix, and anything below. */
function readPattern(read: string): RegExp {
  const escaped = read
    .replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
    .replace(/\\\[\\\*\\\]/g, "\\[\\d+\\]")
    .replace(/\\\*\\\]/g, "[^\\]]*\\]");
  return new RegExp(`^${escaped}(?:[.[].*)?$`);
}
