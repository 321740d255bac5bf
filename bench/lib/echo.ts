import type { LoadResult, LoadSpec } from "./load.js";
import { loud } from "./output.js";
import { postJson } from "./service.js";

// The echo workload the performance benchmarks drive: POST /api/execute {task: "echo"} through the
// router, and POST /api/tools/echo directly on the provider endpoint.

export const ECHO_MESSAGE = "bench";

export type EchoSpec = Omit<LoadSpec, "seconds">;

/** The direct provider call and the routed execute, one connection each (callers set their own). */
export function echoScenarios(baseUrl: string, apiKey: string): { direct: EchoSpec; execute: EchoSpec } {
  const json = { "content-type": "application/json" };
  const direct = {
    scenario: "direct POST /api/tools/echo",
    url: `${baseUrl}/api/tools/echo`,
    headers: json,
    body: JSON.stringify({ input: { message: ECHO_MESSAGE } }),
    connections: 1,
  };
  const execute = {
    scenario: "router POST /api/execute",
    url: `${baseUrl}/api/execute`,
    headers: { ...json, authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ task: "echo", input: { message: ECHO_MESSAGE } }),
    connections: 1,
  };
  return { direct, execute };
}

/** One request of each kind before any load, so a broken path fails with its own error message. */
export async function preflightEcho(specs: readonly EchoSpec[]): Promise<void> {
  for (const spec of specs) {
    const res = await postJson(spec.url, JSON.parse(spec.body), spec.headers);
    const echoed = res.json?.output?.echo?.message;
    if (res.status !== 200 || echoed !== ECHO_MESSAGE) {
      throw new Error(`${spec.scenario}: answered ${res.status}: ${JSON.stringify(res.json).slice(0, 600)}`);
    }
  }
}

/** Says loudly what went wrong in a run; true when anything did. */
export function reportFailures(m: LoadResult, label = `${m.scenario} c=${m.connections}`): boolean {
  const bad = m.non2xx + m.other2xx + m.errors;
  if (bad === 0) return false;
  loud(
    `${label}: ${m.non2xx} non-2xx, ${m.other2xx} non-200 2xx (e.g. 202 pending), ` +
      `${m.errors} errors (${m.timeouts} timeouts); status codes ${JSON.stringify(m.statusCodes)}`,
  );
  for (const sample of m.errorSamples) loud(`  error: ${sample}`);
  return true;
}
