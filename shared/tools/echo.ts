import { getConfig } from "../config.js";

const HIDDEN_HEADERS = new Set([
  "authorization",
  "cookie",
  "proxy-authorization",
  "x-payment",
  "payment-signature",
]);

export const ECHO_DEFAULT_MESSAGE = "agentmarket connectivity probe";

export interface EchoOutput {
  success: true;
  output: {
    echo: Record<string, unknown>;
    server: {
      timestamp: string;
      platform: string;
      received_at_ms: number;
      processing_time_ms: number;
      node_version: string;
    };
    headers_received: Record<string, string>;
    tip: string;
  };
}

/** The echo tool's answer (spec "Echo tool"): the submitted input plus server facts, never secrets. */
export function buildEcho(
  input: Record<string, unknown>,
  headers: Record<string, unknown>,
  receivedAtMs: number,
): EchoOutput {
  const headersReceived: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!HIDDEN_HEADERS.has(name.toLowerCase()) && typeof value === "string") headersReceived[name] = value;
  }
  return {
    success: true,
    output: {
      echo: input,
      server: {
        timestamp: new Date().toISOString(),
        platform: getConfig().platformId,
        received_at_ms: receivedAtMs,
        processing_time_ms: Date.now() - receivedAtMs,
        node_version: process.version,
      },
      headers_received: headersReceived,
      tip: "Route the same call through POST /api/execute with task 'echo' to test your API key, routing and receipts.",
    },
  };
}
