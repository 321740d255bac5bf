import { type Static, Type } from "@sinclair/typebox";
import { custodyStatus, setCustody } from "../../shared/money/index.js";
import { defineRoute } from "../route.js";

// The operator API (docs/payments.md "The paid-execution gate"): bearer ADMIN_API_KEY; 404 when none is set.

const CustodyChange = Type.Object(
  { reason: Type.String({ minLength: 3, maxLength: 500, description: "why; kept in the audit log" }) },
  { additionalProperties: false },
);

const CustodyStatus = Type.Object({
  custody: Type.Union([
    Type.Object({
      frozen: Type.Boolean(),
      reason: Type.Union([Type.String(), Type.Null()]),
      updated_at: Type.String({ format: "date-time" }),
      updated_by: Type.Union([Type.String(), Type.Null()]),
    }),
    Type.Null(),
  ]),
  paid_execution: Type.Union([Type.Literal("enabled"), Type.Literal("temporarily_unavailable")]),
  reason: Type.Union([Type.String(), Type.Null()]),
  rail: Type.Object({
    configured: Type.Boolean(),
    rpc_ok: Type.Union([Type.Boolean(), Type.Null()]),
    chain_id: Type.Union([Type.Integer(), Type.Null()]),
    signer: Type.Boolean(),
  }),
  availability: Type.Record(Type.String(), Type.Unknown()),
  audit: Type.Array(
    Type.Object({
      at: Type.String({ format: "date-time" }),
      action: Type.String(),
      request_id: Type.Union([Type.String(), Type.Null()]),
      data: Type.Record(Type.String(), Type.Unknown()),
    }),
  ),
});

const readCustody = defineRoute({
  method: "get",
  path: "/api/admin/custody",
  tag: "admin",
  summary: "Custody switch, the paid-execution gate it feeds and its audit trail",
  auth: "admin",
  responses: { 200: CustodyStatus },
  errors: ["UNAUTHORIZED", "NOT_FOUND"],
  handle: () => custodyStatus(),
});

const freeze = defineRoute({
  method: "post",
  path: "/api/admin/custody/freeze",
  tag: "admin",
  summary: "Freeze custody: every paid route answers 503 temporarily_unavailable from the next request",
  auth: "admin",
  body: CustodyChange,
  responses: { 200: CustodyStatus },
  errors: ["UNAUTHORIZED", "NOT_FOUND", "SCHEMA_VALIDATION_FAILED"],
  handle: (ctx, { body }: { body: Static<typeof CustodyChange> }) =>
    setCustody(true, body.reason, ctx.state.requestId),
});

const unfreeze = defineRoute({
  method: "post",
  path: "/api/admin/custody/unfreeze",
  tag: "admin",
  summary: "Unfreeze custody (paid execution also needs a configured, reachable chain and a signer)",
  auth: "admin",
  body: CustodyChange,
  responses: { 200: CustodyStatus },
  errors: ["UNAUTHORIZED", "NOT_FOUND", "SCHEMA_VALIDATION_FAILED"],
  handle: (ctx, { body }: { body: Static<typeof CustodyChange> }) =>
    setCustody(false, body.reason, ctx.state.requestId),
});

export const adminRoutes = [readCustody, freeze, unfreeze];
