// A Kubernetes Event on the object for what was pinned or could not be, so `kubectl describe` shows it (auditable
// pinning).
import type { AdmissionSubject } from "../core/admission-subject.ts";
import type { PinningMode, PinningOutcome } from "../core/image-policy/digest-pinning.ts";
import type { EventSink } from "../kube/event-recorder.ts";

export function recordPinningEvent(sink: EventSink, mode: PinningMode, subject: AdmissionSubject, outcome: PinningOutcome): void {
  if (outcome.pinned.length === 0 && outcome.failed.length === 0) return;
  const involvedObject = { ...subject.object, namespace: subject.namespace };
  if (outcome.pinned.length > 0) {
    const pinned = mode === "mutate";
    const described = outcome.pinned.map((p) => `${p.field}: ${p.image} → ${p.pinned} (credentials: ${p.credentialSource})`);
    sink.record({
      involvedObject,
      type: "Normal",
      reason: pinned ? "ImagesPinned" : "ImagesResolved",
      message: `${pinned ? "Pinned" : "Resolved"} ${described.join("; ")}`,
    });
  }
  if (outcome.failed.length > 0) {
    sink.record({
      involvedObject,
      type: "Warning",
      reason: "ImageTagUnresolved",
      message: outcome.failed.map((f) => `${f.target.field}: ${f.target.image}: ${f.error}`).join("; "),
    });
  }
}
