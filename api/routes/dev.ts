import type { Static } from "@sinclair/typebox";
import { DevChainInfo, devChainInfo, devFaucet, FaucetBody, FaucetResult } from "../../shared/money/index.js";
import { defineRoute } from "../route.js";

// DEV_CHAIN=1 only (api/app.ts registers these only in that mode; otherwise they are 404).

const chainRoute = defineRoute({
  method: "get",
  path: "/api/dev/chain",
  tag: "dev",
  summary: "DEV_CHAIN=1: the local chain's RPC URL, chain id, test token and platform address",
  auth: "none",
  responses: { 200: DevChainInfo },
  errors: ["NOT_FOUND"],
  async handle() {
    return devChainInfo();
  },
});

const faucetRoute = defineRoute({
  method: "post",
  path: "/api/dev/faucet",
  tag: "dev",
  summary: "DEV_CHAIN=1: mint test USDC (at most 1000 per call) and top up gas ETH for a wallet",
  auth: "none",
  body: FaucetBody,
  responses: { 200: FaucetResult },
  errors: ["SCHEMA_VALIDATION_FAILED", "NOT_FOUND"],
  async handle(_ctx, { body }: { body: Static<typeof FaucetBody> }) {
    return devFaucet(body.wallet_address, body.amount_usdc);
  },
});

export const devRoutes = [chainRoute, faucetRoute];
