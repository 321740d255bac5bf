import type http from "node:http";
import { answer, portArgument, readBody, serveBare } from "../lib/bare-http.js";

/**
 * The upstreams of `npm run bench:execute`, in a process of their own so that their CPU is metered
 * apart from the bench client's: `node dist/bench/execute/upstream.js <port>` serves on 127.0.0.1
 *
 * - POST /v1/chat/completions: a fake LLM provider speaking OpenAI's chat-completions wire format,
 *   what the peer gateway (Portkey) proxies to;
 * - POST /seller: a seller endpoint in our invocation protocol that echoes its input, what the paid
 *   listing points at. Sellers may ignore the router's call signature, and this one does.
 *
 * Both answer at once with a fixed-size body, so that neither side of the comparison gets a cheaper
 * upstream. Prints "upstream ready" once listening.
 */

const COMPLETION = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  created: 1_700_000_000,
  model: "fake",
  choices: [
    { index: 0, message: { role: "assistant", content: "bench" }, logprobs: null, finish_reason: "stop" },
  ],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});

async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const body = await readBody(req);
  if (req.method !== "POST") return answer(res, 405, '{"error":"POST only"}');
  if (req.url === "/v1/chat/completions") return answer(res, 200, COMPLETION);
  if (req.url === "/seller") {
    let input: unknown = null;
    try {
      input = (JSON.parse(body) as { input?: unknown }).input ?? null;
    } catch {
      return answer(res, 400, '{"success":false,"error":"body is not JSON"}');
    }
    return answer(res, 200, JSON.stringify({ success: true, output: { echo: input } }));
  }
  answer(res, 404, '{"error":"not found"}');
}

serveBare(portArgument("node dist/bench/execute/upstream.js <port>"), "upstream ready", handle);
