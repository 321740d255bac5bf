import {
  type Context,
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import type { NodeTracerProvider, SpanProcessor } from "@opentelemetry/sdk-trace-node";
import { getConfig } from "../config.js";
import { currentRequestId, logContextForTracing, logger, withLogScope } from "../log.js";

// OpenTelemetry traces (docs/operations.md "Traces"): off unless OTEL_EXPORTER_OTLP_ENDPOINT is set,
// then exported over OTLP/HTTP. One trace follows a call from the API through the queue (the W3C
// trace context rides in the job's `meta`, with the request id), the worker's job, the seller call
// (a traceparent header) and the settlement jobs that call causes. With tracing off the API below is
// OpenTelemetry's no-op: no context manager, no propagator, nothing recorded.

let provider: NodeTracerProvider | undefined;

/**
 * Starts tracing for this process when OTEL_EXPORTER_OTLP_ENDPOINT is set (or with the given span
 * processors: tests pass an in-memory exporter). Idempotent. The SDK and its exporter (some 300 files)
 * are imported here, not at start-up: a process with tracing off never loads them.
 */
export async function startTracing(serviceName: string, processors?: SpanProcessor[]): Promise<boolean> {
  if (provider) return true;
  const endpoint = getConfig().otelExporterOtlpEndpoint;
  if (!processors && !endpoint) return false;
  const [{ BatchSpanProcessor, NodeTracerProvider }, { resourceFromAttributes }, otlp] = await Promise.all([
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/resources"),
    processors ? undefined : import("@opentelemetry/exporter-trace-otlp-http"),
  ]);
  // A concurrent call may have started it while the modules loaded.
  if (provider) return true;
  provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": serviceName }),
    spanProcessors: processors ?? [
      new BatchSpanProcessor(new otlp!.OTLPTraceExporter({ url: `${endpoint}/v1/traces` })),
    ],
  });
  provider.register();
  logContextForTracing(true);
  logger().info({ service: serviceName, endpoint }, "tracing on");
  return true;
}

/** Flushes and stops tracing (shutdown phase "clients"). */
export async function stopTracing(): Promise<void> {
  const p = provider;
  provider = undefined;
  if (!p) return;
  logContextForTracing(false);
  await p.shutdown();
  trace.disable();
  propagation.disable();
  context.disable();
}

export function tracer() {
  return trace.getTracer("agentmarket");
}

/** The W3C trace context of the active span as headers ({traceparent, tracestate}); empty when off. */
export function traceHeaders(): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}

/** The context a remote caller sent (traceparent header, or a job's meta). */
export function remoteContext(carrier: Record<string, string | undefined>): Context {
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** Whether this process records spans (startTracing ran and found somewhere to send them). */
export function tracingOn(): boolean {
  return provider !== undefined;
}

/** OpenTelemetry's no-op span, made once: what fn gets while tracing is off. */
const OFF_SPAN = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/**
 * Runs fn in a new active span that ends with fn; an exception marks the span as an error. While
 * tracing is off fn runs as it is: the no-op tracer would still allocate a span and a context and enter
 * it for every call, on every request (docs/benchmarks.md, "Garbage").
 */
export async function inSpan<T>(
  name: string,
  options: { kind?: SpanKind; attributes?: Record<string, string | number | boolean>; parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  if (!provider) return fn(OFF_SPAN);
  return tracer().startActiveSpan(
    name,
    { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes },
    options.parent ?? context.active(),
    async (span) => {
      try {
        return await fn(span);
      } catch (err) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
        throw err;
      } finally {
        span.end();
      }
    },
  );
}

/**
 * What an enqueued job carries besides its payload: the trace context and the request id that caused
 * it (the one given, else the log scope's).
 */
export function jobMeta(
  requestId = currentRequestId(),
): { traceparent?: string; tracestate?: string; request_id?: string } | undefined {
  const meta = { ...traceHeaders(), ...(requestId ? { request_id: requestId } : {}) };
  return Object.keys(meta).length ? meta : undefined;
}

interface TracedJob {
  id?: string;
  name: string;
  data: unknown;
}

/**
 * Wraps a worker's processor: the job runs in a consumer span whose parent is the context its producer
 * sent, and every line it logs carries the request id that caused it, its job id and queue.
 */
export function tracedProcessor<J extends TracedJob, R>(
  queue: string,
  processor: (job: J, token?: string) => Promise<R>,
): (job: J, token?: string) => Promise<R> {
  return (job, token) => {
    const meta = ((job.data as { meta?: Record<string, string> } | undefined)?.meta ?? {}) as Record<
      string,
      string | undefined
    >;
    return withLogScope({ request_id: meta.request_id, job_id: job.id, queue }, () =>
      inSpan(
        `job ${queue}`,
        {
          kind: SpanKind.CONSUMER,
          parent: remoteContext(meta),
          attributes: { "messaging.system": "bullmq", "messaging.destination.name": queue },
        },
        async () => {
          const started = performance.now();
          const result = await processor(job, token);
          logger().debug(
            {
              request_id: meta.request_id,
              job_id: job.id,
              queue,
              ms: Math.round(performance.now() - started),
            },
            "job done",
          );
          return result;
        },
      ),
    );
  };
}
