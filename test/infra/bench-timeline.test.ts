import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  criticalPath,
  PAID_SEGMENTS,
  paidCriticalPath,
  pathTail,
  SEGMENTS,
} from "../../bench/execute/timeline.js";
import type { TimelineEvent } from "../../bench/execute/timeline-hook.js";
import { freePort } from "../../shared/infra/free-port.js";

// BENCH_TIMELINE=1 (bench/execute/timeline.ts, docs/benchmarks.md "The thirteenth round"): the hook
// stamps, inside the service, requests received and socket traffic by peer, and the parser reads an
// execute's critical path from them. Its conclusions rest on both: the hook must see Node's real HTTP
// traffic as such, and the parser must find each execute's steps in order, past unrelated traffic.

const PATHS = { execute: "/api/execute", provider: "/api/tools/echo" };

/** An execute's stamps: its request received at t, then each step `gap` µs after the one before. */
function stamps(t: number, steps: [gap: number, kind: string][]): TimelineEvent[] {
  const events: TimelineEvent[] = [[t, "in /api/execute"]];
  let at = t;
  for (const [gap, kind] of steps) {
    at += gap;
    events.push([at, kind]);
  }
  return events;
}

/** One free execute's stamps, starting at t, with the given gaps (µs) between its ten steps. */
function execute(t: number, gaps: number[]): TimelineEvent[] {
  const kinds = ["pg>", "pg<", "call>", "in /api/tools/echo", "answer>", "call<", "pg>", "pg<", "answer>"];
  return stamps(
    t,
    kinds.map((kind, i) => [gaps[i]!, kind]),
  );
}

describe("the critical path parser", () => {
  it("measures each segment from one step to the next, past traffic that is not a step", () => {
    const gaps = [500, 1200, 300, 100, 200, 50, 400, 1100, 350];
    const one = execute(1_000, gaps);
    // A Redis script overlapping the claim, a second write of the call, the answer's body in two writes.
    const noisy: TimelineEvent[] = [
      ...one.slice(0, 2),
      [one[1]![0] + 10, "redis>"],
      [one[1]![0] + 20, "redis<"],
      ...one.slice(2, 4),
      [one[3]![0] + 5, "call>"],
      ...one.slice(4),
      [one[9]![0] + 5, "answer>"],
    ];
    const path = criticalPath([...noisy, ...execute(20_000, gaps)], PATHS);
    expect(path.matched).toBe(2);
    expect(path.unmatched).toBe(0);
    // received→claim sent, claim, claim→call, call (sent → answer read), →outcome, outcome, →answer.
    expect(path.segments).toEqual([500, 1200, 300, 350, 400, 1100, 350].map((g) => [g, g]));
    expect(path.totals).toEqual([4200, 4200]);
    expect(path.segments).toHaveLength(SEGMENTS.length);
  });

  it("counts apart an execute whose steps are not all found before the next one starts", () => {
    const gaps = [500, 1200, 300, 100, 200, 50, 400, 1100, 350];
    const cut = execute(1_000, gaps).slice(0, 7); // its outcome never written
    const path = criticalPath([...cut, ...execute(20_000, gaps)], PATHS);
    expect(path.matched).toBe(1);
    expect(path.unmatched).toBe(1);
    expect(path.totals).toEqual([4200]);
  });

  it("says which segment the slowest 1 % of executes is made of", () => {
    const usual = [500, 1200, 300, 100, 200, 50, 400, 1100, 350];
    // 198 usual executes, one whose outcome's round trip took 9 ms more, one whose claim was sent 5 ms late.
    const slowOutcome = usual.map((g, i) => (i === 7 ? g + 9_000 : g));
    const lateClaim = usual.map((g, i) => (i === 0 ? g + 5_000 : g));
    const events = [
      ...Array.from({ length: 198 }, (_, n) => execute(n * 100_000, usual)),
      execute(198 * 100_000, slowOutcome),
      execute(199 * 100_000, lateClaim),
    ].flat();
    const tail = pathTail(criticalPath(events, PATHS));
    // 1 % of 200: the two slowest, averaged segment by segment.
    expect(tail.executes).toBe(2);
    expect(tail.segments).toEqual([3000, 1200, 300, 350, 400, 5600, 350]);
    expect(tail.total).toBe(4200 + 7000);
    // At least one execute, however few there are.
    expect(pathTail(criticalPath(execute(0, usual), PATHS)).executes).toBe(1);
  });
});

