import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { Duplex } from "node:stream";
import { getConfig } from "../shared/config.js";
import { ERRORS, type ErrorCode } from "../shared/errors.js";
import { createApp } from "./app.js";

// The HTTP server around the Koa app (docs/reliability.md "Edges"). Two things Koa never sees:
//  - slow clients: a client that trickles its headers or body holds a socket; HTTP_HEADERS_TIMEOUT_MS
//    and HTTP_REQUEST_TIMEOUT_MS bound both (Node's defaults are 60 s and 300 s);
//  - requests Node refuses to parse (headers over 16 KiB, a malformed request line): Node would answer
//    a bare status with no body; we answer the one error envelope, so every refusal reads the same.

/** The error envelope, for answers written straight to the socket. */
function rawEnvelope(code: ErrorCode, message: string): string {
  const spec = ERRORS[code];
  const body = JSON.stringify({
    success: false,
    error: {
      code,
      message,
      retryable: spec.retryable,
      buyer_action: spec.buyerAction,
      fallback: spec.fallback,
      request_id: randomUUID(),
    },
  });
  const reason = code === "HEADERS_TOO_LARGE" ? "Request Header Fields Too Large" : "Bad Request";
  return (
    `HTTP/1.1 ${spec.status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  );
}

function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  // A timed-out or reset connection gets no answer: the client is gone or too slow to read one.
  if (!socket.writable || error.code === "ECONNRESET" || error.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    socket.destroy();
    return;
  }
  const answer =
    error.code === "HPE_HEADER_OVERFLOW"
      ? rawEnvelope("HEADERS_TOO_LARGE", "the request line and headers are over 16 KiB")
      : rawEnvelope("SCHEMA_VALIDATION_FAILED", "the HTTP request could not be parsed");
  socket.end(answer);
}

/** The API's HTTP server, not yet listening: timeouts for slow clients, envelopes for unparsable requests. */
export function createHttpServer(): Server {
  const config = getConfig();
  // Node checks both timeouts on this interval (default 30 s): short enough that they hold.
  const connectionsCheckingInterval = Math.max(100, Math.min(1000, config.httpHeadersTimeoutMs / 2));
  const server = createServer({ connectionsCheckingInterval }, createApp().callback());
  server.headersTimeout = config.httpHeadersTimeoutMs;
  server.requestTimeout = config.httpRequestTimeoutMs;
  // Longer than common load balancers' idle timeout (60 s), so they close first, never us mid-request.
  server.keepAliveTimeout = 65_000;
  server.on("clientError", answerClientError);
  return server;
}
