// The system context's public surface: liveness (/api/health), market-wide counts (/api/stats) and the
// quickstart wire shapes. Reads counts across tables and owns none. Depends on no context.

export { checkHealth, marketStats } from "./health.js";
export { QuickstartBody, QuickstartInfo, QuickstartResult } from "./schemas.js";
