// The cost of one evaluation of a policy's expression (CEL or JMESPath), counted while it runs and ended when it
// passes a limit: one evaluation may cost PER_CALL_COST_LIMIT, and the evaluations that share a budget (the
// matchConditions of one policy on one request, or the conditions of one policy) what is left of it. Whatever a
// tenant writes is bounded this way, and by the review's deadline, which the meter reads as it counts.
import { PER_CALL_COST_LIMIT } from "./cel-cost-limits.ts";
import { evaluationPastDeadline, PAST_DEADLINE_REASON } from "./evaluation-deadline.ts";

/** What several evaluations may cost together: the matchConditions, or the conditions, of one policy on one request. */
export class CostBudget {
  readonly limit: number;
  /** Whose budget, for the reason: "the matchConditions of one policy". */
  readonly spentBy: string;
  remaining: number;
  /** Evaluations on this budget ended by a limit or the deadline: what they gave depends on this request, not only on their inputs. */
  endings = 0;

  constructor(limit: number, spentBy: string) {
    this.limit = limit;
    this.spentBy = spentBy;
    this.remaining = limit;
  }
}

/** The count of one evaluation; `exceeded` says why it was ended, when it was. */
export class CostMeter {
  spent = 0;
  exceeded: string | undefined;
  readonly #limit: number;
  readonly #budget: CostBudget | undefined;
  #nextDeadlineCheck = DEADLINE_CHECK_UNITS;

  constructor(budget?: CostBudget) {
    this.#budget = budget;
    this.#limit = Math.min(PER_CALL_COST_LIMIT, budget?.remaining ?? PER_CALL_COST_LIMIT);
  }

  charge(units: number): void {
    this.spent += units;
    // The review's deadline is read every DEADLINE_CHECK_UNITS units: a clock read per step would cost more
    // than the step, and that many units take well under a millisecond.
    if (this.spent >= this.#nextDeadlineCheck) {
      this.#nextDeadlineCheck = this.spent + DEADLINE_CHECK_UNITS;
      if (evaluationPastDeadline()) {
        this.exceeded = PAST_DEADLINE_REASON;
        if (this.#budget) this.#budget.endings++;
        throw new CostLimitExceeded(this.exceeded);
      }
    }
    if (this.spent <= this.#limit) return;
    this.exceeded =
      this.#budget && this.#budget.remaining < PER_CALL_COST_LIMIT
        ? `running out of cost budget: ${this.#budget.spentBy} may cost at most ${this.#budget.limit} per request, and no further expression is evaluated`
        : `operation cancelled: actual cost limit exceeded: one evaluation may cost at most ${PER_CALL_COST_LIMIT}`;
    if (this.#budget) this.#budget.endings++;
    throw new CostLimitExceeded(this.exceeded);
  }

  /** Takes what this evaluation cost from the budget it shares. */
  settle(): void {
    if (this.#budget) this.#budget.remaining -= this.spent;
  }
}

class CostLimitExceeded extends Error {}

const DEADLINE_CHECK_UNITS = 4096;
