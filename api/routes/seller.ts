import { sellerStatus } from "../../shared/domain/seller.js";
import { SellerStatus } from "../../shared/schemas/listings.js";
import { defineRoute } from "../route.js";

const statusRoute = defineRoute({
  method: "get",
  path: "/api/seller/status",
  tag: "seller",
  summary: "Free listing slots left, whether the next listing needs the bond, and a publish template",
  auth: "key",
  responses: { 200: SellerStatus },
  async handle(ctx) {
    return sellerStatus(ctx.state.auth!.agentId);
  },
});

export const sellerRoutes = [statusRoute];
