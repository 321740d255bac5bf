import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answerLabel, ChaosClient } from "../../bench/chaos/client.js";
import { Random } from "../../bench/chaos/random.js";
import { formatSeen } from "../../bench/chaos/verify.js";

// The chaos client says what an operation kept seeing while it retried, so a run that counts one lost
// names the refusal (the gate's reason, say) instead of a bare status.

let server: Server;
let base: string;
let calls = 0;

beforeAll(async () => {
  server = createServer((_req, res) => {
    calls += 1;
    res.setHeader("content-type", "application/json");
    if (calls <= 2) {
      res.statusCode = 503;
      res.end(
        JSON.stringify({
          error: { code: "TEMPORARILY_UNAVAILABLE", details: { reason: "settlement_rpc_unreachable" } },
        }),
      );
      return;
    }
    if (calls === 3) {
      res.statusCode = 502;
      res.end("<html>bad gateway</html>");
      return;
    }
    res.end(JSON.stringify({ invocation_id: "inv-1" }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise((resolve) => server.close(resolve)));

describe("chaos client", () => {
  it("tallies each attempt's answer until the outcome", async () => {
    calls = 0;
    const client = new ChaosClient([base], new Random(7), 60_000);
    const sent = await client.send("POST", "/x", { body: {} });
    expect(sent.attempts).toBe(4);
    expect(sent.answer?.body).toEqual({ invocation_id: "inv-1" });
    expect(sent.seen).toEqual({
      "503 TEMPORARILY_UNAVAILABLE/settlement_rpc_unreachable": 2,
      "502": 1,
      "200": 1,
    });
  });

  it("counts attempts that got no answer", async () => {
    const client = new ChaosClient(["http://127.0.0.1:1"], new Random(7), 0);
    const sent = await client.send("GET", "/", {});
    expect(sent.answer).toBeUndefined();
    expect(sent.seen).toEqual({ "no answer": 1 });
  });

  it("labels an answer by status, code and reason, and lists the tally most frequent first", () => {
    const headers = new Headers();
    expect(answerLabel({ status: 429, body: { error: { code: "RATE_LIMITED" } }, headers })).toBe(
      "429 RATE_LIMITED",
    );
    expect(answerLabel({ status: 500, body: "oops", headers })).toBe("500");
    expect(formatSeen({ "no answer": 1, "503 X/y": 3 })).toBe("503 X/y ×3, no answer ×1");
    expect(formatSeen(undefined)).toBe("none");
  });
});
