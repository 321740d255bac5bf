import type { Server } from "node:http";
import { Agent, request } from "undici";
import { createHttpServer } from "../../api/http-server.js";
import { categoryOf, pageCounts, registryPagesScenario, type Scenario } from "./scenarios.js";

// GET /api/capabilities over loopback HTTP: the whole catalog page as a client gets it, from the API's
// own server started in this process on its first call (one keep-alive connection per concurrent caller)
// and stopped by stopHttpPages. What the in-process scenarios leave out is here: Koa, the body handed to
// the socket and the client reading it (a page of 100 records is ~2.8 MB).

let served: { server: Server; agent: Agent; base: string } | undefined;

async function serve(): Promise<{ agent: Agent; base: string }> {
  if (!served) {
    const server = createHttpServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    if (!address || typeof address === "string") throw new Error("bench: the API server has no port");
    served = { server, agent: new Agent({ connections: 64 }), base: `http://127.0.0.1:${address.port}` };
  }
  return served;
}

/** Stops the API server the HTTP scenarios started, if any. */
export async function stopHttpPages(): Promise<void> {
  if (!served) return;
  const { server, agent } = served;
  served = undefined;
  await agent.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/**
 * The registry lane's browse pages at limit 100 over HTTP, pages kept; with `keptRecords`, listing
 * records kept too (shared/catalog/record-cache.ts).
 */
export function httpPageScenario(options: { keptRecords: boolean }): Scenario {
  return registryPagesScenario(
    "GET /api/capabilities over HTTP",
    options.keptRecords,
    async (_knex, category) => {
      const { agent, base } = await serve();
      const query = new URLSearchParams({ visibility: "registry", limit: "100" });
      const named = categoryOf(category);
      if (named) query.set("category", named);
      const answer = await request(`${base}/api/capabilities?${query}`, { dispatcher: agent });
      // Read through, keeping the tail that holds the total: a client's own join of the 2.8 MB (its
      // fresh buffer, faulted in) is the client's cost, not the API's.
      let tail = Buffer.alloc(0);
      for await (const chunk of answer.body) tail = Buffer.concat([tail, chunk]).subarray(-4096);
      if (answer.statusCode !== 200) throw new Error(`GET /api/capabilities answered ${answer.statusCode}`);
      return pageCounts(tail.toString(), 100);
    },
  );
}
