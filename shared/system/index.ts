// The system context's public surface: liveness (/api/health), market-wide counts (/api/stats) and the
// quickstart wire shapes, and the invariant checker (docs/reliability.md). Reads counts across tables and owns none. Depends on no context.

export { checkHealth, marketStats } from "./health.js";
export type { InvariantReport, Violation } from "./invariants/check.js";
export { checkInvariants, invariantList, LIVE_JOB_GRACE_SECONDS } from "./invariants/check.js";
export { QuickstartBody, QuickstartInfo, QuickstartResult } from "./schemas.js";
