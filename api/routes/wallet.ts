import { type Static, Type } from "@sinclair/typebox";
import {
  depositStatus,
  depositView,
  purchaseInstructions,
  verifyDeposit,
} from "../../shared/domain/deposits.js";
import { walletPricing } from "../../shared/domain/pricing.js";
import { walletView } from "../../shared/domain/wallet.js";
import {
  DepositWithEvidence,
  Pricing,
  PurchaseBody,
  PurchaseInstructions,
  VerifyBody,
  VerifyResult,
  WalletView,
} from "../../shared/schemas/wallet.js";
import { defineRoute, Reply } from "../route.js";

// Wallet and funding (README "Wallet and funding"): the wallet read, pricing, and deposits.

const walletRoute = defineRoute({
  method: "get",
  path: "/api/wallet",
  tag: "wallet",
  summary: "Balances, linked wallet, deposits and funding status (readable in every availability state)",
  auth: "key",
  responses: { 200: WalletView },
  errors: ["UNAUTHORIZED"],
  async handle(ctx) {
    return walletView(ctx.state.auth!.agentId);
  },
});

const pricingRoute = defineRoute({
  method: "get",
  path: "/api/wallet/pricing",
  tag: "wallet",
  summary: "Prices, the 97/3 split and its exact fee rule, deposit terms and the chain descriptor",
  auth: "none",
  responses: { 200: Pricing },
  async handle() {
    return walletPricing();
  },
});

const purchaseRoute = defineRoute({
  method: "post",
  path: "/api/wallet/purchase",
  tag: "wallet",
  summary: "Paid route: the exact USDC transfer that funds your balance (a deposit request)",
  description:
    "Answers 503 TEMPORARILY_UNAVAILABLE while paid execution is not enabled (read GET /market.json first). " +
    "Needs a linked wallet (422 WALLET_NOT_LINKED). Nothing is charged or recorded: send the transfer, then " +
    "POST /api/wallet/purchase/verify {tx_hash}.",
  auth: "key",
  body: PurchaseBody,
  responses: { 200: PurchaseInstructions },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "TEMPORARILY_UNAVAILABLE", "WALLET_NOT_LINKED"],
  async handle(ctx, { body }: { body: Static<typeof PurchaseBody> }) {
    return purchaseInstructions(ctx.state.auth!.agentId, body.amount_usdc);
  },
});

const verifyRoute = defineRoute({
  method: "post",
  path: "/api/wallet/purchase/verify",
  tag: "wallet",
  summary: "Claim a USDC transfer to the platform by its tx hash; it is credited once confirmed",
  description:
    "202 with the deposit (pending/confirming) and Location: its status URL; 200 when the deposit is already " +
    "final. The same agent may send the same hash again (idempotent, replayed: true); a hash claimed by " +
    "another agent is 409 CONFLICT. 503 while paid execution is not enabled.",
  auth: "key",
  body: VerifyBody,
  responses: { 200: VerifyResult, 202: VerifyResult },
  errors: [
    "UNAUTHORIZED",
    "SCHEMA_VALIDATION_FAILED",
    "TEMPORARILY_UNAVAILABLE",
    "WALLET_NOT_LINKED",
    "CONFLICT",
  ],
  async handle(ctx, { body }: { body: Static<typeof VerifyBody> }) {
    const { deposit, created } = await verifyDeposit(
      ctx.state.auth!.agentId,
      body.tx_hash as `0x${string}`,
      ctx.state.requestId,
    );
    const view = depositView(deposit);
    const open = deposit.status === "pending" || deposit.status === "confirming";
    const message = open
      ? "Recorded; the deposit is credited after its confirmations. Poll status_url."
      : `This deposit is ${deposit.status}.`;
    return new Reply(
      open ? 202 : 200,
      { ...view, replayed: !created, message },
      open ? { Location: view.status_url } : {},
    );
  },
});

const DepositParams = Type.Object({ deposit_id: Type.String({ maxLength: 100 }) });

const depositRoute = defineRoute({
  method: "get",
  path: "/api/wallet/deposits/{deposit_id}",
  tag: "wallet",
  summary: "One of your deposits with its evidence (another agent's reads as 404)",
  auth: "key",
  params: DepositParams,
  responses: { 200: DepositWithEvidence },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "NOT_FOUND"],
  async handle(ctx, { params }: { params: Static<typeof DepositParams> }) {
    return depositStatus(ctx.state.auth!.agentId, params.deposit_id);
  },
});

export const walletRoutes = [walletRoute, pricingRoute, purchaseRoute, verifyRoute, depositRoute];
