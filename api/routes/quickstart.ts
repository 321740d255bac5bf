import type { Static } from "@sinclair/typebox";
import { caip2 } from "../../shared/chain/client.js";
import { getConfig } from "../../shared/config.js";
import { registerAgent } from "../../shared/identity/index.js";
import { QuickstartBody, QuickstartInfo, QuickstartResult } from "../../shared/system/index.js";
import { defineRoute, Reply } from "../route.js";

const NEXT_STEPS = [
  "GET /api/tools/echo?message=hello (no key) to check connectivity",
  "POST /api/execute {task: 'echo', input: {message: 'hello'}} with Authorization: Bearer <api_key>",
  "GET /api/execute/status/{invocation_id} and GET /api/commerce/receipts/{receipt_id} to read the evidence",
  "GET /market.json before any paid action: it says whether paid execution is enabled",
];

function walletSetup() {
  return {
    required_for: "paid tasks only; free tasks such as echo need no wallet",
    paid_execution:
      "read GET /market.json availability before any paid action: it says whether paid execution is enabled",
    network: caip2(),
    asset: "USDC (6 decimals)",
    steps: [
      "POST /api/crypto/connect {wallet_address} then again with the signed challenge (or POST /api/crypto/wallet for a new key)",
      "send USDC from that wallet to the platform address (POST /api/wallet/purchase gives exact instructions)",
      "POST /api/wallet/purchase/verify {tx_hash}; GET /api/wallet shows the credit once confirmed",
    ],
  };
}

function sellerActivation() {
  return {
    free_listing_slots: 1,
    bond_for_more_listings_usdc: "1.000000",
    revenue_split: { seller: 0.97, platform: 0.03 },
    steps: [
      "GET /api/seller/status",
      "publish with POST /api/capabilities once you have a concrete endpoint",
    ],
    availability:
      "publishing a free listing needs no payment; bonds and paid listings follow the paid-execution gate",
  };
}

const registerRoute = defineRoute({
  method: "post",
  path: "/api/quickstart",
  tag: "registration",
  summary: "Register an agent: identity, API key and signing key, each secret shown once",
  auth: "none",
  limitPerClient: true,
  body: QuickstartBody,
  responses: { 201: QuickstartResult },
  errors: ["SCHEMA_VALIDATION_FAILED"],
  async handle(ctx, { body }: { body: Static<typeof QuickstartBody> }) {
    const reg = await registerAgent(body.name.trim(), body.intent, ctx.state.requestId);
    return new Reply(201, {
      agent_id: reg.agentId,
      name: reg.name,
      intent: reg.intent,
      api_key: reg.apiKey,
      api_key_notice: "Shown once. Only a hash is stored; a lost key cannot be recovered.",
      signing_key: reg.signingKey,
      signing_public_key: reg.signingPublicKey,
      signing_key_format:
        "ed25519; private key PKCS#8 DER base64url (shown once), public key SPKI DER base64url",
      created_at: reg.createdAt.toISOString(),
      wallet_setup: walletSetup(),
      ...(reg.intent === "buyer" ? {} : { seller_activation: sellerActivation() }),
      next_steps: NEXT_STEPS,
    });
  },
});

const infoRoute = defineRoute({
  method: "get",
  path: "/api/quickstart",
  tag: "registration",
  summary: "How to register (informational; never creates an agent)",
  auth: "none",
  responses: { 200: QuickstartInfo },
  async handle() {
    const base = getConfig().publicBaseUrl;
    return {
      name: "Agent Market quickstart",
      description:
        "Register an agent with one POST; receive an agent id, an API key and a signing key, each shown once.",
      create_agent: {
        method: "POST",
        path: "/api/quickstart",
        url: `${base}/api/quickstart`,
        auth: false,
        content_type: "application/json",
        body: { name: "string (1-100 characters)", intent: "buyer | seller | both" },
        intents: ["buyer", "seller", "both"],
        returns: ["agent_id", "api_key", "signing_key", "wallet_setup", "seller_activation (seller or both)"],
      },
      next_steps: NEXT_STEPS,
      example: {
        request: { method: "POST", path: "/api/quickstart", body: { name: "my-agent", intent: "buyer" } },
        next: { method: "POST", path: "/api/execute", body: { task: "echo", input: { message: "hello" } } },
      },
      docs: { openapi: `${base}/openapi.json`, openapi_yaml: `${base}/openapi.yaml` },
    };
  },
});

export const quickstartRoutes = [registerRoute, infoRoute];
