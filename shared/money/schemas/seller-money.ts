import { Type } from "@sinclair/typebox";
import { Nullable, NullableTimestamp, Timestamp, UsdcAmount, Uuid } from "../../kernel/wire.js";

// Wire schemas of the seller bond (POST/GET /api/stake, docs/payments.md "Seller bond") and of a seller's payouts
// as the seller status and GET /api/wallet show them (docs/payments.md "Payouts").

const NullReason = Nullable(Type.String());
const Address = Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" });

/** POST /api/stake, /downgrade, /release: no fields; the bond is $1 USDC from the available balance. */
export const StakeBody = Type.Object({}, { additionalProperties: false });

export const StakeRecord = Type.Object({
  stake_id: Uuid,
  status: Type.Union([Type.Literal("posted"), Type.Literal("downgraded"), Type.Literal("released")]),
  currency: Type.Literal("USDC"),
  posted_usdc: UsdcAmount,
  bonded_usdc: UsdcAmount,
  posted_at: Timestamp,
  downgraded_at: NullableTimestamp,
  released_at: NullableTimestamp,
  ledger: Type.Object({
    post_transaction_id: Uuid,
    downgrade_transaction_id: Nullable(Uuid),
    release_transaction_id: Nullable(Uuid),
  }),
});

export const GoodStanding = Type.Object({
  in_good_standing: Type.Boolean(),
  window_days: Type.Integer(),
  bond_age_days: Type.Integer(),
  eligible_for_downgrade_at: Timestamp,
  failed_listing_ids: Type.Array(Uuid),
  paid_calls_in_window: Type.Integer(),
  refunded_paid_calls_in_window: Type.Integer(),
  refund_rate_pct: Type.Number(),
  max_refund_rate_pct: Type.Number(),
  blockers: Type.Array(Type.String()),
});

export const BondTerms = Type.Record(Type.String(), Type.String());

export const StakeView = Type.Object({
  agent_id: Uuid,
  bonded: Type.Boolean({
    description: "an open (posted or downgraded) bond backs listings beyond the free slot",
  }),
  stake: Nullable(StakeRecord),
  stake_null_reason: NullReason,
  live_listings: Type.Integer(),
  paid_live_listing_ids: Type.Array(Uuid),
  free_concurrent_listing_slots: Type.Integer(),
  good_standing: Nullable(GoodStanding),
  good_standing_null_reason: NullReason,
  can_post: Type.Boolean(),
  can_downgrade: Type.Boolean(),
  downgrade_blockers: Type.Array(Type.String()),
  can_release: Type.Boolean(),
  release_blockers: Type.Array(Type.String()),
  terms: BondTerms,
  links: Type.Record(Type.String(), Type.String()),
  replayed: Type.Optional(
    Type.Boolean({ description: "POST only: the open bond already existed; nothing moved" }),
  ),
});

/** The bond as GET /api/seller/status shows it. */
export const BondBlock = Type.Object({
  posted: Type.Boolean(),
  status: Nullable(Type.String()),
  bonded_usdc: UsdcAmount,
  can_downgrade: Type.Boolean(),
  can_release: Type.Boolean(),
  details: Type.String(),
  bond_usdc: Type.String(),
  covers: Type.String(),
  downgrade: Type.String(),
  good_standing: Type.String(),
  release: Type.String(),
  post_with: Type.String(),
  availability: Type.String(),
});

export const PayoutView = Type.Object({
  payout_id: Uuid,
  status: Type.Union([
    Type.Literal("pending"),
    Type.Literal("submitted"),
    Type.Literal("confirmed"),
    Type.Literal("failed"),
  ]),
  currency: Type.Literal("USDC"),
  amount_usdc: UsdcAmount,
  to_address: Address,
  chain_id: Type.Integer(),
  tx_hash: Nullable(Type.String()),
  tx_url: Nullable(Type.String()),
  block_number: Nullable(Type.Integer()),
  waiting_reason: NullReason,
  failure_reason: NullReason,
  created_at: Timestamp,
  submitted_at: NullableTimestamp,
  resolved_at: NullableTimestamp,
});

export const PayoutSummary = Type.Object({
  currency: Type.Literal("USDC"),
  state: Type.Union([
    Type.Literal("payout_in_flight"),
    Type.Literal("accruing_no_linked_wallet"),
    Type.Literal("paused_after_failed_payout"),
    Type.Literal("accruing_below_threshold"),
    Type.Literal("due_at_next_batch"),
  ]),
  note: Type.String(),
  payable_usdc: UsdcAmount,
  in_flight_usdc: UsdcAmount,
  threshold_usdc: UsdcAmount,
  linked_wallet: Nullable(Address),
  linked_wallet_null_reason: NullReason,
  batch_interval_ms: Type.Integer({ description: "0: batches are off on this deployment" }),
  open_payout: Nullable(PayoutView),
  recent_payouts: Type.Array(PayoutView),
});
