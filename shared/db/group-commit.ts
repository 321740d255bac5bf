import { logger } from "../log.js";
import { groupCommitRows, groupCommitSplits, groupCommitStatements } from "../observability/metrics.js";

// Group commit, at the service's level: writes of one kind that arrive while earlier ones are in flight
// are sent together, as one statement (or, for a paid call's hold and success, one transaction in one
// flight), when a statement of that kind finishes (docs/benchmarks.md, "The eighth round" and "The
// twenty-ninth round"). Under load most of a hot statement's cost is per statement, not per row: the round
// trip and its socket writes, PostgreSQL's executor start-up, plan lookup, constraint set-up and the WAL
// flush of its commit. N writes in one statement pay those once.
//
// Nothing waits for a batch to fill: a write that finds fewer than `maxInFlight` statements of its kind
// running is sent at once, alone, by the single-row statement it always had — so a lone request (c=1)
// takes exactly the path it took before. A write that finds the statements of its kind all running waits
// for the first to end, and no longer. Each write still commits before its caller goes on: a caller's
// promise settles when the statement holding its row has committed, never earlier.
//
// A grouped statement either writes every row or none (one statement, or one transaction). When it fails,
// each of its writes is sent again alone, so that every caller gets its own answer or its own error, and
// one bad row never fails its neighbours.

/** How a group commit writes: one item by itself, or several in one statement (answers in item order). */
export interface GroupCommitWriter<I, O> {
  one(item: I): Promise<O>;
  many(items: readonly I[]): Promise<O[]>;
}

export interface GroupCommitOptions {
  /** The group's name in /metrics (agentmarket_db_group_commit_*). */
  name: string;
  /** Statements of this kind running at once; a write that finds this many waits to join the next. */
  maxInFlight: number;
  /** Rows in one grouped statement at most. */
  maxBatch: number;
}

interface Pending<I, O> {
  item: I;
  resolve(value: O): void;
  reject(error: unknown): void;
}

export class GroupCommit<I, O> {
  private inFlight = 0;
  private readonly waiting: Pending<I, O>[] = [];

  constructor(
    private readonly writer: GroupCommitWriter<I, O>,
    private readonly options: GroupCommitOptions,
  ) {}

  /** Writes the item: now, alone, if a statement of this kind is free; else with the next group. */
  write(item: I): Promise<O> {
    if (this.inFlight < this.options.maxInFlight && this.waiting.length === 0) {
      return this.run(() => this.writer.one(item), 1);
    }
    return new Promise<O>((resolve, reject) => this.waiting.push({ item, resolve, reject }));
  }

  /** Runs one statement of this kind; when it ends, the writes that queued meanwhile go out. */
  private async run<T>(send: () => Promise<T>, rows: number): Promise<T> {
    this.inFlight += 1;
    groupCommitStatements.inc({ group: this.options.name });
    groupCommitRows.inc({ group: this.options.name }, rows);
    try {
      return await send();
    } finally {
      this.inFlight -= 1;
      this.flush();
    }
  }

  private flush(): void {
    while (this.inFlight < this.options.maxInFlight && this.waiting.length > 0) {
      const group = this.waiting.splice(0, this.options.maxBatch);
      void this.sendGroup(group);
    }
  }

  private async sendGroup(group: Pending<I, O>[]): Promise<void> {
    if (group.length === 1) {
      const [only] = group as [Pending<I, O>];
      await this.run(() => this.writer.one(only.item), 1).then(only.resolve, only.reject);
      return;
    }
    let answers: O[];
    try {
      answers = await this.run(() => this.writer.many(group.map((p) => p.item)), group.length);
    } catch (error) {
      // Nothing of the group was written: each write goes again alone and meets its own answer or error.
      groupCommitSplits.inc({ group: this.options.name });
      logger().debug(
        { group: this.options.name, err: error },
        "group commit: a group failed, its writes go alone",
      );
      await Promise.all(
        group.map((p) => this.run(() => this.writer.one(p.item), 1).then(p.resolve, p.reject)),
      );
      return;
    }
    for (const [i, p] of group.entries()) p.resolve(answers[i] as O);
  }
}

/**
 * The execute path's group commits: one statement of a kind at a time. Measured on the 2-core machine
 * (docs/benchmarks.md, "The eighth round"), one at a time carried more executes a second than two or four:
 * the other kind's statements keep PostgreSQL's second core busy, and fewer, larger groups pay the
 * per-statement costs fewer times. A lone write still goes at once.
 */
export const HOT_PATH_GROUPS = { maxInFlight: 1, maxBatch: 64 } as const;
