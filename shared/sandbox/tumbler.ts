import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import type { Principal } from "../identity/index.js";
import { formatUsdc } from "../kernel/money.js";
import {
  appendEvidence,
  balances,
  generateSelfCustodyWallet,
  paidGate,
  retryTransient,
  topUpFromFaucet,
} from "../money/index.js";

// The sandbox (docs/x402.md "Sandbox (tumbler)"): simulated tUSDC from a faucet, and the production handoff.
// Quotes and execution are in tumbler-execute.ts. tUSDC lives in its own ledger accounts (one currency
// per account, never two in one transaction), so it can never become, pay for or be counted as USDC.

/** The faucet rule, as the API states it. */
export const FAUCET_RULE =
  "POST /api/tumbler/join tops your available tUSDC up to TUMBLER_FAUCET_USDC (default 10), at most once " +
  "per UTC day; when your available tUSDC already reaches that amount nothing is credited and the day's " +
  "top-up is not used. Joining again the same day after a top-up credits nothing and says when the next " +
  "one is possible (the next UTC midnight).";

/** What tUSDC is and is not, said wherever the sandbox answers. */
export const SANDBOX_NOTE =
  "tUSDC is simulated: it is not money, never converts to USDC, cannot be deposited or withdrawn, and " +
  "tUSDC seller earnings are never paid out. The sandbox is economically sandboxed only: opted-in seller " +
  "endpoints really run, with your input.";

/** Ledger key of an agent's faucet grant for one UTC day: the day's one top-up. */
export const faucetKey = (agentId: string, utcDay: string) => `tumbler:faucet:${agentId}:${utcDay}`;

function nextUtcMidnight(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

/**
 * POST /api/tumbler/join: tops the agent's available tUSDC up from the sandbox faucet under the faucet
 * rule (FAUCET_RULE). Concurrent joins of one agent credit once: the day's grant is one ledger
 * transaction key, looked up under the agent's account lock. The grant's evidence row is simulated.
 */
export async function joinTumbler(agentId: string, now = new Date()) {
  const targetMicros = getConfig().tumblerFaucetMicros;
  const utcDay = now.toISOString().slice(0, 10);
  const topUp = await retryTransient(() =>
    db().transaction(async (trx) => {
      const result = await topUpFromFaucet(
        {
          agentId,
          targetMicros,
          idempotencyKey: faucetKey(agentId, utcDay),
          reference: { type: "tumbler_faucet", id: agentId },
          metadata: { utc_day: utcDay, simulated: true },
        },
        trx,
      );
      if (result.grant && !result.grant.replayed) {
        await appendEvidence(trx, {
          agent_id: agentId,
          subject_type: "tumbler_faucet",
          subject_id: result.grant.transactionId,
          state: "deposit",
          source: "tumbler_faucet",
          source_ref: result.grant.transactionId,
          amount_micros: result.creditedMicros,
          currency: "tUSDC",
          details: {
            simulated: true,
            rail: "tumbler",
            utc_day: utcDay,
            target_micros: targetMicros.toString(),
          },
        });
      }
      return result;
    }),
  );
  const held = (await balances(agentId, "tUSDC")).held;
  const grantedToday = topUp.grant !== null;
  const credited = topUp.creditedMicros > 0n;
  return {
    agent_id: agentId,
    simulated: true as const,
    currency: "tUSDC" as const,
    credited: credited,
    credited_tusdc: formatUsdc(topUp.creditedMicros),
    balance: { available_tusdc: formatUsdc(topUp.availableMicros), held_tusdc: formatUsdc(held) },
    faucet: {
      rule: FAUCET_RULE,
      target_tusdc: formatUsdc(targetMicros),
      period: "utc_day" as const,
      utc_day: utcDay,
      topped_up_today: grantedToday,
      ledger_transaction_id: topUp.grant?.transactionId ?? null,
      next_top_up_at: (grantedToday ? nextUtcMidnight(now) : now).toISOString(),
    },
    message: credited
      ? `Credited ${formatUsdc(topUp.creditedMicros)} tUSDC (simulated). Your next top-up is possible from the next UTC midnight.`
      : grantedToday
        ? "You were already topped up today (UTC); nothing more was credited. Join again after the next UTC midnight."
        : `Your available tUSDC already reaches ${formatUsdc(targetMicros)}; nothing was credited and today's top-up is still unused.`,
    note: SANDBOX_NOTE,
    next_steps: [
      "GET /api/tumbler/execute/match?task=<task> → a quote for a sandbox-enabled listing",
      "POST /api/tumbler/execute {quote_id, input} → runs the seller's endpoint, charged in tUSDC",
      "POST /api/tumbler/transition → what changes for real (USDC) calls",
    ],
  };
}

/**
 * POST /api/tumbler/transition: the production handoff. Explains what changes (tUSDC stays behind; real
 * calls need USDC deposits, the paid-execution gate and the same API key) and, when asked, generates a
 * self-custody wallet through the wallet helper — its private key shown once, never stored or logged.
 */
export async function transitionToProduction(principal: Principal, createWallet: boolean, requestId: string) {
  const [sandbox, gate] = await Promise.all([balances(principal.agentId, "tUSDC"), paidGate()]);
  const wallet = createWallet ? await generateSelfCustodyWallet(principal.agentId, requestId) : null;
  return {
    agent_id: principal.agentId,
    sandbox: {
      currency: "tUSDC" as const,
      simulated: true as const,
      available_tusdc: formatUsdc(sandbox.available),
      held_tusdc: formatUsdc(sandbox.held),
      seller_payable_tusdc: formatUsdc(sandbox.payable),
      what_happens_to_it:
        "Nothing moves: tUSDC stays in the sandbox and never converts to USDC, in either direction. You can " +
        "keep using /api/tumbler/* alongside production.",
    },
    what_changes: [
      "Money: real calls are paid in USDC from your available balance, funded by deposits on the settlement " +
        "chain (GET /api/wallet/pricing, POST /api/wallet/purchase, then POST /api/wallet/purchase/verify " +
        "{tx_hash}); tUSDC cannot pay for them.",
      "The paid-execution gate: read GET /market.json first, every time. While availability does not report " +
        "paid execution enabled, do not call paid routes, sign payments or send funds; free execution still works.",
      "Routes: POST /api/execute (router with fallback), GET /api/execute/match, POST /api/invoke/{listing_id}; " +
        "every listing that answers the task is eligible, not only sandbox-enabled ones.",
      "Identity: the same API key and agent id; nothing to register again.",
      "Sellers are paid: 97 % of each captured USDC price goes to the seller, 3 % to the platform.",
    ],
    production: {
      paid_execution: gate.enabled ? ("enabled" as const) : ("temporarily_unavailable" as const),
      reason: gate.reason,
      read_first: "/market.json",
      api_key: "unchanged: use the key you used in the sandbox",
      steps: [
        "GET /market.json and check availability.paid_execution",
        wallet
          ? "Store the private_key below; it is never shown again"
          : "POST /api/crypto/wallet (or /api/tumbler/transition {create_wallet: true}) for a self-custody wallet, or POST /api/crypto/connect to link yours",
        "POST /api/wallet/purchase {amount_usdc} for the exact deposit transfer, send it, then POST /api/wallet/purchase/verify {tx_hash}",
        "POST /api/execute {task, input} with the same API key",
      ],
    },
    wallet,
    wallet_null_reason: wallet ? null : "create_wallet_not_requested",
    note: SANDBOX_NOTE,
  };
}
