// The verification context's public surface (docs/verification.md): paid, read-only probes of a buyer's
// endpoint (http-json, x402, mcp) through the safe-fetch boundary, Ed25519-signed attestations anyone can
// verify against our JWKS, monitoring subscriptions and their runs, and the agent connector records.
// Owns verification_orders, attestations, monitoring_subscriptions, monitoring_runs, connectors.
// Depends on outbox, identity, money (ledger holds, evidence, the gate), catalog (reads a listing's
// output_schema; never writes a listing) and routing (the platform signing key and JWKS).

export { verifyAttestationJws } from "./attestations.js";
export type { ConnectorInput } from "./connectors.js";
export {
  connectorView,
  createConnector,
  disableOwnConnector,
  listConnectors,
  probeConnector,
  readConnector,
} from "./connectors.js";
export type { RunOutcome } from "./monitoring.js";
export {
  cancelMonitoring,
  createMonitoring,
  processMonitoringRun,
  readOwnSubscription,
  subscriptionView,
} from "./monitoring.js";
export type { OrderReader, OrderRequest, OrderSubmission, ProcessOutcome } from "./orders.js";
export {
  abandonOrder,
  abandonStaleOrders,
  createOrder,
  orderView,
  processOrder,
  readOrder,
  rerunOrder,
} from "./orders.js";
export { readAttestation, verifyAttestation } from "./public-attestations.js";
export {
  AttestationParams,
  AttestationView,
  ConnectorBody,
  ConnectorList,
  ConnectorParams,
  ConnectorRecord,
  MonitoringBody,
  OrderBody,
  OrderParams,
  OrderView,
  RerunBody,
  SubscriptionParams,
  SubscriptionView,
  Surface,
  VerificationIdempotencyKey,
  VerifyBody,
  VerifyResult,
} from "./schemas.js";
export { VERIFICATION_ROUTES, verificationSurface } from "./surface.js";
export { redactTarget, VERIFICATION_PRICE_MICROS } from "./terms.js";
