import Koa from "koa";
import { getConfig } from "../shared/config.js";
import { mcpMiddleware } from "./mcp/mount.js";
import { MemoRouter } from "./memo-router.js";
import { errors } from "./middleware/errors.js";
import { jsonBody } from "./middleware/json-body.js";
import { httpMetrics } from "./middleware/metrics.js";
import { requestId } from "./middleware/request-id.js";
import { securityHeaders } from "./middleware/security-headers.js";
import { httpTrace } from "./middleware/tracing.js";
import { mountRoutes } from "./mount.js";
import { queueDashboard } from "./queue-dashboard.js";
import type { AppState, RouteDef } from "./route.js";
import { adminRoutes } from "./routes/admin.js";
import { approvalRoutes } from "./routes/approvals.js";
import { catalogRoutes } from "./routes/catalog.js";
import { connectorRoutes } from "./routes/connectors.js";
import { cryptoRoutes } from "./routes/crypto.js";
import { devRoutes } from "./routes/dev.js";
import { discoveryRoutes } from "./routes/discovery.js";
import { executeRoutes } from "./routes/execute.js";
import { jwksRoutes } from "./routes/jwks.js";
import { keyRoutes } from "./routes/keys.js";
import { operationsRoutes } from "./routes/operations.js";
import { pageRoutes, withHomePage } from "./routes/pages.js";
import { quickstartRoutes } from "./routes/quickstart.js";
import { receiptRoutes } from "./routes/receipts.js";
import { sellerRoutes } from "./routes/seller.js";
import { systemRoutes } from "./routes/system.js";
import { toolRoutes } from "./routes/tools.js";
import { tumblerRoutes } from "./routes/tumbler.js";
import { verificationRoutes } from "./routes/verification.js";
import { walletRoutes } from "./routes/wallet.js";
import { welcomeRoutes } from "./routes/welcome.js";
import { x402Routes } from "./routes/x402.js";
import { x402DiscoveryRoutes } from "./routes/x402-discovery.js";
import { x402GatewayRoutes } from "./routes/x402-gateway.js";

/** Every route the API serves, in one explicit list (OpenAPI is generated from it). */
export function allRoutes(): RouteDef[] {
  return [
    ...quickstartRoutes,
    ...toolRoutes,
    ...welcomeRoutes,
    ...systemRoutes,
    ...executeRoutes,
    ...approvalRoutes,
    ...keyRoutes,
    ...receiptRoutes,
    ...catalogRoutes,
    ...sellerRoutes,
    ...adminRoutes,
    ...operationsRoutes,
    ...walletRoutes,
    ...cryptoRoutes,
    ...x402Routes(allRoutes),
    ...x402GatewayRoutes,
    ...x402DiscoveryRoutes,
    ...tumblerRoutes,
    ...verificationRoutes,
    ...connectorRoutes,
    ...jwksRoutes,
    // The local chain's info and faucet exist only under DEV_CHAIN=1 (docs/payments.md "DEV_CHAIN=1").
    ...(getConfig().devChain ? devRoutes : []),
    // The MCP transport is mounted beside these routes (createApp): discovery documents describe it.
    ...discoveryRoutes(allRoutes, { mcp: true }).map((r) => (r.path === "/" ? withHomePage(r) : r)),
    // Pages for people (docs/operations.md "Pages"); GET / above serves browsers the home page.
    ...pageRoutes,
  ];
}

export function createApp(): Koa<AppState> {
  const app = new Koa<AppState>();
  app.proxy = true;
  const router = new MemoRouter();
  mountRoutes(router, allRoutes());

  app.use(requestId as Koa.Middleware<AppState>);
  app.use(securityHeaders as Koa.Middleware<AppState>);
  app.use(httpMetrics as Koa.Middleware<AppState>);
  app.use(httpTrace as Koa.Middleware<AppState>);
  app.use(errors as Koa.Middleware<AppState>);
  // /admin/queues: bull-board for the operator (docs/operations.md "Queue dashboard"); before jsonBody.
  app.use(queueDashboard() as unknown as Koa.Middleware<AppState>);
  app.use(jsonBody as Koa.Middleware<AppState>);
  // /mcp: MCP tools over Streamable HTTP, each a call to one of these routes (docs/mcp.md).
  app.use(mcpMiddleware(allRoutes) as unknown as Koa.Middleware<AppState>);
  app.use(router.routes());
  // Not `throw: true`: then @koa/router would skip the Allow header; the error middleware renders 405/501.
  app.use(router.allowedMethods());
  app.silent = true;
  return app;
}
