import { failedOrStuckDeposits, failedOrStuckPayouts } from "../money/index.js";
import { failedOrStuckSettlements } from "../x402/index.js";

/** What the money console lists: failed or stuck payouts, x402 settlements and deposits, with evidence. */
export async function moneyConsole(options: { stuckSeconds: number; limit: number }) {
  const [payouts, settlements, deposits] = await Promise.all([
    failedOrStuckPayouts(options.stuckSeconds, options.limit),
    failedOrStuckSettlements(options.stuckSeconds, options.limit),
    failedOrStuckDeposits(options.stuckSeconds, options.limit),
  ]);
  return {
    stuck_after_seconds: options.stuckSeconds,
    payouts,
    settlements,
    deposits,
    generated_at: new Date().toISOString(),
  };
}
