// The deadline of the review under way, for the CEL meter to end an evaluation that runs past it. The engine
// runs each synchronous part of a review (request scoping, the kinds' evaluation) inside withEvaluationDeadline;
// nothing else can run meanwhile on Node's one thread, so the setting belongs to that review alone. Per-policy
// cost budgets bound one policy; this bounds a review however many policies a namespace holds.
// The clock is given by the caller, so the core reads no time itself.

let pastDeadline: (() => boolean) | undefined;

/** Runs `evaluate` with `isPast` as the deadline CEL evaluations check; the previous one is restored after. */
export function withEvaluationDeadline<T>(isPast: () => boolean, evaluate: () => T): T {
  const outer = pastDeadline;
  pastDeadline = isPast;
  try {
    return evaluate();
  } finally {
    pastDeadline = outer;
  }
}

/** Whether the review under way has run past its deadline (false outside one). */
export function evaluationPastDeadline(): boolean {
  return pastDeadline?.() === true;
}

/** The reason an evaluation ended at the review's deadline gives. */
export const PAST_DEADLINE_REASON =
  "evaluation cancelled: the review ran past its deadline (the request's timeout, less the time kept to answer); the failure policy decides";
