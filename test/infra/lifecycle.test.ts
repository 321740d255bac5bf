import { describe, expect, it } from "vitest";
import { onShutdown, shutdown } from "../../shared/lifecycle.js";

// Shutdown phases (shared/lifecycle.ts). In the all-in-one process the workers and the runs in requests
// call first-party tools through the process's own HTTP server, so they must have drained before it
// stops listening: a refused connection would fail the call and count against the tool's circuit.

describe("shutdown phases", () => {
  it("drains hosted work before the HTTP server closes, and that before clients and the database", async () => {
    const order: string[] = [];
    const slow = (name: string, ms: number) => async () => {
      order.push(`${name} start`);
      await new Promise((resolve) => setTimeout(resolve, ms));
      order.push(`${name} end`);
    };
    onShutdown("database", "database", slow("database", 1));
    onShutdown("http server", "ingress", slow("http server", 1));
    onShutdown("queues", "clients", slow("queues", 1));
    onShutdown("executions run here", "hosted work", slow("runs here", 30));
    onShutdown("worker executions", "hosted work", slow("worker", 10));
    await shutdown("test");
    const at = (entry: string) => order.indexOf(entry);
    expect(at("runs here end")).toBeLessThan(at("http server start"));
    expect(at("worker end")).toBeLessThan(at("http server start"));
    expect(at("http server end")).toBeLessThan(at("queues start"));
    expect(at("queues end")).toBeLessThan(at("database start"));
  });
});
