// Why a JMESPath or CEL expression cannot load, or an evaluation cannot give a value, by code. At load time the
// policy's error names the field; at evaluation the message is the failed condition's reason (the failure policy
// decides).
import { ImprimaturError } from "../../errors/imprimatur-error.ts";

export type ConditionErrorCode =
  /** A JMESPath expression that does not parse. */
  | "invalid-jmespath"
  /** A CEL expression that does not parse. */
  | "invalid-cel"
  /** A CEL expression whose estimated worst-case cost passes kube-apiserver's limit. */
  | "cost-limit"
  /** A JMESPath evaluation ended when its cost passed the limit of one evaluation or its policy's budget. */
  | "cost-limit-exceeded"
  /** A JMESPath evaluation ended, or not started, past the review's deadline. */
  | "past-deadline"
  /** A matches() pattern RE2 refuses. */
  | "invalid-regex"
  /** A function argument out of its range: a negative count or width, a pad of more than one character. */
  | "invalid-argument"
  /** A string function whose result would pass the longest string one may build. */
  | "result-too-long"
  /** A replace() that would do more than its bounded work. */
  | "work-limit"
  /** time_since: the start time is not in the data. */
  | "value-not-found"
  /** time_since: a text that is not an RFC 3339 time. */
  | "invalid-time"
  /** time_since to now, evaluated without the evaluation's time. */
  | "no-evaluation-time";

export class ConditionError extends ImprimaturError<ConditionErrorCode> {}
