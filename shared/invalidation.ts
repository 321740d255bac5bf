import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import { getConfig } from "./config.js";
import { AppError } from "./errors.js";
import { onShutdown } from "./lifecycle.js";
import { logger } from "./log.js";
import { serverClient } from "./redis.js";

// Process-local caches whose entries must stop answering at once, in every process, when their row
// changes (an API key's revocation): docs/architecture.md "Caches that are told". A change is published
// on Redis and the writer waits out a freshness window before it answers; a process may answer from its
// caches only while its subscriber connection has proved, within that window, that it is keeping up.
//
// Why that suffices. Redis answers a PING on a subscriber connection after every message it published
// to that connection before the PING arrived, and ioredis hands our handler each message before it
// settles a later reply. A process counts as fresh until a ping's send time plus the window. When the
// writer's PUBLISH has been answered at time P and it then waits the window W, any process still
// answering from cache at P + W holds a pong for a ping sent after P, which Redis saw after the
// message: the entry is already gone. Whatever answers from cache before P + W answers before the
// writer's own request has returned, as a request that raced the change would.

export type InvalidationTopic = "api_keys";

interface Message {
  topic: InvalidationTopic;
  ids: string[];
  /** The publishing bus, so that it does not apply its own change twice. */
  from: string;
}

export interface BusOptions {
  redisUrl: string;
  /** The pub/sub channel (the QUEUE_PREFIX namespace in the service). */
  channel: string;
  /** The freshness window W: how long a pong vouches for the subscription, and how long a writer waits. */
  windowMs: number;
}

/** How many PUBLISH attempts a writer makes before it says the change could not be told. */
const PUBLISH_ATTEMPTS = 3;

/**
 * One process's side of the invalidation channel: local handlers per topic, a subscriber connection
 * kept provably current by pings, and the writer's publish-and-wait.
 */
export class InvalidationBus {
  readonly id = randomUUID();
  private readonly handlers = new Map<InvalidationTopic, ((ids: string[]) => void)[]>();
  private subscriber: Redis | undefined;
  private publisher: Redis | undefined;
  private pinger: NodeJS.Timeout | undefined;
  private freshUntil = 0;
  private changes = 0;

  constructor(private readonly options: BusOptions) {}

  /** Runs `handler` with the changed ids of `topic`, from this process or any other. */
  on(topic: InvalidationTopic, handler: (ids: string[]) => void): void {
    this.handlers.set(topic, [...(this.handlers.get(topic) ?? []), handler]);
  }

  /** True while caches may answer: listening, and a pong proves it within the window. */
  isFresh(): boolean {
    return this.subscriber !== undefined && performance.now() < this.freshUntil;
  }

  /**
   * A counter that moves on every change applied and every (re)subscription. A cache notes it before
   * reading the database and keeps what it read only if it has not moved (a change may have landed
   * between the read and the keep).
   */
  generation(): number {
    return this.changes;
  }

  /**
   * Subscribes and starts pinging (every third of the window, so one lost pong does not go stale). The
   * connection comes up in the background: this waits a few windows for the first pong, no longer, so a
   * process starts while Redis is away (its caches stay off until Redis is back).
   */
  async start(): Promise<void> {
    if (this.subscriber) return;
    // Reconnects by itself; while it is away the caches go stale, which is all that matters here.
    const subscriber = serverClient(this.options.redisUrl, "invalidations", {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectionName: `agentmarket-invalidations-${this.id}`,
      // Subscribed on every ready below instead, in one place.
      autoResubscribe: false,
    });
    // Sent before any ping of this connection, so a pong always answers after the subscription.
    subscriber.on("ready", () => {
      subscriber.subscribe(this.options.channel).catch(() => {});
    });
    // Messages may be missed while the connection is away: it is stale at once (see ping).
    subscriber.on("close", () => {
      this.freshUntil = 0;
    });
    subscriber.on("message", (_channel: string, raw: string) => this.receive(raw));
    this.subscriber = subscriber;
    this.publisher = publisherClient(this.options.redisUrl, false);
    const every = Math.max(10, Math.floor(this.options.windowMs / 3));
    this.pinger = setInterval(() => this.ping(), every);
    this.pinger.unref();
    const until = performance.now() + 4 * this.options.windowMs;
    while (!this.isFresh() && performance.now() < until) await sleep(every);
  }

