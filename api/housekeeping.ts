import { purgeExpiredIdempotencyKeys } from "../shared/domain/idempotency.js";
import type { Housekeeping } from "../shared/domain/outbox.js";
import { purgeStaleQuotes } from "../shared/domain/x402-challenge.js";

/**
 * The clean-ups the outbox sweeper runs now and then in the web process. Composed here, at the top,
 * because the outbox sits below the contexts that own these rows (docs/architecture.md).
 */
export const HOUSEKEEPING: Housekeeping[] = [purgeExpiredIdempotencyKeys, purgeStaleQuotes];
