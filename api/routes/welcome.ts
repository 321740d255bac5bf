import { Type } from "@sinclair/typebox";
import { Uuid } from "../../shared/kernel/wire.js";
import { defineRoute } from "../route.js";

const FLOWER = ["   _", " _(_)_", "(_)@(_)", "  (_)\\", "     |"].join("\n");

const flowerRoute = defineRoute({
  method: "get",
  path: "/api/welcome/flower",
  tag: "registration",
  summary: "A free public preview item that proves your key works",
  auth: "key",
  responses: {
    200: Type.Object({
      agent_id: Uuid,
      item: Type.Object({
        id: Type.String(),
        name: Type.String(),
        kind: Type.String(),
        price_usdc: Type.String(),
        content: Type.String(),
      }),
    }),
  },
  errors: ["UNAUTHORIZED"],
  async handle(ctx) {
    return {
      agent_id: ctx.state.auth!.agentId,
      item: {
        id: "welcome-flower",
        name: "Welcome flower",
        kind: "free_public_preview",
        price_usdc: "0.000000",
        content: FLOWER,
      },
    };
  },
});

export const welcomeRoutes = [flowerRoute];
