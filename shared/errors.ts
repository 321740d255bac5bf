/**
 * The spec's failure-mode table as data (interface-spec "Errors"), plus the few codes the spec leaves
 * open that every HTTP service needs. The error middleware is the only place these become HTTP.
 */
export interface ErrorSpec {
  status: number;
  /** Whether repeating the same request unchanged may succeed: what the envelope says. */
  retryable: boolean;
  /**
   * The spec table's value where it differs from `retryable` (docs/api.md "Errors"): published in the
   * listing record's failure_modes and the OpenAPI x-error-codes beside the envelope's value.
   */
  specRetryable?: boolean;
  buyerAction: string;
  fallback: string;
  /** Seconds for Retry-After, where a retry after a pause is the right move. */
  retryAfterSeconds?: number;
}

export const ERRORS = {
  // The spec's table, verbatim but for UNAUTHORIZED's retryable (see there).
  LISTING_NOT_FOUND: {
    status: 404,
    retryable: false,
    buyerAction: "choose_alternative_provider",
    fallback: "call_execute_match",
  },
  // The spec marks it retryable (after its buyer action, a valid key); the same request without one never
  // succeeds, and clients retry retryable errors automatically, so the envelope says false.
  UNAUTHORIZED: {
    status: 401,
    retryable: false,
    specRetryable: true,
    buyerAction: "supply_valid_bearer_token",
    fallback: "quickstart_or_refresh_api_key",
  },
  PAYMENT_REQUIRED: {
    status: 402,
    retryable: true,
    buyerAction: "fund_wallet_or_sign_x402_retry",
    fallback: "use_free_listing_or_match_alternative",
  },
  WALLET_LIMIT_EXCEEDED: {
    status: 429,
    retryable: false,
    buyerAction: "raise_limit_or_request_supervisor_approval",
    fallback: "call_execute_with_lower_max_cost",
  },
  RATE_LIMITED: {
    status: 429,
    retryable: true,
    buyerAction: "respect_retry_after_or_reduce_request_rate",
    fallback: "retry_later",
    retryAfterSeconds: 1,
  },
  SCHEMA_VALIDATION_FAILED: {
    status: 400,
    retryable: false,
    buyerAction: "repair_input_against_input_schema",
    fallback: "inspect_input_contract",
  },
  POLICY_BLOCKED: {
    status: 403,
    retryable: false,
    buyerAction: "request_supervisor_approval_or_change_policy",
    fallback: "choose_allowed_provider",
  },
  LISTING_NOT_INVOCABLE: {
    status: 422,
    retryable: false,
    buyerAction: "choose_alternative_provider",
    fallback: "call_execute_match",
  },
  PROVIDER_UNAVAILABLE: {
    status: 503,
    retryable: true,
    buyerAction: "retry_with_idempotency_key_or_call_execute_for_fallback",
    fallback: "call_execute_match",
    retryAfterSeconds: 1,
  },
  PROVIDER_FAILED: {
    status: 502,
    retryable: true,
    buyerAction: "retry_or_select_alternative_provider",
    fallback: "call_execute_match",
  },
  TIMEOUT: {
    status: 504,
    retryable: true,
    buyerAction: "retry_with_idempotency_key_or_reduce_request_size",
    fallback: "call_execute_match",
  },
  RECEIPT_UNAVAILABLE: {
    status: 503,
    retryable: true,
    buyerAction: "retry_receipt_lookup_or_use_invocation_status",
    fallback: "check_status_endpoint",
    retryAfterSeconds: 1,
  },
  // Codes the spec does not name (docs/api.md "Error envelope").
  TEMPORARILY_UNAVAILABLE: {
    status: 503,
    retryable: true,
    buyerAction: "read_market_json_before_any_paid_retry",
    fallback: "use_free_listing",
    retryAfterSeconds: 30,
  },
  IDEMPOTENCY_KEY_IN_USE: {
    status: 409,
    retryable: true,
    buyerAction: "wait_then_retry_with_same_idempotency_key",
    fallback: "check_status_endpoint",
    retryAfterSeconds: 1,
  },
  IDEMPOTENCY_KEY_REUSED: {
    status: 422,
    retryable: false,
    buyerAction: "use_a_new_idempotency_key_for_a_new_payload",
    fallback: "none",
  },
  CONFLICT: {
    status: 409,
    retryable: false,
    buyerAction: "read_the_current_state_before_retrying",
    fallback: "none",
  },
  QUOTE_NOT_USABLE: {
    status: 409,
    retryable: false,
    buyerAction: "request_a_new_quote",
    fallback: "call_execute_match_for_a_new_quote",
  },
  WALLET_CHALLENGE_INVALID: {
    status: 400,
    retryable: false,
    buyerAction: "request_a_new_challenge_and_sign_it",
    fallback: "post_crypto_connect_with_wallet_address_only",
  },
  WALLET_SIGNATURE_INVALID: {
    status: 400,
    retryable: false,
    buyerAction: "sign_the_challenge_message_with_the_wallet_key",
    fallback: "generate_a_wallet_with_crypto_wallet",
  },
  WALLET_NOT_LINKED: {
    status: 422,
    retryable: false,
    buyerAction: "link_a_wallet_with_crypto_connect",
    fallback: "generate_a_wallet_with_crypto_wallet",
  },
  // An agent buying its own listing would inflate the counters, success rates and ranking that buyers
  // rely on (docs/routing.md "Self-dealing"), so it is refused and its own listings never route to it.
  SELF_DEALING_FORBIDDEN: {
    status: 403,
    retryable: false,
    buyerAction: "choose_a_listing_of_another_seller",
    fallback: "call_execute_match",
  },
  NOT_FOUND: { status: 404, retryable: false, buyerAction: "check_the_identifier", fallback: "none" },
  METHOD_NOT_ALLOWED: {
    status: 405,
    retryable: false,
    buyerAction: "use_a_documented_method",
    fallback: "read_openapi",
  },
  REQUEST_TOO_LARGE: { status: 413, retryable: false, buyerAction: "reduce_request_size", fallback: "none" },
  // Answered by the HTTP server itself, before any route: a request line or headers over Node's limit.
  HEADERS_TOO_LARGE: {
    status: 431,
    retryable: false,
    buyerAction: "shorten_the_url_or_headers",
    fallback: "send_long_values_in_a_json_body",
  },
  SERVICE_UNAVAILABLE: {
    status: 503,
    retryable: true,
    buyerAction: "retry_later",
    fallback: "check_api_health",
    retryAfterSeconds: 5,
  },
  INTERNAL_ERROR: {
    status: 500,
    retryable: true,
    buyerAction: "retry_with_idempotency_key",
    fallback: "check_status_endpoint",
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[];

export class AppError extends Error {
  readonly spec: ErrorSpec;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    /** Protocol headers the answer must carry (an x402 402 carries its challenge in PAYMENT-REQUIRED). */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = "AppError";
    this.spec = ERRORS[code];
  }
}

/** One validation problem, as reported in details.violations. */
export interface Violation {
  path: string;
  message: string;
}

export function validationError(message: string, violations: Violation[]): AppError {
  return new AppError("SCHEMA_VALIDATION_FAILED", message, { violations });
}

/** Paid work is refused with this until the money issue lands the gate (DESIGN §5). */
export function paidExecutionUnavailable(reason: string): AppError {
  return new AppError("TEMPORARILY_UNAVAILABLE", "paid execution is temporarily unavailable", {
    status: "temporarily_unavailable",
    reason,
    read_first: "/market.json",
  });
}
