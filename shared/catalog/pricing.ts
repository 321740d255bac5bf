import { formatUsdc } from "../kernel/money.js";
import {
  chainDescriptor,
  funding,
  MAX_PURCHASE_MICROS,
  MIN_PURCHASE_MICROS,
  PLATFORM_FEE_PERCENT,
  PLATFORM_FEE_RATE,
  paidGate,
  platformSplit,
} from "../money/index.js";
import { TOOL_IDS, TOOLS, type ToolId } from "../tools/index.js";
import { BOND_MICROS } from "./seller.js";

// GET /api/wallet/pricing: every price the platform charges and how a payment splits, in one read.

/** The spec's tool prices (USDC per call), in micro-USDC: the tools registry's (docs/tools.md). */
export const TOOL_PRICES_MICROS: Readonly<Record<ToolId, bigint>> = Object.fromEntries(
  TOOL_IDS.map((id) => [id, TOOLS[id].priceMicros]),
) as Record<ToolId, bigint>;

/** A verification order, and each monitoring run, costs this (spec "Verification records"). */
export const VERIFICATION_PRICE_MICROS = 5_000_000n;

const EXAMPLE_MICROS = 20_000n;

/** The pricing read: currency, split rule, tool and verification prices, deposit terms, the chain. */
export async function walletPricing() {
  const example = platformSplit(EXAMPLE_MICROS);
  const gate = await paidGate();
  return {
    currency: "USDC" as const,
    decimals: 6,
    amounts: "decimal strings with 6 decimals; 1 USDC = 1000000 atomic units (micro-USDC)",
    platform_fee_rate: PLATFORM_FEE_RATE,
    split: {
      seller: 1 - PLATFORM_FEE_RATE,
      platform: PLATFORM_FEE_RATE,
      fee_rule: `fee_micros = floor(amount_micros × ${PLATFORM_FEE_PERCENT} / 100); seller_micros = amount_micros − fee_micros`,
      rounding: "the fee rounds down to the micro-USDC, so seller + fee always equals the amount",
      example: {
        amount_usdc: formatUsdc(EXAMPLE_MICROS),
        fee_usdc: formatUsdc(example.feeMicros),
        seller_usdc: formatUsdc(example.sellerMicros),
      },
    },
    listings: {
      pricing_model: "per_call",
      price_field: "price_per_unit (USDC) on each listing in GET /api/capabilities; 0 means free",
      charged: "only for a succeeded call; a failed call is released in full",
    },
    tools: Object.entries(TOOL_PRICES_MICROS).map(([service, micros]) => ({
      service,
      price_usdc: formatUsdc(micros),
      unit: "per call",
    })),
    verification: {
      price_usdc: formatUsdc(VERIFICATION_PRICE_MICROS),
      unit: "per order and per monitoring run",
      note: "payment buys testing, never a verdict",
    },
    seller_bond_usdc: formatUsdc(BOND_MICROS),
    deposits: {
      minimum_purchase_usdc: formatUsdc(MIN_PURCHASE_MICROS),
      maximum_purchase_usdc: formatUsdc(MAX_PURCHASE_MICROS),
      minimum_note:
        "the limits apply to a purchase request; every USDC transfer that arrives from your linked wallet is credited",
      credited_to: "available balance (GET /api/wallet)",
    },
    funding: funding(gate),
    chain: await chainDescriptor(),
  };
}
