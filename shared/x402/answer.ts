import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { formatUsdc, micros } from "../kernel/money.js";
import { listEvidence } from "../money/index.js";
import type { InvocationSummary } from "../routing/index.js";
import { encodeMppReceipt } from "./mpp.js";
import { awaitX402Settlement } from "./payments.js";
import { encodeSettleResponse, type PresentedPayment } from "./protocol.js";
import type { X402PaymentRow } from "./store/payments.js";
import { paymentView, settlementView, x402StatusUrl } from "./views.js";

/** A gateway answer that is not an error: status, protocol headers, body. */
export interface X402Answer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/**
 * The 200 of a paid call: the result, and the settlement as far as it has evidence after a bounded wait
 * for the settlement job. PAYMENT-RESPONSE (and X-PAYMENT-RESPONSE for an X-PAYMENT request) only once a
 * settlement transaction exists; Payment-Receipt for MPP, naming the transaction only then too.
 */
export async function x402Answer(
  presented: PresentedPayment,
  invocation: InvocationSummary,
  payment: X402PaymentRow,
): Promise<X402Answer> {
  const settled = await awaitX402Settlement(payment.id, getConfig().x402SettlementWaitMs);
  const settlement = settlementView(settled, await listEvidence(db(), "x402_payment", payment.id));
  const headers: Record<string, string> = { "Cache-Control": "no-store" };
  const onChain = settlement.state === "submitted" || settlement.state === "confirmed";
  if (onChain && settlement.transaction) {
    const value = encodeSettleResponse({
      transaction: settlement.transaction,
      network: settled.network,
      payer: settled.payer,
      amountMicros: settled.amount_micros,
      state: settlement.state as "submitted" | "confirmed",
      blockNumber: settlement.block_number,
    });
    headers["PAYMENT-RESPONSE"] = value;
    if (presented.header === "x-payment") headers["X-PAYMENT-RESPONSE"] = value;
  }
  if (presented.protocol === "mpp" && presented.challengeId) {
    headers["Payment-Receipt"] = encodeMppReceipt({
      challengeId: presented.challengeId,
      quoteId: settled.quote_id,
      state: onChain ? (settlement.state as "submitted" | "confirmed") : "pending_submission",
      reference: onChain ? settlement.transaction : null,
    });
  }
  return {
    status: 200,
    headers,
    body: {
      success: true,
      output: invocation.output,
      invocation_id: invocation.id,
      status: invocation.status,
      receipt_id: invocation.receipt_id,
      provider: {
        listing_id: invocation.served_listing_id ?? invocation.listing_id,
        name: invocation.listing_name,
        slug: invocation.listing_slug,
      },
      cost: {
        amount_usdc: formatUsdc(micros(settled.amount_micros)),
        amount_atomic: settled.amount_micros,
        currency: "USDC",
      },
      payment: paymentView(settled),
      settlement,
      status_url: x402StatusUrl(invocation.id),
    },
  };
}
