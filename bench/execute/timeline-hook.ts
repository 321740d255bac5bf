import { writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { Readable } from "node:stream";

/**
 * BENCH_TIMELINE=1 loads this module into the service under test (`node --import`), before the service's
 * own code: it stamps, on the monotonic clock, each request the HTTP server receives and each write to
 * and read from a socket, named by the other end (PostgreSQL, Redis, a call the service makes to its own
 * port or the paid execute's seller, the answers it writes), and writes them to BENCH_TIMELINE_FILE when
 * the bench sends SIGUSR2.
 * bench/execute/timeline.ts reads them as the execute's critical path. Bench-only: it wraps public
 * methods of net.Socket and stream.Readable (write, push) and http.Server's emit, costing ~1 µs an event.
 * A write made before its socket connects has no peer yet and is not stamped; the service's pools and
 * its keep-alive calls to itself are connected by the time the bench measures.
 */

/**
 * One stamp: the monotonic clock in microseconds (the clock the bench's own process.hrtime reads, so
 * the bench selects its load window's events), and what happened: "in <url>" (a request received),
 * "<peer>>" (a write to that peer) or "<peer><" (data from it), the peer one of peerOf's names.
 */
export type TimelineEvent = [micros: number, kind: string];

const portOf = (url: string | undefined, fallback: number): number => {
  if (!url) return fallback;
  try {
    return Number(new URL(url).port) || fallback;
  } catch {
    return fallback;
  }
};

const PG_PORT = portOf(process.env.DATABASE_URL, 5432);
const REDIS_PORT = portOf(process.env.REDIS_URL, 6379);
/** A Unix socket's path, for the sockets connected to one (PostgreSQL on this machine, over its socket). */
const socketPaths = new WeakMap<net.Socket, string>();
const OWN_PORT = Number(process.env.PORT);
/** The paid execute's seller, another process on loopback (BENCH_PROFILE_PAID=1): its calls are "call". */
const SELLER_PORT = Number(process.env.BENCH_TIMELINE_SELLER_PORT) || undefined;
const KEEP = 200_000;

const events: TimelineEvent[] = [];
const now = () => Number(process.hrtime.bigint() / 1000n);

function record(kind: string): void {
  if (events.length >= KEEP) events.splice(0, KEEP / 2);
  events.push([now(), kind]);
}

/**
 * "pg", "redis", "call" (the service calling its own port, or the paid execute's seller), "answer" (a
 * socket its server accepted).
 */
function peerOf(socket: net.Socket): string | undefined {
  const path = socketPaths.get(socket);
  // pg connects to DATABASE_URL's socket as <dir>/.s.PGSQL.<port>.
  if (path !== undefined) return path.endsWith(`/.s.PGSQL.${PG_PORT}`) ? "pg" : undefined;
  if (socket.remotePort === PG_PORT) return "pg";
  if (socket.remotePort === REDIS_PORT) return "redis";
  if (socket.remotePort === OWN_PORT || (SELLER_PORT && socket.remotePort === SELLER_PORT)) return "call";
  if (socket.localPort === OWN_PORT) return "answer";
  return undefined;
}

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
  // socket.connect(path) as pg calls it, or net.connect's normalised [options, callback].
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  const path = typeof first === "string" ? first : (first as { path?: unknown } | null | undefined)?.path;
  if (typeof path === "string") socketPaths.set(this, path);
  return (connect as (...a: unknown[]) => net.Socket).apply(this, args);
} as typeof connect;

const write = net.Socket.prototype.write;
net.Socket.prototype.write = function (this: net.Socket, ...args: unknown[]) {
  const peer = peerOf(this);
  if (peer) record(`${peer}>`);
  return (write as (...a: unknown[]) => boolean).apply(this, args);
} as typeof write;

const push = Readable.prototype.push;
Readable.prototype.push = function (this: Readable, chunk: unknown, encoding?: BufferEncoding) {
  if (chunk && this instanceof net.Socket) {
    const peer = peerOf(this);
    if (peer) record(`${peer}<`);
  }
  return push.call(this, chunk, encoding);
};

const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (this: http.Server, name: string | symbol, ...args: unknown[]) {
  if (name === "request") record(`in ${(args[0] as http.IncomingMessage).url}`);
  return (emit as (...a: unknown[]) => boolean).call(this, name, ...args);
} as typeof emit;

process.on("SIGUSR2", () => {
  const file = process.env.BENCH_TIMELINE_FILE;
  if (file) writeFileSync(file, JSON.stringify(events));
});
