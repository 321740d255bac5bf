import http from "node:http";

// The bench's own small HTTP servers (bench/execute/upstream.ts, bench/execute/floor.ts): plain
// node:http with no framework, so that what they cost is the least a Node server can.

export function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

export function answer(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { "content-type": "application/json" }).end(body);
}

/** The port a child server takes as its first argument; exits with `usage` when there is none. */
export function portArgument(usage: string): number {
  const port = Number(process.argv[2]);
  if (!Number.isInteger(port) || port <= 0) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  return port;
}

/**
 * Serves `handle` on 127.0.0.1:port with connections kept alive, prints `ready` once listening, and
 * closes on SIGTERM. A handler that throws answers 500 with the error's message.
 */
export function serveBare(
  port: number,
  ready: string,
  handle: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>,
  onClose: () => Promise<void> = async () => {},
): void {
  const server = http.createServer((req, res) => {
    handle(req, res).catch((err: Error) => answer(res, 500, JSON.stringify({ error: err.message })));
  });
  server.keepAliveTimeout = 60_000;
  server.listen(port, "127.0.0.1", () => console.log(ready));
  process.once("SIGTERM", () => server.close(() => void onClose().finally(() => process.exit(0))));
}
