import { Type } from "@sinclair/typebox";
import { Nullable, NullableTimestamp, Timestamp, UsdcAmount, Uuid } from "../../kernel/wire.js";

// Purchases held for a supervisor's decision (docs/payments.md "Approvals").

const ApprovalStatus = Type.Union([
  Type.Literal("pending"),
  Type.Literal("approved"),
  Type.Literal("denied"),
  Type.Literal("expired"),
]);

/** What an invocation's status shows of its approval. */
export const ApprovalSummary = Type.Object({
  approval_id: Uuid,
  status: ApprovalStatus,
  amount_usdc: UsdcAmount,
  expires_at: Timestamp,
  decided_at: NullableTimestamp,
  approval_url: Type.String(),
});

export const ApprovalView = Type.Object({
  approval_id: Uuid,
  status: ApprovalStatus,
  amount_usdc: UsdcAmount,
  expires_at: Timestamp,
  decided_at: NullableTimestamp,
  approval_url: Type.String(),
  invocation_id: Uuid,
  invocation_status: Type.String(),
  task: Type.String(),
  route: Type.String(),
  listing_id: Uuid,
  approval_above_usdc: UsdcAmount,
  requested_by_key_id: Uuid,
  created_at: Timestamp,
  decided_by_key_id: Nullable(Uuid),
  note: Nullable(Type.String()),
  status_url: Type.String(),
});

export const ApprovalList = Type.Object({
  approvals: Type.Array(ApprovalView),
  scope: Type.Union([Type.Literal("agent"), Type.Literal("this_key")], {
    description: "a supervisor key sees every approval of its agent; any other key those it requested",
  }),
});

export const ApprovalQuery = Type.Object(
  {
    status: Type.Optional(ApprovalStatus),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50 })),
  },
  { additionalProperties: false },
);

export const ApprovalParams = Type.Object({ approval_id: Type.String({ maxLength: 100 }) });

export const ApprovalDecisionBody = Type.Object(
  {
    note: Type.Optional(Type.String({ minLength: 1, maxLength: 500, description: "kept with the decision" })),
  },
  { additionalProperties: false },
);

/** The 202 of POST /api/execute or /api/invoke when the purchase waits for approval. */
export const ExecuteAwaitingApproval = Type.Object({
  success: Type.Literal(false),
  status: Type.Literal("awaiting_approval"),
  invocation_id: Uuid,
  approval_id: Uuid,
  amount_usdc: UsdcAmount,
  approval_above_usdc: UsdcAmount,
  expires_at: Timestamp,
  message: Type.String(),
  next_steps: Type.Array(Type.String()),
  approval_url: Type.String(),
  status_url: Type.String(),
});
