import { isAddress, isAddressEqual } from "viem";
import type { QuoteRow } from "../routing/index.js";
import { decodeMppCredential } from "./mpp.js";
import {
  decodeX402Header,
  type HTTPRequestContext,
  malformedPayment,
  type PaymentRequirements,
  type PresentedPayment,
} from "./protocol.js";

// Reading the paid retry and matching it to its quote, before anything touches the chain.
// Headers: PAYMENT-SIGNATURE (x402 v2), X-PAYMENT-SIGNATURE (the spec's alias; no SDK sends it),
// X-PAYMENT (x402 v1, or a v2 payload under the v1 name) and Authorization: Payment (MPP). Exactly one.

export interface DecodedPayment {
  presented: PresentedPayment;
  /** MPP only: why the credential's challenge is not acceptable (402), or null. */
  rejection: string | null;
}

const X402_HEADERS = ["payment-signature", "x-payment-signature", "x-payment"] as const;

/** The payment on this request, decoded (400 when malformed or ambiguous), or undefined when none. */
export function readPayment(request: HTTPRequestContext): DecodedPayment | undefined {
  const x402 = X402_HEADERS.filter((h) => request.adapter.getHeader(h));
  const authorization = request.adapter.getHeader("authorization");
  const mpp = authorization && /^\s*Payment(\s|$)/i.test(authorization) ? authorization : undefined;
  const count = x402.length + (mpp ? 1 : 0);
  if (count === 0) return undefined;
  if (count > 1) throw malformedPayment(x402[0] ?? "authorization", "send exactly one payment header");
  if (mpp) return decodeMppCredential(mpp);
  const header = x402[0]!;
  return { presented: decodeX402Header(header, request.adapter.getHeader(header)!), rejection: null };
}

const same = (a: string, b: string) => isAddress(a) && isAddress(b) && isAddressEqual(a, b);

export interface Mismatch {
  reason: string;
  message: string;
  details: Record<string, unknown>;
}

function wrong(reason: string, field: string, expected: unknown, got: unknown): Mismatch {
  return {
    reason,
    message: `the payment does not match the quote: ${field}`,
    details: { field, expected, got },
  };
}

/**
 * Why a presented payment does not pay this quote, or undefined. What the buyer says it accepted
 * (x402 v2 `accepted`, MPP request) and what it actually signed (the EIP-3009 authorization) must both
 * match the quote: scheme, network, asset, payTo, amount, and the quote itself (extra.quote_id).
 */
export function mismatch(
  p: PresentedPayment,
  requirements: PaymentRequirements,
  quote: QuoteRow,
): Mismatch | undefined {
  if (p.scheme !== "exact") return wrong("unsupported_scheme", "scheme", "exact", p.scheme);
  if (p.network !== requirements.network)
    return wrong("network_mismatch", "network", requirements.network, p.network);
  const acc = p.accepted;
  if (acc) {
    if (!same(acc.asset, requirements.asset))
      return wrong("asset_mismatch", "asset", requirements.asset, acc.asset);
    if (!same(acc.payTo, requirements.payTo))
      return wrong("pay_to_mismatch", "payTo", requirements.payTo, acc.payTo);
    if (acc.amount !== requirements.amount)
      return wrong("amount_mismatch", "amount", requirements.amount, acc.amount);
  }
  if (p.quoteId !== undefined && p.quoteId !== quote.id) {
    return wrong("payment_for_another_quote", "quote_id", quote.id, p.quoteId);
  }
  const a = p.authorization;
  if (!same(a.to, requirements.payTo))
    return wrong("pay_to_mismatch", "authorization.to", requirements.payTo, a.to);
  if (BigInt(a.value) !== BigInt(requirements.amount)) {
    return wrong("amount_mismatch", "authorization.value", requirements.amount, a.value);
  }
  return undefined;
}
