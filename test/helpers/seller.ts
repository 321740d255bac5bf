import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";

export interface SellerCall {
  headers: IncomingMessage["headers"];
  body: any;
  /** The exact bytes received: what a signature is checked against. */
  raw: Buffer;
}

export type SellerHandler = (call: SellerCall, res: ServerResponse, index: number) => void | Promise<void>;

export interface TestSeller {
  url: string;
  calls: SellerCall[];
  close(): Promise<void>;
}

/** A real seller endpoint on loopback; the handler decides each answer (index counts calls from 0). */
export async function startSeller(handler: SellerHandler): Promise<TestSeller> {
  const calls: SellerCall[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    const text = raw.toString("utf8");
    const call = { headers: req.headers, body: text ? JSON.parse(text) : undefined, raw };
    calls.push(call);
    await handler(call, res, calls.length - 1);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/invoke`,
    calls,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

/** A seller whose answers wait until release() is called: for in-flight, 409 and 202 cases. */
export async function startGatedSeller(
  output: unknown = { done: true },
): Promise<TestSeller & { release(): void }> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const seller = await startSeller(async (_call, res) => {
    await gate;
    json(res, 200, { success: true, output });
  });
  return { ...seller, release };
}
