// Judgements of verified data (a rule's attestation checks and validate.cel), kept with the verification result
// they judged, so a repeat admission of a verified image runs no JMESPath and no CEL. The verifier returns the same
// result object for as long as it caches the verification (per digest, policy generation, rule and cluster; a
// reload or a changed key gives a new one), so the result's identity is the key, and what was judged of it is
// gone with it. A judgement is the same for the same result, rule and image name, with two exceptions:
//   - one that read the admission's time (time_since to now) holds for that moment: it is reused for at most
//     CLOCK_REUSE_MS, and only forwards in time;
//   - one ended by a cost limit or the review's deadline depends on the request: it is never kept.
// Cost budgets stay per request: a reused judgement takes what it cost from the request's budget, and is judged
// again when less than that is left (the outcome may then differ, as it would have the first time).
import type { CostBudget } from "../conditions/cost-meter.ts";
import { evaluationPastDeadline } from "../conditions/evaluation-deadline.ts";
import { timeReads } from "../conditions/jmespath-expression.ts";

/** How long a judgement that read the admission's time may stand for a later admission. */
export const CLOCK_REUSE_MS = 1_000;

/** Judgements kept per verification result (one per image name it was admitted as, per rule). */
const MAX_PER_RESULT = 16;

interface Judgement {
  rule: object;
  image: string;
  /** Why the verified data fails the rule; "" when it passes. */
  failure: string;
  /** What judging it cost from the request's budget. */
  cost: number;
  /** The admission's time when the judgement read it; undefined when it did not. */
  readTimeAt: number | undefined;
}

const judgements = new WeakMap<object, Judgement[]>();

/**
 * `judge()`'s answer for this verification result, rule and image name: kept from an earlier admission when it
 * still holds, else judged now (on `budget`) and kept when it may be reused.
 */
export function judgeVerified(
  result: object,
  rule: object,
  image: string,
  now: number | undefined,
  budget: CostBudget,
  judge: () => string | undefined,
): string {
  const kept = judgements.get(result);
  const found = kept?.find((j) => j.rule === rule && j.image === image);
  if (found && found.cost <= budget.remaining && stillHolds(found, now)) {
    budget.remaining -= found.cost;
    return found.failure;
  }
  const before = { remaining: budget.remaining, endings: budget.endings, timeReads: timeReads() };
  const failure = judge() ?? "";
  if (budget.endings !== before.endings || evaluationPastDeadline()) return failure;
  const readTime = timeReads() !== before.timeReads;
  if (readTime && now === undefined) return failure;
  const judgement: Judgement = { rule, image, failure, cost: before.remaining - budget.remaining, readTimeAt: readTime ? now : undefined };
  const list = (kept ?? []).filter((j) => j !== found);
  if (list.length >= MAX_PER_RESULT) list.shift();
  list.push(judgement);
  judgements.set(result, list);
  return failure;
}

function stillHolds(j: Judgement, now: number | undefined): boolean {
  if (j.readTimeAt === undefined) return true;
  return now !== undefined && now >= j.readTimeAt && now - j.readTimeAt < CLOCK_REUSE_MS;
}
