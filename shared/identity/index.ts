// The identity context's public surface: agents, API keys (creation, rotation, revocation), the
// principal a request authenticates as, key scopes and powers, daily spend limits and per-client request
// limits. Owns agents, api_keys, api_key_spend_days. Depends on audit.
//
// Revoking a key settles what routing holds pending under it; routing sits above, so the caller passes
// routing's settler in (SettlePendingOfRevokedKey in key-management.ts).

export {
  ADMIN_SESSION_COOKIE,
  ADMIN_SESSION_SECONDS,
  hasAdminSession,
  signInAdmin,
} from "./admin-session.js";
export { registerAgent } from "./agents.js";
export type { Principal } from "./auth.js";
export { authenticate, authenticateAdmin, bearerIsWellFormed } from "./auth.js";
export { countClientRequest } from "./client-limits.js";
export { createKey, listKeys, revokeKey, rotateKey } from "./key-management.js";
export type { KeyPolicy, ScopeExclusion } from "./key-policy.js";
export { isScopeExclusion, scopeBlocked, scopeExclusion, scopesExcludeTask } from "./key-policy.js";
export {
  KeyCreateBody,
  KeyCreated,
  KeyList,
  KeyParams,
  KeyResult,
  KeyRevokeBody,
  KeyRotateBody,
} from "./schemas.js";
export {
  assertWithinSpendLimits,
  DailyCapFull,
  dailyCapRefusal,
  reserveDailySpend,
  reserveDailySpendTogether,
  returnDailySpend,
  SPEND_DAY_STAMP,
  settleDailySpend,
  settleDailySpendTogether,
  withinPerCallLimit,
} from "./spend-limits.js";
export type { AgentRow } from "./store/agents.js";
export { findOwnedApiKey } from "./store/api-keys.js";
