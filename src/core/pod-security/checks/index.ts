// Every Pod Security Admission check, in PSA's registry order (policy/registry.go): the baseline check IDs
// sorted, then the restricted ones sorted. The order is the order of a denial's reasons.
import type { PsaCheck } from "./check-support.ts";
import { appArmorProfileCheck } from "./app-armor-profile.ts";
import { capabilitiesBaselineCheck } from "./capabilities-baseline.ts";
import { hostNamespacesCheck } from "./host-namespaces.ts";
import { hostPathVolumesCheck } from "./host-path-volumes.ts";
import { hostPortsCheck } from "./host-ports.ts";
import { hostProbesAndHostLifecycleCheck } from "./host-probes-and-host-lifecycle.ts";
import { privilegedCheck } from "./privileged.ts";
import { procMountCheck } from "./proc-mount.ts";
import { seLinuxOptionsCheck } from "./se-linux-options.ts";
import { seccompProfileBaselineCheck } from "./seccomp-profile-baseline.ts";
import { sysctlsCheck } from "./sysctls.ts";
import { windowsHostProcessCheck } from "./windows-host-process.ts";
import { allowPrivilegeEscalationCheck } from "./allow-privilege-escalation.ts";
import { capabilitiesRestrictedCheck } from "./capabilities-restricted.ts";
import { procMountRestrictedCheck } from "./proc-mount-restricted.ts";
import { restrictedVolumesCheck } from "./restricted-volumes.ts";
import { runAsNonRootCheck } from "./run-as-non-root.ts";
import { runAsUserCheck } from "./run-as-user.ts";
import { seccompProfileRestrictedCheck } from "./seccomp-profile-restricted.ts";

export const PSA_CHECKS: readonly PsaCheck[] = [
  // Baseline.
  appArmorProfileCheck,
  capabilitiesBaselineCheck,
  hostNamespacesCheck,
  hostPathVolumesCheck,
  hostPortsCheck,
  hostProbesAndHostLifecycleCheck,
  privilegedCheck,
  procMountCheck,
  seLinuxOptionsCheck,
  seccompProfileBaselineCheck,
  sysctlsCheck,
  windowsHostProcessCheck,
  // Restricted.
  allowPrivilegeEscalationCheck,
  capabilitiesRestrictedCheck,
  procMountRestrictedCheck,
  restrictedVolumesCheck,
  runAsNonRootCheck,
  runAsUserCheck,
  seccompProfileRestrictedCheck,
];
