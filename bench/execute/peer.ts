import { freePort } from "../../shared/infra/free-port.js";
import { type EchoSpec, postJson, type Service, sleep, startChild } from "../lib.js";

/**
 * The peer of `npm run bench:execute`: the Portkey OSS gateway (`@portkey-ai/gateway`, the exact
 * version in package.json) proxying OpenAI chat completions to the bench's fake provider, both on
 * loopback, each in its own process. The fake provider shares its process with the paid listing's
 * seller (bench/execute/upstream.ts): one "upstream" process for both sides.
 */

const PORTKEY_SCRIPT = "node_modules/@portkey-ai/gateway/build/start-server.js";
const UPSTREAM_SCRIPT = "dist/bench/execute/upstream.js";
const FLOOR_SCRIPT = "dist/bench/execute/floor.js";
const START_TIMEOUT_MS = 30_000;
/** What the fake provider's completion says; the pre-flight checks that it came back. */
const CHAT_CONTENT = "bench";
const CHAT_BODY = JSON.stringify({ model: "fake", messages: [{ role: "user", content: "bench" }] });

export interface Peer {
  upstream: Service;
  portkey: Service;
  /** The paid listing's seller endpoint on the upstream process. */
  sellerUrl: string;
  /** The fake provider called directly. */
  direct: EchoSpec;
  /** The same call through Portkey. */
  routed: EchoSpec;
}

/** Resolves once the child printed a line matching `ready`; throws with its output if it exits first. */
async function waitForLine(child: Service, ready: RegExp, who: string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.lines().some((line) => ready.test(line))) return;
    if (child.hasExited()) throw new Error(`${who} exited while starting:\n${child.lines().join("\n")}`);
    await sleep(100);
  }
  throw new Error(
    `${who} not ready within ${START_TIMEOUT_MS / 1000} s:\n${child.lines().slice(-20).join("\n")}`,
  );
}

/**
 * Starts the upstream and Portkey (`start-server.js --headless`, NODE_ENV=production) and returns them
 * with the two peer scenarios. `onStart` sees each child as soon as it is spawned, so that the
 * caller's exit guard kills it even if the other one fails to start.
 */
export async function startPeer(onStart: (child: Service) => void): Promise<Peer> {
  const { upstream, upstreamUrl, ready } = await launchUpstream(onStart);
  const portkeyPort = await freePort();
  const portkey = startChild({
    script: PORTKEY_SCRIPT,
    args: [`--port=${portkeyPort}`, "--headless"],
    env: { NODE_ENV: "production" },
  });
  onStart(portkey);
  await ready();
  await waitForLine(portkey, /Ready for connections/, "Portkey");
  const direct: EchoSpec = {
    scenario: "direct POST fake provider /v1/chat/completions",
    url: `${upstreamUrl}/v1/chat/completions`,
    headers: { "content-type": "application/json", authorization: "Bearer sk-bench" },
    body: CHAT_BODY,
    connections: 1,
  };
  const routed: EchoSpec = {
    scenario: "Portkey 1.15.2 → fake provider",
    url: `http://127.0.0.1:${portkeyPort}/v1/chat/completions`,
    headers: {
      "content-type": "application/json",
      authorization: "Bearer sk-bench",
      "x-portkey-provider": "openai",
      "x-portkey-custom-host": `${upstreamUrl}/v1`,
    },
    body: CHAT_BODY,
    connections: 1,
  };
  return { upstream, portkey, sellerUrl: `${upstreamUrl}/seller`, direct, routed };
}

/** The upstream process alone: the paid listing's loopback seller for a bench that needs no peer. */
export async function startUpstream(
  onStart: (child: Service) => void,
): Promise<{ upstream: Service; sellerUrl: string }> {
  const { upstream, upstreamUrl, ready } = await launchUpstream(onStart);
  await ready();
  return { upstream, sellerUrl: `${upstreamUrl}/seller` };
}

/** Spawns the upstream on a free port; `ready` waits for its ready line (called once the caller waits). */
async function launchUpstream(onStart: (child: Service) => void) {
  const upstreamPort = await freePort();
  const upstream = startChild({ script: UPSTREAM_SCRIPT, args: [String(upstreamPort)], env: {} });
  onStart(upstream);
  return {
    upstream,
    upstreamUrl: `http://127.0.0.1:${upstreamPort}`,
    ready: () => waitForLine(upstream, /upstream ready/, "the fake provider"),
  };
}

/**
 * The floor of a durable router (bench/execute/floor.ts), in a process of its own, proxying to the
 * peer's fake provider: a bare Node proxy, and the same proxy with two durable commits.
 */
export interface Floor {
  process: Service;
  bare: EchoSpec;
  durable: EchoSpec;
}

/** Starts the floor on the peer's fake provider, its rows in the bench's database. */
export async function startFloor(
  peer: Peer,
  databaseUrl: string,
  onStart: (child: Service) => void,
): Promise<Floor> {
  const port = await freePort();
  const child = startChild({
    script: FLOOR_SCRIPT,
    args: [String(port), peer.direct.url, databaseUrl],
    env: {},
  });
  onStart(child);
  await waitForLine(child, /floor ready/, "the floor proxy");
  const spec = (path: string, scenario: string): EchoSpec => ({
    ...peer.direct,
    scenario,
    url: `http://127.0.0.1:${port}${path}`,
  });
  return {
    process: child,
    bare: spec("/bare", "floor: bare Node proxy → fake provider"),
    durable: spec("/durable", "floor: Node proxy + 2 durable commits → fake provider"),
  };
}

/** One request each before any load: 200 with the fake completion's content, else the bench stops. */
export async function preflightChat(specs: readonly EchoSpec[]): Promise<void> {
  for (const spec of specs) {
    const res = await postJson(spec.url, JSON.parse(spec.body), spec.headers);
    const content = res.json?.choices?.[0]?.message?.content;
    if (res.status !== 200 || content !== CHAT_CONTENT)
      throw new Error(
        `pre-flight: ${spec.scenario} answered ${res.status}: ${JSON.stringify(res.json).slice(0, 600)}`,
      );
  }
}
