import type { Static } from "@sinclair/typebox";
import {
  ApprovalDecisionBody,
  ApprovalList,
  ApprovalParams,
  ApprovalQuery,
  ApprovalView,
  approvePurchase,
  denyPurchase,
  listApprovalsFor,
  readApproval,
} from "../../shared/routing/index.js";
import { defineRoute } from "../route.js";

// Purchases held for a supervisor's decision (docs/payments.md "Approvals"). Decisions need a supervisor key of
// the same agent; another agent's approval reads as 404.

const listRoute = defineRoute({
  method: "get",
  path: "/api/approvals",
  tag: "approvals",
  summary: "Purchases held for approval, newest first (supervisors see the agent's; other keys their own)",
  auth: "key",
  query: ApprovalQuery,
  responses: { 200: ApprovalList },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED"],
  async handle(ctx, { query }: { query: Static<typeof ApprovalQuery> }) {
    return listApprovalsFor(ctx.state.auth!, query.status, query.limit ?? 50);
  },
});

const readRoute = defineRoute({
  method: "get",
  path: "/api/approvals/{approval_id}",
  tag: "approvals",
  summary: "One held purchase and its decision",
  auth: "key",
  params: ApprovalParams,
  responses: { 200: ApprovalView },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "NOT_FOUND"],
  async handle(ctx, { params }: { params: Static<typeof ApprovalParams> }) {
    return readApproval(ctx.state.auth!, params.approval_id);
  },
});

const DECISION_ERRORS = [
  "UNAUTHORIZED",
  "SCHEMA_VALIDATION_FAILED",
  "POLICY_BLOCKED",
  "NOT_FOUND",
  "CONFLICT",
] as const;

const approveRoute = defineRoute({
  method: "post",
  path: "/api/approvals/{approval_id}/approve",
  tag: "approvals",
  summary: "Approve a held purchase: it is queued and runs (supervisor key; not the key that asked)",
  description:
    "Exactly once: a second decision, or one after expires_at, is 409 CONFLICT with the approval's status.",
  auth: "key",
  params: ApprovalParams,
  body: ApprovalDecisionBody,
  responses: { 200: ApprovalView },
  errors: [...DECISION_ERRORS],
  async handle(
    ctx,
    { params, body }: { params: Static<typeof ApprovalParams>; body: Static<typeof ApprovalDecisionBody> },
  ) {
    return approvePurchase(ctx.state.auth!, params.approval_id, body.note ?? null, ctx.state.requestId);
  },
});

const denyRoute = defineRoute({
  method: "post",
  path: "/api/approvals/{approval_id}/deny",
  tag: "approvals",
  summary: "Deny a held purchase: it fails with POLICY_BLOCKED and its hold is released (supervisor key)",
  description:
    "Exactly once: a second decision, or one after expires_at, is 409 CONFLICT with the approval's status.",
  auth: "key",
  params: ApprovalParams,
  body: ApprovalDecisionBody,
  responses: { 200: ApprovalView },
  errors: [...DECISION_ERRORS],
  async handle(
    ctx,
    { params, body }: { params: Static<typeof ApprovalParams>; body: Static<typeof ApprovalDecisionBody> },
  ) {
    return denyPurchase(ctx.state.auth!, params.approval_id, body.note ?? null, ctx.state.requestId);
  },
});

export const approvalRoutes = [listRoute, readRoute, approveRoute, denyRoute];