describe("the paid critical path parser", () => {
  // One flight for the hold and one for the capture; the seller is another process (no request inside).
  const usual: [number, string][] = [
    [400, "pg>"],
    [900, "pg<"],
    [200, "call>"],
    [300, "call<"],
    [150, "pg>"],
    [1000, "pg<"],
    [250, "answer>"],
  ];

  it("measures each PostgreSQL phase from its first write to its last answer, past Redis traffic", () => {
    // The second execute reads the custody switch afresh before its hold's flight: one more round trip;
    // pg writes a flight message by message.
    const twoFlights: [number, string][] = [
      [400, "pg>"],
      [0, "pg>"],
      [300, "pg<"],
      [50, "redis>"],
      [20, "redis<"],
      [30, "pg>"],
      [900, "pg<"],
      ...usual.slice(2),
    ];
    const path = paidCriticalPath([...stamps(1_000, usual), ...stamps(50_000, twoFlights)], "/api/execute");
    expect(path.kind).toBe("paid");
    expect(path.matched).toBe(2);
    expect(path.unmatched).toBe(0);
    expect(path.segments).toHaveLength(PAID_SEGMENTS.length);
    expect(path.segments).toEqual([
      [400, 400],
      [900, 300 + 50 + 20 + 30 + 900],
      [200, 200],
      [300, 300],
      [150, 150],
      [1000, 1000],
      [250, 250],
    ]);
    expect(path.totals).toEqual([3200, 3200 + 400]);
    expect(path.flights).toEqual({ hold: [1, 2], capture: [1, 1] });
  });

  it("counts apart an execute with no PostgreSQL phase on one side of its call, or no answer", () => {
    const noCapture = usual.filter((_, i) => i !== 4 && i !== 5);
    const noAnswer = usual.slice(0, 6);
    const path = paidCriticalPath(
      [...stamps(1_000, noCapture), ...stamps(50_000, noAnswer), ...stamps(100_000, usual)],
      "/api/execute",
    );
    expect(path.matched).toBe(1);
    expect(path.unmatched).toBe(2);
    expect(path.totals).toEqual([3200]);
  });
});

