/** The service's error envelope (docs/api.md "Errors"). */
export interface ErrorEnvelope {
  success: false;
  error: {
    code: string;
    message: string;
    retryable: boolean;
    buyer_action: string;
    fallback: string;
    request_id: string;
    details?: Record<string, unknown>;
  };
}

/** An error answer of the service, or a failure to reach it (code NETWORK_ERROR or TIMEOUT, retryable). */
export class AgentMarketError extends Error {
  readonly code: string;
  readonly status: number | null;
  readonly retryable: boolean;
  /** Seconds to wait before retrying, from Retry-After or details.retry_after_seconds, when given. */
  readonly retryAfter: number | null;
  readonly requestId: string | null;
  readonly envelope: ErrorEnvelope | null;

  constructor(args: {
    code: string;
    message: string;
    status: number | null;
    retryable: boolean;
    retryAfter?: number | null;
    envelope?: ErrorEnvelope | null;
    cause?: unknown;
  }) {
    super(args.message, { cause: args.cause });
    this.name = "AgentMarketError";
    this.code = args.code;
    this.status = args.status;
    this.retryable = args.retryable;
    this.retryAfter = args.retryAfter ?? null;
    this.envelope = args.envelope ?? null;
    this.requestId = args.envelope?.error.request_id ?? null;
  }
}
