import type { Static } from "@sinclair/typebox";
import { ExecutePending, ExecuteResult } from "../../shared/routing/index.js";
import {
  executeSandboxQuote,
  JoinResult,
  joinTumbler,
  quoteSandboxTask,
  SandboxExecuteBody,
  SandboxMatchQuery,
  SandboxQuote,
  TransitionBody,
  TransitionResult,
  transitionToProduction,
} from "../../shared/sandbox/index.js";
import { defineRoute, Reply } from "../route.js";

// The sandbox (docs/x402.md "Sandbox (tumbler)"): faucet, quote, execute in simulated tUSDC, and the handoff
// to production. None of these routes consults the paid-execution gate: no real funds move.

const joinRoute = defineRoute({
  method: "post",
  path: "/api/tumbler/join",
  tag: "sandbox",
  summary: "Faucet: tops your available tUSDC (simulated) up to the daily amount, once per UTC day",
  description:
    "Tops available tUSDC up to TUMBLER_FAUCET_USDC (default 10), at most once per UTC day. Joining again " +
    "the same day credits nothing and says when the next top-up is possible. tUSDC is simulated: it never " +
    "converts to USDC.",
  auth: "key",
  responses: { 200: JoinResult },
  errors: ["UNAUTHORIZED"],
  async handle(ctx) {
    return joinTumbler(ctx.state.auth!.agentId);
  },
});

const matchRoute = defineRoute({
  method: "get",
  path: "/api/tumbler/execute/match",
  tag: "sandbox",
  summary: "Quote the best sandbox-enabled listing for a task, in tUSDC (simulated)",
  description:
    "Ranks like GET /api/execute/match, over tumbler_enabled listings only, and quotes the top one at its " +
    "price in tUSDC for TUMBLER_QUOTE_TTL_SECONDS (default 300). The seller's endpoint really runs when " +
    "the quote is executed.",
  auth: "key",
  query: SandboxMatchQuery,
  responses: { 200: SandboxQuote },
  errors: [
    "UNAUTHORIZED",
    "SCHEMA_VALIDATION_FAILED",
    "LISTING_NOT_FOUND",
    "POLICY_BLOCKED",
    "SELF_DEALING_FORBIDDEN",
  ],
  async handle(ctx, { query }: { query: Static<typeof SandboxMatchQuery> }) {
    return quoteSandboxTask(ctx.state.auth!, query.task);
  },
});

const executeRoute = defineRoute({
  method: "post",
  path: "/api/tumbler/execute",
  tag: "sandbox",
  summary: "Execute a sandbox quote: the seller's endpoint runs, the price is charged in tUSDC",
  description:
    "Unknown or another agent's quote → 404; a used or expired quote → 409 QUOTE_NOT_USABLE (details.reason " +
    "quote_already_used, with the invocation to poll, or quote_expired); input invalid for the listing → 400; " +
    "short of tUSDC → 402 (POST /api/tumbler/join). Waits a bounded time like /api/execute, else 202.",
  auth: "key",
  body: SandboxExecuteBody,
  responses: { 200: ExecuteResult, 202: ExecutePending },
  errors: [
    "UNAUTHORIZED",
    "SCHEMA_VALIDATION_FAILED",
    "NOT_FOUND",
    "QUOTE_NOT_USABLE",
    "LISTING_NOT_INVOCABLE",
    "POLICY_BLOCKED",
    "SELF_DEALING_FORBIDDEN",
    "PAYMENT_REQUIRED",
    "RATE_LIMITED",
    "PROVIDER_FAILED",
    "PROVIDER_UNAVAILABLE",
    "TIMEOUT",
  ],
  async handle(ctx, { body }: { body: Static<typeof SandboxExecuteBody> }) {
    const run = await executeSandboxQuote(ctx.state.auth!, body.quote_id, body.input, ctx.state.requestId);
    if (run.done) return run.body;
    return new Reply(202, run.body, { Location: run.body.status_url });
  },
});

const transitionRoute = defineRoute({
  method: "post",
  path: "/api/tumbler/transition",
  tag: "sandbox",
  summary: "Production handoff: what changes for real calls, and optionally a self-custody wallet",
  description:
    "{create_wallet: true} also generates a self-custody wallet (201; the private key is shown once, never " +
    "stored or logged; Cache-Control: no-store). Absent or false → 200 with the explanation only.",
  auth: "key",
  body: TransitionBody,
  responses: { 200: TransitionResult, 201: TransitionResult },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED"],
  async handle(ctx, { body }: { body: Static<typeof TransitionBody> }) {
    const result = await transitionToProduction(
      ctx.state.auth!,
      body.create_wallet === true,
      ctx.state.requestId,
    );
    return result.wallet ? new Reply(201, result, { "Cache-Control": "no-store" }) : result;
  },
});

export const tumblerRoutes = [joinRoute, matchRoute, executeRoute, transitionRoute];
