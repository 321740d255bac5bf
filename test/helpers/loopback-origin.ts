import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface SeenRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface LoopbackOrigin {
  /** http://127.0.0.1:<port> */
  origin: string;
  port: number;
  seen: SeenRequest[];
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A real HTTP origin on loopback for outbound-boundary tests. Routes:
 *   /redirect?status=302&to=<url>   answers status with Location: to (no Location when to is absent)
 *   /chain/<n>?delay=<ms>           redirects to /chain/<n-1> after delay; /chain/0 answers "end"
 *   /echo                           answers JSON {method, body, authorization}
 *   /big?bytes=<n>&chunked=1        answers n bytes (chunked: without content-length, in pieces)
 *   /stall                          answers 200 and the start of a body, then nothing more
 */
export async function startLoopbackOrigin(): Promise<LoopbackOrigin> {
  const seen: SeenRequest[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? "/", "http://x");
    const body = Buffer.concat(chunks).toString("utf8");
    seen.push({ method: req.method ?? "", path: url.pathname, headers: req.headers, body });
    const chain = /^\/chain\/(\d+)$/.exec(url.pathname);
    if (url.pathname === "/redirect") {
      const to = url.searchParams.get("to");
      res.writeHead(Number(url.searchParams.get("status") ?? 302), to ? { location: to } : {});
      res.end("moved");
    } else if (chain) {
      await sleep(Number(url.searchParams.get("delay") ?? 0));
      const n = Number(chain[1]);
      if (n === 0) res.end("end");
      else {
        res.writeHead(302, { location: `/chain/${n - 1}${url.search}` });
        res.end("x".repeat(10_000)); // redirect bodies are drained, never counted against maxBytes
      }
    } else if (url.pathname === "/echo") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ method: req.method, body, authorization: req.headers.authorization ?? null }));
    } else if (url.pathname === "/big") {
      const bytes = Number(url.searchParams.get("bytes"));
      if (url.searchParams.get("chunked")) {
        for (let sent = 0; sent < bytes; sent += 1024) res.write("y".repeat(Math.min(1024, bytes - sent)));
        res.end();
      } else res.end("y".repeat(bytes));
    } else if (url.pathname === "/stall") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("the start, and then nothing");
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    port,
    seen,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
