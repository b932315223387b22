// kube-apiserver's bounds on CEL, which Imprimatur applies to every CEL expression a policy holds
// (k8s.io/apiserver/pkg/apis/cel/config.go; the static limit is the one kube-apiserver puts on each CRD validation
// rule), and cel-go's unit costs (common/cost.go), in which both limits are counted.

/** The most one evaluation of one expression may cost (kube-apiserver: about 0.1 s). */
export const PER_CALL_COST_LIMIT = 1_000_000;
/** The most all matchConditions of one policy may cost on one request (kube-apiserver: about 1/4 s). */
export const MATCH_CONDITIONS_COST_BUDGET = 2_500_000;
/** The most the conditions of one policy (`cel:`, `validate.cel`) may cost on one request (about 1 s). */
export const RUNTIME_COST_BUDGET = 10_000_000;
/** The most an expression's estimated worst case may cost, checked when the policy loads. */
export const STATIC_ESTIMATED_COST_LIMIT = 10_000_000;

/**
 * The largest request kube-apiserver accepts, which bounds what an expression can be given: kube-apiserver sizes
 * every list, map and string without a declared bound by it, and so does the estimate here.
 */
export const MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024;
/** A string: the whole request but its quotes. */
export const MAX_STRING_LENGTH = MAX_REQUEST_SIZE_BYTES - 2;
/**
 * A list: (size − "[]") / (smallest item + ","). kube-apiserver takes the item's type's smallest JSON; without a
 * schema the item is taken to be at least 2 bytes (`{}`, `""`, `[]`): only one-digit numbers are shorter.
 */
export const MAX_LIST_ITEMS = Math.floor((MAX_REQUEST_SIZE_BYTES - 2) / (2 + 1));
/** A map: (size − "{}") / (smallest value + `"":` and ","), as kube-apiserver counts additional properties. */
export const MAX_MAP_ENTRIES = Math.floor((MAX_REQUEST_SIZE_BYTES - 2) / (1 + 6));

// cel-go's unit costs.
export const STRING_TRAVERSAL_COST_FACTOR = 0.1;
export const REGEX_STRING_LENGTH_COST_FACTOR = 0.25;
export const LIST_CREATE_BASE_COST = 10;
export const MAP_CREATE_BASE_COST = 30;
export const STRUCT_CREATE_BASE_COST = 40;
