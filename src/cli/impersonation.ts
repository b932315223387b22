// The user `check` and `imprimatur test` create objects as, from kubectl's --as and --as-group, with the groups
// kube-apiserver's impersonation adds (k8s.io/apiserver endpoints/filters/impersonation.go), so that policies'
// subjects and conditions see what the webhooks would see for `kubectl --as … create`:
//   - a service account named without groups gets system:serviceaccounts and system:serviceaccounts:NAMESPACE;
//   - any user but system:anonymous gets system:authenticated, unless system:authenticated or
//     system:unauthenticated is among its groups; system:anonymous gets system:unauthenticated.
import type { RequestUser } from "../core/admission-subject.ts";

const SERVICE_ACCOUNT = /^system:serviceaccount:([^:]+):([^:]+)$/;

export function impersonatedUser(username: string, groups: readonly string[]): RequestUser {
  const all = [...groups];
  const serviceAccount = SERVICE_ACCOUNT.exec(username);
  if (serviceAccount && groups.length === 0) all.push("system:serviceaccounts", `system:serviceaccounts:${serviceAccount[1]}`);
  if (username !== "system:anonymous") {
    if (!all.includes("system:authenticated") && !all.includes("system:unauthenticated")) all.push("system:authenticated");
  } else if (!all.includes("system:unauthenticated")) all.push("system:unauthenticated");
  return { username, groups: all };
}
