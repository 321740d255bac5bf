import type { Basis } from "./basis.js";
import type { ReadinessChecks } from "./completeness.js";
import { unique } from "./values.js";

/**
 * Export profiles say whether a listing's data meets what each external directory needs. `candidate`
 * means the record is complete enough to be proposed there; the service itself exports nothing.
 */

export type ExportStatus = "candidate" | "not_ready";

export interface ExportProfile {
  status: ExportStatus;
  /** Only for candidates: the URL the directory entry would point at. */
  endpoint?: string;
  blockers: string[];
}

function profile(blockers: string[], endpoint: string): ExportProfile {
  return blockers.length === 0
    ? { status: "candidate", endpoint, blockers: [] }
    : { status: "not_ready", blockers };
}

/**
 * The seven profiles of the spec. x402 directories need a paid x402 price behind an open paid gate;
 * the agent directories need an autonomously callable listing; the cloud marketplaces also need the
 * descriptive and policy fields their listing forms ask for.
 */
export function buildExportProfiles(b: Basis, checks: ReadinessChecks) {
  const base = b.facts.baseUrl;
  const x402Invoke = `${base}${b.paths.x402Invoke}`;
  const directInvoke = `${base}${b.paths.directInvoke}`;
  // Skyfire lists services buyers pay per call, so a free listing has nothing to list there.
  const paidDirectory = unique([
    ...(b.requiresPayment ? [] : ["no_paid_price"]),
    ...checks.paidAutonomous,
  ]).filter((blocker) => blocker !== "not_a_paid_listing");
  return {
    x402_bazaar: profile(checks.x402Export, x402Invoke),
    x402_ecosystem: profile(checks.x402Export, `${base}${b.paths.x402Discover}`),
    agora402: profile(checks.x402Export, x402Invoke),
    skyfire_directory: profile(paidDirectory, directInvoke),
    agent_bazaar: profile(checks.autonomous, directInvoke),
    google_cloud_marketplace: profile(checks.externalMarketplaceExport, directInvoke),
    salesforce_agentexchange: profile(checks.externalMarketplaceExport, directInvoke),
  };
}

export type ExportProfiles = ReturnType<typeof buildExportProfiles>;
