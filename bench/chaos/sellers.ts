import { createServer, type Server } from "node:http";
import type { Random } from "./random.js";

// Seller endpoints on loopback that misbehave on a random schedule: answer (after a random delay, so a
// worker may die mid-call), hang (never answer: the router's deadline ends the call), reset the
// connection, or answer garbage (200 with a body that is not the seller protocol).

export type SellerBehaviour = "answer" | "hang" | "reset" | "garbage";

export interface ChaosSeller {
  url: string;
  served: Record<SellerBehaviour, number>;
  /** From now on every call is answered (the drain: no new faults). */
  behave(): void;
  close(): Promise<void>;
}

export async function startChaosSeller(
  random: Random,
  weights: Record<SellerBehaviour, number>,
): Promise<ChaosSeller> {
  const served: Record<SellerBehaviour, number> = { answer: 0, hang: 0, reset: 0, garbage: 0 };
  let faulty = true;
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const behaviour: SellerBehaviour = faulty ? random.weighted(weights) : "answer";
    served[behaviour] += 1;
    if (behaviour === "hang") return;
    if (behaviour === "reset") {
      req.socket.destroy();
      return;
    }
    await new Promise((r) => setTimeout(r, random.int(0, 1200)));
    if (behaviour === "garbage") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        random.pick(['{"success": tru', "<html>502 Bad Gateway</html>", '{"output": 42}', "\u0000\u0001"]),
      );
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ success: true, output: { bytes: Buffer.concat(chunks).length } }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/invoke`,
    served,
    behave() {
      faulty = false;
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