  async stop(): Promise<void> {
    clearInterval(this.pinger);
    const { subscriber, publisher } = this;
    this.subscriber = undefined;
    this.publisher = undefined;
    this.freshUntil = 0;
    subscriber?.disconnect();
    publisher?.disconnect();
  }

  /**
   * Tells every process that these rows changed, after the change has committed: this process's caches
   * drop them at once, then the others', and this resolves once none can still answer from them. A change
   * that cannot be published is an error (SERVICE_UNAVAILABLE): the caller must not report it effective.
   */
  async publish(topic: InvalidationTopic, ids: string[]): Promise<void> {
    this.apply(topic, ids);
    const message = JSON.stringify({ topic, ids, from: this.id } satisfies Message);
    // A process that never started listening (one without caches of its own) publishes on a connection
    // of the moment.
    const publisher = this.publisher ?? publisherClient(this.options.redisUrl, true);
    let lastError: unknown;
    try {
      for (let attempt = 1; attempt <= PUBLISH_ATTEMPTS; attempt++) {
        try {
          await publisher.publish(this.options.channel, message);
          await sleep(this.options.windowMs);
          return;
        } catch (error) {
          lastError = error;
          await sleep(100 * attempt);
        }
      }
    } finally {
      if (publisher !== this.publisher) publisher.disconnect();
    }
    logger().error({ err: lastError, topic, ids }, "a change could not be told to the other processes");
    throw new AppError(
      "SERVICE_UNAVAILABLE",
      "the change is saved, but other API processes could not be told of it yet; repeat the request",
      { topic },
    );
  }

  private async ping(): Promise<void> {
    const subscriber = this.subscriber;
    if (!subscriber) return;
    const sentAt = performance.now();
    try {
      await subscriber.ping();
      if (this.subscriber !== subscriber) return;
      // After a gap (a reconnect, or pongs too slow to vouch) a change may have gone by unheard: every
      // cache starts over, and a read begun before this pong is not kept (its generation has moved).
      if (performance.now() >= this.freshUntil) this.applyAll();
      this.freshUntil = Math.max(this.freshUntil, sentAt + this.options.windowMs);
    } catch {
      // No pong: freshness lapses at the last one's window.
    }
  }

  private receive(raw: string): void {
    let message: Message;
    try {
      message = JSON.parse(raw) as Message;
    } catch {
      return;
    }
    if (message.from === this.id) return;
    this.apply(message.topic, message.ids);
  }

  private apply(topic: InvalidationTopic, ids: string[]): void {
    this.changes += 1;
    for (const handler of this.handlers.get(topic) ?? []) handler(ids);
  }

  /** Every topic's handlers with no ids: "forget everything". */
  private applyAll(): void {
    this.changes += 1;
    for (const handlers of this.handlers.values()) for (const handler of handlers) handler([]);
  }
}

/** The writer's connection: kept beside the subscriber, or made for one publish (queued until it is up). */
function publisherClient(url: string, forOnePublish: boolean): Redis {
  return serverClient(url, "invalidations", { maxRetriesPerRequest: 1, enableOfflineQueue: forOnePublish });
}

let bus: InvalidationBus | undefined;

/**
 * The process's bus. Caches are off (and writers do not wait) when the cache size is 0 or on a Redis
 * Cluster, where a PUBLISH reaches other nodes' subscribers over the cluster bus with no order against a
 * PING on theirs.
 */
export function invalidationBus(): InvalidationBus | undefined {
  const config = getConfig();
  if (config.apiKeyCacheSize === 0 || config.redisCluster || !config.redisUrl) return undefined;
  bus ??= new InvalidationBus({
    redisUrl: config.redisUrl,
    channel: `${config.queuePrefix}:invalidations`,
    windowMs: config.cacheFreshnessMs,
  });
  return bus;
}

/** Starts listening in a process that serves requests (the API), stopped at shutdown. */
export async function startInvalidationListener(): Promise<void> {
  const current = invalidationBus();
  if (!current) return;
  await current.start();
  onShutdown("invalidation listener", "clients", () => stopInvalidationListener());
}

export async function stopInvalidationListener(): Promise<void> {
  const current = bus;
  bus = undefined;
  await current?.stop();
}

/** After a committed change: see InvalidationBus.publish. Nothing to do when no process caches. */
export async function publishInvalidation(topic: InvalidationTopic, ids: string[]): Promise<void> {
  await invalidationBus()?.publish(topic, ids);
}
