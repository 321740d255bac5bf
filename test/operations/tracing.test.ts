import { randomBytes, randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { UnrecoverableError } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redirectLogs, withLogScope } from "../../shared/log.js";
import { inSpan, startTracing, stopTracing } from "../../shared/observability/tracing.js";
import { enqueue, getQueue, QUEUES } from "../../shared/queues.js";
import { payloadValidator } from "../../workers/payload.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { json, startSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// Traces and request ids across processes' boundaries (docs/operations.md "Traces"): API → queue →
// worker → seller call, and from a job to the jobs it enqueues (a settlement): one trace, carried in the
// job's meta and the seller call's traceparent header; the request id on every log line of the request
// and of the job it caused. Spans go to an in-memory exporter.

const exporter = new InMemorySpanExporter();
const lines: Record<string, unknown>[] = [];
let service: TestService;

beforeAll(async () => {
  await startTracing("agentmarket-test", [new SimpleSpanProcessor(exporter)]);
  redirectLogs(
    new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    }),
  );
  // Through the queue: the trace under test crosses it (a run in the request has no producer or job span).
  service = await startService({ runHere: false });
});
afterAll(async () => {
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await service.stop();
  await stopTracing();
});

const traceIdOf = (traceparent: string) => traceparent.split("-")[1];
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

describe("a traced execute", () => {
  it("is one trace from the caller's traceparent through the queue and worker to the seller", async () => {
    const seller = await startSeller((_call, res) => json(res, 200, { ok: true }));
    const traceId = randomBytes(16).toString("hex");
    const requestId = `trace-test-${randomBytes(6).toString("hex")}`;
    try {
      const buyer = await buildAgent();
      const listing = await buildListing({ endpointUrl: seller.url });
      const res = await api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: listing.slug, input: {} },
        headers: {
          traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01`,
          "x-request-id": requestId,
        },
      });
      expect(res.status).toBe(200);

      // The seller got the trace context of our call to it.
      const sent = seller.calls[0]!.headers.traceparent as string;
      expect(traceIdOf(sent)).toBe(traceId);

      const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
      const byName = (name: string) => spans.find((s) => s.name === name)!;
      const server = byName("POST /api/execute");
      const produce = byName("enqueue executions");
      const job = byName("job executions");
      const call = byName("provider call");
      for (const s of [server, produce, job, call]) expect(s, "span").toBeDefined();
      expect(parentOf(produce)).toBe(server.spanContext().spanId);
      expect(parentOf(job)).toBe(produce.spanContext().spanId);
      expect(parentOf(call)).toBe(job.spanContext().spanId);
      expect(sent.split("-")[2]).toBe(call.spanContext().spanId);
      expect(server.attributes["http.route"]).toBe("/api/execute");

      // The job carried the request id, and the worker's log lines have it.
      const stored = await getQueue("executions").getJob(res.body.invocation_id);
      expect(stored?.data.meta).toMatchObject({
        request_id: requestId,
        traceparent: expect.stringContaining(traceId),
      });
      const mine = lines.filter((l) => l.request_id === requestId);
      expect(mine.some((l) => l.msg === "request")).toBe(true);
      expect(mine.some((l) => l.queue === "executions" && l.job_id === res.body.invocation_id)).toBe(true);
    } finally {
      await seller.close();
    }
  });

  it("a job's own enqueues (a settlement to confirm) carry its trace and request id on", async () => {
    const settlementId = randomUUID();
    let traceId = "";
    await withLogScope({ request_id: "req-settle-0001" }, () =>
      inSpan("job executions", {}, async (span) => {
        traceId = span.spanContext().traceId;
        await enqueue("settlement-confirmations", settlementId, { settlement_id: settlementId });
      }),
    );
    const job = await getQueue("settlement-confirmations").getJob(settlementId);
    expect(job?.data).toEqual({
      settlement_id: settlementId,
      meta: {
        request_id: "req-settle-0001",
        traceparent: expect.stringMatching(new RegExp(`^00-${traceId}-`)),
      },
    });
    // The worker hands the processor the payload alone, and refuses a malformed meta.
    const validate = payloadValidator(QUEUES["settlement-confirmations"].payload);
    expect(validate(job!.data)).toEqual({ settlement_id: settlementId });
    expect(() => validate({ settlement_id: settlementId, meta: { traceparent: "nope" } })).toThrow(
      UnrecoverableError,
    );
  });
});
