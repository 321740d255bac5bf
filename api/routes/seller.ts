import {
  downgradeStake,
  postStake,
  releaseStake,
  SellerStatus,
  sellerStatus,
  stakeView,
} from "../../shared/catalog/index.js";
import { StakeBody, StakeView } from "../../shared/money/index.js";
import { defineRoute, Reply } from "../route.js";

// The seller's position (GET /api/seller/status) and the seller bond (docs/payments.md "Seller bond").

const statusRoute = defineRoute({
  method: "get",
  path: "/api/seller/status",
  tag: "seller",
  summary:
    "Free listing slots left, whether the next listing needs the bond, the bond, payouts and a template",
  auth: "key",
  responses: { 200: SellerStatus },
  async handle(ctx) {
    return sellerStatus(ctx.state.auth!.agentId);
  },
});

const readStakeRoute = defineRoute({
  method: "get",
  path: "/api/stake",
  tag: "seller",
  summary: "Your seller bond: what it covers, good standing, and whether it can be downgraded or released",
  auth: "key",
  responses: { 200: StakeView },
  errors: ["UNAUTHORIZED"],
  async handle(ctx) {
    return stakeView(ctx.state.auth!.agentId);
  },
});

const postStakeRoute = defineRoute({
  method: "post",
  path: "/api/stake",
  tag: "seller",
  summary:
    "Paid route: post the $1 USDC seller bond from your available balance (covers listings beyond the free slot)",
  description:
    "Answers 503 TEMPORARILY_UNAVAILABLE while paid execution is not enabled (read GET /market.json first), " +
    "before anything. 201 with the bond; with a bond already open, 200 with it and replayed: true (nothing " +
    "moves, so retries and concurrent posts make one bond). 402 PAYMENT_REQUIRED with available_usdc and " +
    "how_to_fund when your available USDC is short; nothing is recorded. Buyer agents: 403 POLICY_BLOCKED.",
  auth: "key",
  body: StakeBody,
  responses: { 200: StakeView, 201: StakeView },
  errors: [
    "UNAUTHORIZED",
    "SCHEMA_VALIDATION_FAILED",
    "TEMPORARILY_UNAVAILABLE",
    "PAYMENT_REQUIRED",
    "POLICY_BLOCKED",
  ],
  async handle(ctx) {
    const view = await postStake(ctx.state.auth!.agentId, ctx.state.requestId);
    return new Reply(view.replayed ? 200 : 201, view);
  },
});

const downgradeRoute = defineRoute({
  method: "post",
  path: "/api/stake/downgrade",
  tag: "seller",
  summary: "After 30 days of good standing, return half the bond to your available balance; you stay bonded",
  description:
    "409 CONFLICT with details.blockers when the bond is younger than 30 days, the seller is not in good " +
    "standing (a live listing verification_status failed, or more than 10% of the last 30 days' paid calls " +
    "refunded), or there is no open bond. Downgrading a downgraded bond answers 200 and moves nothing.",
  auth: "key",
  body: StakeBody,
  responses: { 200: StakeView },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "CONFLICT"],
  async handle(ctx) {
    return downgradeStake(ctx.state.auth!.agentId, ctx.state.requestId);
  },
});

const releaseRoute = defineRoute({
  method: "post",
  path: "/api/stake/release",
  tag: "seller",
  summary: "Return the whole bond to your available balance, once no paid listing of yours is live",
  description:
    "409 CONFLICT with details.blockers (paid_listings_live, live_listings_beyond_free_slot) while the bond " +
    "still backs live supply; retire listings first. Releasing a released bond answers 200 and moves nothing.",
  auth: "key",
  body: StakeBody,
  responses: { 200: StakeView },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "CONFLICT"],
  async handle(ctx) {
    return releaseStake(ctx.state.auth!.agentId, ctx.state.requestId);
  },
});

export const sellerRoutes = [statusRoute, readStakeRoute, postStakeRoute, downgradeRoute, releaseRoute];
