import type { Housekeeping } from "../shared/outbox/index.js";
import { purgeExpiredIdempotencyKeys } from "../shared/routing/index.js";
import { abandonStaleOrders } from "../shared/verification/index.js";
import { purgeStaleQuotes } from "../shared/x402/index.js";

/**
 * The clean-ups the outbox sweeper runs now and then in the web process. Composed here, at the top,
 * because the outbox sits below the contexts that own these rows (docs/architecture.md).
 */
export const HOUSEKEEPING: Housekeeping[] = [
  purgeExpiredIdempotencyKeys,
  purgeStaleQuotes,
  abandonStaleOrders,
];
