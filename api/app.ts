import Router from "@koa/router";
import Koa from "koa";
import { errors } from "./middleware/errors.js";
import { jsonBody } from "./middleware/json-body.js";
import { requestId } from "./middleware/request-id.js";
import { mountRoutes } from "./mount.js";
import type { AppState, RouteDef } from "./route.js";
import { adminRoutes } from "./routes/admin.js";
import { catalogRoutes } from "./routes/catalog.js";
import { discoveryRoutes } from "./routes/discovery.js";
import { executeRoutes } from "./routes/execute.js";
import { jwksRoutes } from "./routes/jwks.js";
import { quickstartRoutes } from "./routes/quickstart.js";
import { receiptRoutes } from "./routes/receipts.js";
import { sellerRoutes } from "./routes/seller.js";
import { systemRoutes } from "./routes/system.js";
import { toolRoutes } from "./routes/tools.js";
import { welcomeRoutes } from "./routes/welcome.js";

/** Every route the API serves, in one explicit list (OpenAPI is generated from it). */
export function allRoutes(): RouteDef[] {
  return [
    ...quickstartRoutes,
    ...toolRoutes,
    ...welcomeRoutes,
    ...systemRoutes,
    ...executeRoutes,
    ...receiptRoutes,
    ...catalogRoutes,
    ...sellerRoutes,
    ...adminRoutes,
    ...jwksRoutes,
    ...discoveryRoutes(allRoutes),
  ];
}

export function createApp(): Koa<AppState> {
  const app = new Koa<AppState>();
  app.proxy = true;
  const router = new Router();
  mountRoutes(router, allRoutes());

  app.use(requestId as Koa.Middleware<AppState>);
  app.use(errors as Koa.Middleware<AppState>);
  app.use(jsonBody as Koa.Middleware<AppState>);
  app.use(router.routes());
  // Not `throw: true`: then @koa/router would skip the Allow header; the error middleware renders 405/501.
  app.use(router.allowedMethods());
  app.silent = true;
  return app;
}
