import { hostedTools } from "../catalog/index.js";
import { checkHealth, marketStats } from "../system/index.js";

/** The public status page's facts: dependencies, queues, the hosted tools' uptime, market counts. */
export async function serviceStatus() {
  const [health, tools, stats] = await Promise.all([checkHealth(), hostedTools(), marketStats()]);
  return { health, tools, stats };
}