describe("the hook", () => {
  it("stamps a request received, and a call to the process's own port with its answer, by peer", async () => {
    const hook = fileURLToPath(new URL("../../dist/bench/execute/timeline-hook.js", import.meta.url));
    const file = join(mkdtempSync(join(os.tmpdir(), "timeline-test-")), "events.json");
    const port = await freePort();
    // A server on PORT that the same process calls twice on one kept-alive connection (a write before
    // the socket connects has no peer yet, as in the service, whose pools are connected), then asks the
    // hook for its stamps.
    const script = `
      const http = require("node:http");
      const agent = new http.Agent({ keepAlive: true });
      const server = http.createServer((req, res) => { req.resume(); req.on("end", () => res.end("ok")); });
      const call = (then) => {
        const req = http.request({ port: ${port}, host: "127.0.0.1", path: "/api/tools/echo", method: "POST", agent }, (res) => {
          res.resume();
          res.on("end", () => setTimeout(then, 20));
        });
        req.end("{}");
      };
      server.listen(${port}, "127.0.0.1", () => call(() => call(() => {
        process.kill(process.pid, "SIGUSR2");
        setTimeout(() => process.exit(0), 100);
      })));`;
    const run = spawnSync(process.execPath, ["--import", hook, "-e", script], {
      env: { ...process.env, PORT: String(port), BENCH_TIMELINE_FILE: file },
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const kinds = (JSON.parse(readFileSync(file, "utf8")) as TimelineEvent[]).map((e) => e[1]);
    // The second call, from the first one's answer read on.
    const second = kinds.slice(kinds.indexOf("call<") + 1);
    const first = (kind: string) => second.indexOf(kind);
    for (const kind of ["call>", "in /api/tools/echo", "answer>", "call<"]) expect(second).toContain(kind);
    expect(first("call>")).toBeLessThan(first("in /api/tools/echo"));
    expect(first("in /api/tools/echo")).toBeLessThan(first("answer>"));
    expect(first("answer>")).toBeLessThan(first("call<"));
  });

  it("names PostgreSQL reached over its Unix socket (DATABASE_URL's ?host=) pg, and no other socket", () => {
    const hook = fileURLToPath(new URL("../../dist/bench/execute/timeline-hook.js", import.meta.url));
    const dir = mkdtempSync(join(os.tmpdir(), "timeline-test-"));
    const file = join(dir, "events.json");
    // A server on the socket path pg would connect to (<dir>/.s.PGSQL.<port>) and one on another path,
    // both in the hooked process: each answers one write, then the hook is asked for its stamps.
    const script = `
      const net = require("node:net");
      const serve = (path) => new Promise((resolve) => {
        const server = net.createServer((s) => s.on("data", () => s.write("r")));
        server.listen(path, () => resolve());
      });
      const ask = (path, then) => {
        const socket = net.connect(path, () => socket.write("q"));
        socket.once("data", () => { socket.end(); then(); });
      };
      const pg = ${JSON.stringify(join(dir, ".s.PGSQL.5433"))};
      const other = ${JSON.stringify(join(dir, "other.sock"))};
      Promise.all([serve(pg), serve(other)]).then(() => ask(other, () => ask(pg, () => {
        process.kill(process.pid, "SIGUSR2");
        setTimeout(() => process.exit(0), 100);
      })));`;
    const run = spawnSync(process.execPath, ["--import", hook, "-e", script], {
      env: {
        ...process.env,
        DATABASE_URL: `postgres://postgres@localhost:5433/db?host=${encodeURIComponent(dir)}`,
        BENCH_TIMELINE_FILE: file,
      },
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const kinds = (JSON.parse(readFileSync(file, "utf8")) as TimelineEvent[]).map((e) => e[1]);
    // Only the client's side of the PostgreSQL socket is named: its write, then the answer it read.
    expect(kinds).toEqual(["pg>", "pg<"]);
  });

  it("names the paid execute's seller, another process, a call", async () => {
    const hook = fileURLToPath(new URL("../../dist/bench/execute/timeline-hook.js", import.meta.url));
    const file = join(mkdtempSync(join(os.tmpdir(), "timeline-test-")), "events.json");
    const [port, sellerPort] = [await freePort(), await freePort()];
    // The seller runs in this test's process; the hooked child calls it twice on one kept-alive connection.
    const seller = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => res.end("ok"));
    });
    await new Promise<void>((resolve) => seller.listen(sellerPort, "127.0.0.1", resolve));
    const script = `
      const http = require("node:http");
      const agent = new http.Agent({ keepAlive: true });
      const call = (then) => {
        const req = http.request({ port: ${sellerPort}, host: "127.0.0.1", path: "/seller", method: "POST", agent }, (res) => {
          res.resume();
          res.on("end", () => setTimeout(then, 20));
        });
        req.end("{}");
      };
      call(() => call(() => {
        process.kill(process.pid, "SIGUSR2");
        setTimeout(() => process.exit(0), 100);
      }));`;
    try {
      const run = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ["--import", hook, "-e", script], {
          env: {
            ...process.env,
            PORT: String(port),
            BENCH_TIMELINE_FILE: file,
            BENCH_TIMELINE_SELLER_PORT: String(sellerPort),
          },
          stdio: ["ignore", "ignore", "pipe"],
        });
        let stderr = "";
        child.stderr.on("data", (d) => {
          stderr += String(d);
        });
        child.on("exit", (status) => resolve({ status, stderr }));
      });
      expect(run.status, run.stderr).toBe(0);
    } finally {
      seller.close();
    }
    const kinds = (JSON.parse(readFileSync(file, "utf8")) as TimelineEvent[]).map((e) => e[1]);
    const second = kinds.slice(kinds.indexOf("call<") + 1);
    expect(second).toContain("call>");
    expect(second.indexOf("call>")).toBeLessThan(second.indexOf("call<"));
  });
});
