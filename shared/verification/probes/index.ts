import type { Protocol } from "../store/orders.js";
import { probeHttpJson } from "./http-json.js";
import { probeMcp } from "./mcp.js";
import type { ProbeResult, ProbeTarget } from "./types.js";
import { probeX402 } from "./x402.js";

export { listMcpTools } from "./mcp.js";
export type { ProbeResult, ProbeTarget } from "./types.js";

const PROBES: Record<Protocol, (target: ProbeTarget) => Promise<ProbeResult>> = {
  "http-json": probeHttpJson,
  x402: probeX402,
  mcp: probeMcp,
};

/** Runs the protocol's probe. Target failures become a `failed` verdict; only our own faults throw. */
export function runProbe(protocol: Protocol, target: ProbeTarget): Promise<ProbeResult> {
  return PROBES[protocol](target);
}
