import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type Server } from "node:http";
import { getConfig } from "../config.js";
import { METRICS_CONTENT_TYPE, metricsText } from "./metrics.js";

/**
 * A worker process's own /metrics on WORKER_METRICS_PORT (docs/operations.md "Metrics"): a bare
 * node:http server that answers GET /metrics (bearer METRICS_TOKEN when set) and 404 to anything else.
 */
export async function startMetricsServer(port: number, host = "0.0.0.0"): Promise<Server> {
  const server = createServer(async (req, res) => {
    if (req.method !== "GET" || req.url?.split("?")[0] !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    const token = getConfig().metricsToken;
    if (token) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "");
      const digest = (v: string) => createHash("sha256").update(v).digest();
      if (!match || !timingSafeEqual(digest(match[1]!), digest(token))) {
        res
          .writeHead(401, { "content-type": "text/plain" })
          .end("send Authorization: Bearer <METRICS_TOKEN>\n");
        return;
      }
    }
    try {
      const body = await metricsText();
      res.writeHead(200, { "content-type": METRICS_CONTENT_TYPE, "cache-control": "no-store" }).end(body);
    } catch {
      res.writeHead(500, { "content-type": "text/plain" }).end("metrics unavailable\n");
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
