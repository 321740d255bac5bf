import { type Static, Type } from "@sinclair/typebox";
import { walletPricing } from "../../shared/catalog/index.js";
import {
  AuthorizeBody,
  authorizeDeposit,
  DepositWithEvidence,
  depositAnswer,
  depositStatus,
  Pricing,
  PurchaseBody,
  PurchaseInstructions,
  requestDeposit,
  VerifyBody,
  type DepositVerification as VerifyOutcome,
  VerifyResult,
  verifyDeposit,
  WalletView,
  walletView,
} from "../../shared/money/index.js";
import { defineRoute, Reply } from "../route.js";

// Wallet and funding (docs/payments.md "Wallet and funding"): the wallet read, pricing, and deposits.

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
  summary: "Paid route: the exact USDC transfer that funds your balance, or a gasless authorization to sign",
  description:
    "Answers 503 TEMPORARILY_UNAVAILABLE while paid execution is not enabled (read GET /market.json first). " +
    "Needs a linked wallet (422 WALLET_NOT_LINKED). method transfer (default): nothing is charged or " +
    "recorded; send the transfer, then POST /api/wallet/purchase/verify {tx_hash}. method authorization: a " +
    "stored EIP-3009 TransferWithAuthorization to sign (typed_data); POST /api/wallet/purchase/authorize " +
    "{deposit_request_id, signature} and the platform submits it and pays the gas.",
  auth: "key",
  body: PurchaseBody,
  responses: { 200: PurchaseInstructions },
  errors: [
    "UNAUTHORIZED",
    "SCHEMA_VALIDATION_FAILED",
    "TEMPORARILY_UNAVAILABLE",
    "WALLET_NOT_LINKED",
    "RATE_LIMITED",
  ],
  async handle(ctx, { body }: { body: Static<typeof PurchaseBody> }) {
    return requestDeposit(ctx.state.auth!.agentId, body, ctx.state.requestId);
  },
});

/** 202 + Location while the deposit is open, 200 once it is final (verify and authorize alike). */
function depositReply(outcome: VerifyOutcome): Reply {
  const { open, body } = depositAnswer(outcome);
  return new Reply(open ? 202 : 200, body, open ? { Location: body.status_url } : {});
}

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
    return depositReply(
      await verifyDeposit(ctx.state.auth!.agentId, body.tx_hash as `0x${string}`, ctx.state.requestId),
    );
  },
});

const authorizeRoute = defineRoute({
  method: "post",
  path: "/api/wallet/purchase/authorize",
  tag: "wallet",
  summary:
    "Gasless deposit: submit your signed EIP-3009 authorization; the platform sends it and pays the gas",
  description:
    "Body {deposit_request_id, signature}: the 65-byte EIP-712 signature of the typed_data that POST " +
    "/api/wallet/purchase {method: authorization} returned. 202 with the deposit (as verify) and Location: " +
    "its status URL; authorizing the same request again returns the same deposit (replayed: true). 400 " +
    "WALLET_SIGNATURE_INVALID, 404 for another agent's request, 409 when expired or its nonce is used, 402 " +
    "when the wallet lacks the USDC; nothing is recorded for a refusal. 503 while paid execution is not enabled.",
  auth: "key",
  body: AuthorizeBody,
  responses: { 200: VerifyResult, 202: VerifyResult },
  errors: [
    "UNAUTHORIZED",
    "SCHEMA_VALIDATION_FAILED",
    "TEMPORARILY_UNAVAILABLE",
    "NOT_FOUND",
    "WALLET_SIGNATURE_INVALID",
    "CONFLICT",
    "PAYMENT_REQUIRED",
    "SERVICE_UNAVAILABLE",
  ],
  async handle(ctx, { body }: { body: Static<typeof AuthorizeBody> }) {
    return depositReply(await authorizeDeposit(ctx.state.auth!.agentId, body, ctx.state.requestId));
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

export const walletRoutes = [
  walletRoute,
  pricingRoute,
  purchaseRoute,
  verifyRoute,
  authorizeRoute,
  depositRoute,
];
