// A review the server cannot judge in time (too many in flight, or read after its deadline) gets the failure
// policy's answer at once, as a review whose backends do not answer does: denied failing closed, admitted with
// the fail-open trace (a warning, the annotation, an audit record) failing open. Answering now, with the reason,
// is better than answering after the apiserver stopped waiting: its failurePolicy would decide without a reason.
import { admittedFailingOpen, deny, type Decision } from "./decision.ts";

export function overloadDecision(reason: string, failOpen: boolean): Decision {
  if (!failOpen)
    return deny([{ policy: "imprimatur", rule: "overload", message: `${reason}; not judged, and denied because the server fails closed` }], {
      auditAnnotations: { decision: "denied" },
    });
  return admittedFailingOpen([`admitted without being judged: ${reason}; the server fails open`], [{ backend: "imprimatur/overload", error: reason }]);
}
