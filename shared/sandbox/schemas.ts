import { Type } from "@sinclair/typebox";
import { Nullable, Timestamp, Uuid } from "../kernel/wire.js";
import { GeneratedWallet } from "../money/index.js";
import { TusdcAmount } from "../routing/index.js";

// Wire schemas of the sandbox routes (docs/x402.md "Sandbox (tumbler)"). Every amount is tUSDC, the sandbox's
// simulated unit, named *_tusdc, and every answer says simulated: true.

const Simulated = Type.Literal(true, {
  description: "tUSDC is simulated: not money, never converts to USDC",
});

export const JoinResult = Type.Object({
  agent_id: Uuid,
  simulated: Simulated,
  currency: Type.Literal("tUSDC"),
  credited: Type.Boolean(),
  credited_tusdc: TusdcAmount,
  balance: Type.Object({ available_tusdc: TusdcAmount, held_tusdc: TusdcAmount }),
  faucet: Type.Object({
    rule: Type.String(),
    target_tusdc: TusdcAmount,
    period: Type.Literal("utc_day"),
    utc_day: Type.String({ pattern: "^\\d{4}-\\d{2}-\\d{2}$" }),
    topped_up_today: Type.Boolean(),
    ledger_transaction_id: Nullable(Uuid),
    next_top_up_at: Timestamp,
  }),
  message: Type.String(),
  note: Type.String(),
  next_steps: Type.Array(Type.String()),
});

export const SandboxMatchQuery = Type.Object(
  {
    task: Type.String({
      minLength: 1,
      maxLength: 200,
      description: "task alias: tag, slug, category or name",
    }),
  },
  { additionalProperties: false },
);

export const SandboxQuote = Type.Object({
  quote_id: Uuid,
  rail: Type.Literal("tumbler"),
  currency: Type.Literal("tUSDC"),
  simulated: Simulated,
  amount_tusdc: TusdcAmount,
  expires_at: Timestamp,
  ttl_seconds: Type.Integer(),
  task: Type.String(),
  listing: Type.Object({
    listing_id: Uuid,
    name: Type.String(),
    slug: Type.String(),
    price_tusdc: TusdcAmount,
    input_schema: Type.Record(Type.String(), Type.Unknown()),
    output_schema: Nullable(Type.Record(Type.String(), Type.Unknown())),
    safe_to_retry: Type.Boolean(),
    verification_status: Nullable(Type.String()),
    score: Type.Number(),
    score_components: Type.Record(Type.String(), Type.Number()),
  }),
  other_eligible_listings: Type.Integer(),
  execute: Type.Object({
    method: Type.Literal("POST"),
    url: Type.String(),
    body: Type.Object({ quote_id: Uuid, input: Type.String() }),
  }),
  note: Type.String(),
});

export const SandboxExecuteBody = Type.Object(
  {
    quote_id: Type.String({ maxLength: 100, description: "from GET /api/tumbler/execute/match" }),
    input: Type.Record(Type.String(), Type.Unknown(), {
      description: "validated against the quoted listing's input_schema",
    }),
  },
  { additionalProperties: false },
);

export const TransitionBody = Type.Object(
  {
    create_wallet: Type.Optional(
      Type.Boolean({ description: "true: also generate a self-custody wallet (private key shown once)" }),
    ),
  },
  { additionalProperties: false },
);

export const TransitionResult = Type.Object({
  agent_id: Uuid,
  sandbox: Type.Object({
    currency: Type.Literal("tUSDC"),
    simulated: Simulated,
    available_tusdc: TusdcAmount,
    held_tusdc: TusdcAmount,
    seller_payable_tusdc: TusdcAmount,
    what_happens_to_it: Type.String(),
  }),
  what_changes: Type.Array(Type.String()),
  production: Type.Object({
    paid_execution: Type.Union([Type.Literal("enabled"), Type.Literal("temporarily_unavailable")]),
    reason: Nullable(Type.String()),
    read_first: Type.Literal("/market.json"),
    api_key: Type.String(),
    steps: Type.Array(Type.String()),
  }),
  wallet: Nullable(GeneratedWallet),
  wallet_null_reason: Nullable(Type.String()),
  note: Type.String(),
});
