import { Type } from "@sinclair/typebox";
import { AppError } from "../../shared/errors.js";
import { Timestamp } from "../../shared/kernel/wire.js";
import { checkHealth, marketStats } from "../../shared/system/index.js";
import { defineRoute } from "../route.js";

const Check = Type.Record(Type.String(), Type.Unknown());

const HealthResult = Type.Object({
  status: Type.Literal("ok"),
  failed: Type.Array(Type.String()),
  checks: Type.Object({ postgres: Check, redis: Check, queues: Type.Record(Type.String(), Check) }),
  checked_at: Timestamp,
});

const StatsResult = Type.Object({
  agents: Type.Integer(),
  listings_active: Type.Integer(),
  invocations_total: Type.Integer(),
  invocations_succeeded: Type.Integer(),
  invocations_failed: Type.Integer(),
  invocations_in_progress: Type.Integer(),
  invocations_awaiting_approval: Type.Integer(),
  receipts: Type.Integer(),
  generated_at: Timestamp,
});

const healthRoute = defineRoute({
  method: "get",
  path: "/api/health",
  tag: "system",
  summary: "Health of PostgreSQL, Redis and every queue; 503 names what failed",
  auth: "none",
  responses: { 200: HealthResult },
  errors: ["SERVICE_UNAVAILABLE"],
  async handle() {
    const health = await checkHealth();
    if (health.status !== "ok") {
      throw new AppError("SERVICE_UNAVAILABLE", `unhealthy: ${health.failed.join(", ")}`, health);
    }
    return health;
  },
});

const statsRoute = defineRoute({
  method: "get",
  path: "/api/stats",
  tag: "system",
  summary: "Marketplace snapshot numbers, counted live",
  auth: "none",
  responses: { 200: StatsResult },
  async handle() {
    return marketStats();
  },
});

export const systemRoutes = [healthRoute, statsRoute];
