import type { Static } from "@sinclair/typebox";
import {
  createKey,
  KeyCreateBody,
  KeyCreated,
  KeyList,
  KeyParams,
  KeyResult,
  KeyRevokeBody,
  KeyRotateBody,
  listKeys,
  revokeKey,
  rotateKey,
} from "../../shared/identity/index.js";
import { denyPendingOfRevokedKey } from "../../shared/routing/index.js";
import { defineRoute, Reply } from "../route.js";

// An agent's API keys: scopes, spend limits, rotation and revocation (docs/payments.md "Keys, scopes and spend
// limits"). The secret of a new or rotated key is in the answer once and never again.

const createRoute = defineRoute({
  method: "post",
  path: "/api/keys",
  tag: "keys",
  summary: "Create an API key with scopes, spend limits and powers; the key is shown once",
  description:
    "Needs a key with manage_keys (the registration key has it). The new key never reaches further than " +
    "the key creating it: narrower or equal scopes and limits, no power the creator lacks (403 POLICY_BLOCKED " +
    "names what is wider). Scopes: categories, max_price_usdc (price ceiling per call), seller_allowlist or " +
    "seller_blocklist (agent ids or 'platform'). Limits: per_call_usdc, daily_cap_usdc (UTC day). " +
    "approval_above_usdc holds dearer purchases for a supervisor key.",
  auth: "key",
  body: KeyCreateBody,
  responses: { 201: KeyCreated },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "POLICY_BLOCKED"],
  async handle(ctx, { body }: { body: Static<typeof KeyCreateBody> }) {
    return new Reply(201, await createKey(ctx.state.auth!, body, ctx.state.requestId));
  },
});

const listRoute = defineRoute({
  method: "get",
  path: "/api/keys",
  tag: "keys",
  summary: "The agent's keys: prefix and last four only, scopes, limits and today's reserved and spent",
  description: "A manage_keys key sees every key of its agent; any other key sees only itself.",
  auth: "key",
  responses: { 200: KeyList },
  errors: ["UNAUTHORIZED"],
  async handle(ctx) {
    return listKeys(ctx.state.auth!);
  },
});

const rotateRoute = defineRoute({
  method: "post",
  path: "/api/keys/{key_id}/rotate",
  tag: "keys",
  summary: "Give a key a new secret (shown once); the previous secret works for a grace period",
  description:
    "Same key id, scopes, limits and daily spend. The previous secret keeps working for grace_seconds " +
    "(default and maximum KEY_ROTATION_GRACE_SECONDS; 0 ends it at once), then answers 401. Rotating again " +
    "ends an earlier grace at once. Any key may rotate itself; another key needs manage_keys.",
  auth: "key",
  params: KeyParams,
  body: KeyRotateBody,
  responses: { 200: KeyCreated },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "POLICY_BLOCKED", "NOT_FOUND", "CONFLICT"],
  async handle(
    ctx,
    { params, body }: { params: Static<typeof KeyParams>; body: Static<typeof KeyRotateBody> },
  ) {
    return rotateKey(ctx.state.auth!, params.key_id, body.grace_seconds, ctx.state.requestId);
  },
});

const revokeRoute = defineRoute({
  method: "post",
  path: "/api/keys/{key_id}/revoke",
  tag: "keys",
  summary: "Revoke a key: 401 from its next request, in every API process",
  description: "Any key may revoke itself; another key needs manage_keys. Revoking twice answers the same.",
  auth: "key",
  params: KeyParams,
  body: KeyRevokeBody,
  responses: { 200: KeyResult },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "POLICY_BLOCKED", "NOT_FOUND"],
  async handle(
    ctx,
    { params, body }: { params: Static<typeof KeyParams>; body: Static<typeof KeyRevokeBody> },
  ) {
    return revokeKey(
      ctx.state.auth!,
      params.key_id,
      body.reason ?? null,
      ctx.state.requestId,
      denyPendingOfRevokedKey,
    );
  },
});

export const keyRoutes = [createRoute, listRoute, rotateRoute, revokeRoute];
