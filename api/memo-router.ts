import Router, { type MatchResult } from "@koa/router";

/** Distinct method + path pairs remembered; past it the memo starts over (ids in paths are unbounded). */
const MEMO_LIMIT = 512;

/**
 * A router that remembers which layers a method + path matched. @koa/router tests every route's regexp
 * in turn on each request (112 here), and its debug call per test allocates even when debug is off: ~10 %
 * of everything an execute allocated, the router being walked twice (the execute and the first-party
 * call it makes), and allocation is what sets how often V8 pauses to collect (docs/benchmarks.md,
 * "Garbage"). The answer depends only on the method, the path and the routes, so it is remembered until
 * a route is added. Each caller gets its own arrays: the dispatcher may append to `path`.
 */
export class MemoRouter extends Router {
  private readonly memo = new Map<string, MatchResult>();
  private memoFor = -1;

  override match(path: string, method: string): MatchResult {
    if (this.memoFor !== this.stack.length) {
      this.memo.clear();
      this.memoFor = this.stack.length;
    }
    const key = `${method} ${path}`;
    let found = this.memo.get(key);
    if (!found) {
      found = super.match(path, method);
      if (this.memo.size >= MEMO_LIMIT) this.memo.clear();
      this.memo.set(key, found);
    }
    return { path: [...found.path], pathAndMethod: [...found.pathAndMethod], route: found.route };
  }
}
