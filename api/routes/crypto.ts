import type { Static } from "@sinclair/typebox";
import { Type } from "@sinclair/typebox";
import {
  ConnectBody,
  ConnectChallenge,
  ConnectLinked,
  connectWallet,
  GeneratedWallet,
  generateSelfCustodyWallet,
} from "../../shared/money/index.js";
import { defineRoute, Reply } from "../route.js";

// Linking an external wallet and generating a self-custody one (docs/payments.md "Wallet and funding").

const connectRoute = defineRoute({
  method: "post",
  path: "/api/crypto/connect",
  tag: "wallet",
  summary: "Link an external wallet, proven by an EIP-191 signature over a server-issued challenge",
  description:
    "Step 1: {wallet_address} → a single-use challenge (10 minutes). Step 2: {wallet_address, challenge_id, " +
    "signature} where signature is personal_sign of challenge.message by that wallet → linked. Replaces the " +
    "agent's previous link (history kept). An address linked to another agent is 409 CONFLICT. EOAs only " +
    "(EIP-1271 smart-contract wallets are not supported yet).",
  auth: "key",
  body: ConnectBody,
  responses: { 200: Type.Union([ConnectChallenge, ConnectLinked]) },
  errors: [
    "UNAUTHORIZED",
    "SCHEMA_VALIDATION_FAILED",
    "WALLET_CHALLENGE_INVALID",
    "WALLET_SIGNATURE_INVALID",
    "CONFLICT",
    "RATE_LIMITED",
  ],
  async handle(ctx, { body }: { body: Static<typeof ConnectBody> }) {
    return connectWallet(ctx.state.auth!.agentId, body, ctx.state.requestId);
  },
});

const generateRoute = defineRoute({
  method: "post",
  path: "/api/crypto/wallet",
  tag: "wallet",
  summary: "Generate a self-custody wallet: the private key is shown once and never stored",
  description:
    "Becomes the agent's linked wallet when it has none; otherwise the existing link stays (switch with " +
    "/api/crypto/connect). Cache-Control: no-store.",
  auth: "key",
  responses: { 201: GeneratedWallet },
  errors: ["UNAUTHORIZED"],
  async handle(ctx) {
    const wallet = await generateSelfCustodyWallet(ctx.state.auth!.agentId, ctx.state.requestId);
    return new Reply(201, wallet, { "Cache-Control": "no-store" });
  },
});

export const cryptoRoutes = [connectRoute, generateRoute];
