import { Type } from "@sinclair/typebox";
import { Nullable, NullableTimestamp, Timestamp, UsdcAmount, Uuid } from "../kernel/wire.js";

// API keys with scopes and spend limits (docs/payments.md "Keys, scopes and spend limits").

/** USDC at the edge: a number with at most 6 decimals (checked exactly when parsed). */
const Usdc = (description: string) => Type.Number({ minimum: 0, maximum: 1_000_000, description });

const Category = Type.String({ pattern: "^[a-z0-9][a-z0-9-]{1,39}$" });
const Seller = Type.Union([Uuid, Type.Literal("platform")], {
  description: "a seller's agent id, or 'platform' for the platform's own listings",
});
const SellerList = (description: string) =>
  Type.Array(Seller, { minItems: 1, maxItems: 100, uniqueItems: true, description });

export const KeyCreateBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    scopes: Type.Optional(
      Type.Object(
        {
          categories: Type.Optional(
            Type.Array(Category, {
              minItems: 1,
              maxItems: 50,
              uniqueItems: true,
              description: "listing categories the key may buy from",
            }),
          ),
          max_price_usdc: Type.Optional(
            Usdc("price ceiling: the highest listed price per call the key may buy"),
          ),
          seller_allowlist: Type.Optional(SellerList("only these sellers (not with seller_blocklist)")),
          seller_blocklist: Type.Optional(SellerList("never these sellers (not with seller_allowlist)")),
        },
        { additionalProperties: false },
      ),
    ),
    limits: Type.Optional(
      Type.Object(
        {
          per_call_usdc: Type.Optional(Usdc("most one paid call may hold")),
          daily_cap_usdc: Type.Optional(Usdc("most the key may reserve and spend per UTC day")),
        },
        { additionalProperties: false },
      ),
    ),
    approval_above_usdc: Type.Optional(
      Usdc("a paid call holding more than this waits for a supervisor's approval"),
    ),
    supervisor: Type.Optional(
      Type.Boolean({ description: "may approve or deny this agent's held purchases" }),
    ),
    manage_keys: Type.Optional(
      Type.Boolean({ description: "may create, rotate and revoke this agent's keys" }),
    ),
  },
  { additionalProperties: false },
);

export const KeyParams = Type.Object({ key_id: Type.String({ maxLength: 100 }) });

export const KeyRotateBody = Type.Object(
  {
    grace_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        description:
          "how long the previous secret keeps working (default and maximum: KEY_ROTATION_GRACE_SECONDS)",
      }),
    ),
  },
  { additionalProperties: false },
);

export const KeyRevokeBody = Type.Object(
  { reason: Type.Optional(Type.String({ minLength: 1, maxLength: 500 })) },
  { additionalProperties: false },
);

export const KeyView = Type.Object({
  key_id: Uuid,
  name: Nullable(Type.String()),
  prefix: Type.String(),
  last_four: Type.String(),
  display: Type.String({ description: "prefix…last four; the key itself is never shown again" }),
  status: Type.Union([Type.Literal("active"), Type.Literal("revoked")]),
  current: Type.Boolean({ description: "the key making this request" }),
  scopes: Type.Object({
    categories: Nullable(Type.Array(Type.String())),
    max_price_usdc: Nullable(UsdcAmount),
    seller_allowlist: Nullable(Type.Array(Type.String())),
    seller_blocklist: Nullable(Type.Array(Type.String())),
  }),
  limits: Type.Object({ per_call_usdc: Nullable(UsdcAmount), daily_cap_usdc: Nullable(UsdcAmount) }),
  approval_above_usdc: Nullable(UsdcAmount),
  supervisor: Type.Boolean(),
  manage_keys: Type.Boolean(),
  today: Type.Object({
    day: Type.String({ description: "UTC date" }),
    reserved_usdc: UsdcAmount,
    spent_usdc: UsdcAmount,
    remaining_usdc: Nullable(UsdcAmount),
    resets_at: Timestamp,
  }),
  created_at: Timestamp,
  created_by_key_id: Nullable(Uuid),
  rotated_at: NullableTimestamp,
  previous_secret: Nullable(Type.Object({ last_four: Type.String(), valid_until: Timestamp })),
  revoked_at: NullableTimestamp,
});

export const KeyCreated = Type.Object({
  key: KeyView,
  api_key: Type.String({ description: "shown once; only its SHA-256 is stored" }),
  api_key_notice: Type.String(),
});

export const KeyList = Type.Object({
  keys: Type.Array(KeyView),
  current_key_id: Uuid,
  visible: Type.Union([Type.Literal("agent"), Type.Literal("this_key")], {
    description: "a manage_keys key sees every key of its agent; any other key sees itself",
  }),
});

export const KeyResult = Type.Object({ key: KeyView });
