import { type Static, Type } from "@sinclair/typebox";
import { Receipt, receiptView } from "../../shared/routing/index.js";
import { defineRoute } from "../route.js";

const ReceiptParams = Type.Object({ receipt_id: Type.String({ maxLength: 100 }) });

const receiptRoute = defineRoute({
  method: "get",
  path: "/api/commerce/receipts/{receipt_id}",
  tag: "routing",
  summary: "A normalized receipt with its provider evidence",
  auth: "key",
  params: Type.Object({ receipt_id: Type.String({ maxLength: 100 }) }),
  responses: { 200: Receipt },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "NOT_FOUND"],
  async handle(ctx, { params }: { params: Static<typeof ReceiptParams> }) {
    return receiptView(ctx.state.auth!.agentId, params.receipt_id);
  },
});

export const receiptRoutes = [receiptRoute];
