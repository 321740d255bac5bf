// The operations context's public surface: what operators read and steer (docs/operations.md): the
// /metrics gauges computed from money rows and breakers, the money console (failed or stuck payouts,
// settlements and deposits with their evidence; retry and re-check), and the public status page's
// facts. Owns no table: it composes money, x402, routing, catalog and system. Depends on audit, outbox,
// system, tools, money, catalog, routing and x402.

export { moneyConsole } from "./console.js";
export { serviceMetrics } from "./metrics.js";
export { serviceStatus } from "./status.js";
