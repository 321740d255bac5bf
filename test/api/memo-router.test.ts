import { createServer, type RequestListener } from "node:http";
import Koa from "koa";
import { describe, expect, it } from "vitest";
import { MemoRouter } from "../../api/memo-router.js";

// api/memo-router.ts: the router remembers what a method + path matched, and answers as @koa/router does.

function withRoutes(): MemoRouter {
  const router = new MemoRouter();
  router.get("/things/:id", (ctx) => {
    ctx.body = { id: ctx.params.id };
  });
  router.post("/things", (ctx) => {
    ctx.body = { made: true };
  });
  return router;
}

async function call(
  handler: RequestListener,
  method: string,
  path: string,
): Promise<{ status: number; body: string; allow?: string }> {
  const server = createServer(handler).listen(0);
  await new Promise((resolve) => server.once("listening", resolve));
  try {
    const { port } = server.address() as { port: number };
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { method });
    return { status: res.status, body: await res.text(), allow: res.headers.get("allow") ?? undefined };
  } finally {
    server.close();
  }
}

describe("MemoRouter", () => {
  it("matches as the plain router does, twice over, and hands each caller arrays of its own", () => {
    const router = withRoutes();
    const first = router.match("/things/7", "GET");
    const plain = Object.getPrototypeOf(MemoRouter.prototype).match.call(router, "/things/7", "GET");
    expect(first).toEqual(plain);
    expect(first.route).toBe(true);
    first.path.push(first.path[0]!);
    first.pathAndMethod.length = 0;
    const second = router.match("/things/7", "GET");
    expect(second).toEqual(plain);
    expect(router.match("/things/7", "DELETE").route).toBe(false);
    expect(router.match("/nowhere", "GET").path).toEqual([]);
  });

  it("forgets what it matched when a route is added", () => {
    const router = withRoutes();
    expect(router.match("/later", "GET").route).toBe(false);
    router.get("/later", (ctx) => {
      ctx.body = "here";
    });
    expect(router.match("/later", "GET").route).toBe(true);
  });

  it("serves requests, parameters and the 405 of allowedMethods as before", async () => {
    const router = withRoutes();
    const app = new Koa().use(router.routes()).use(router.allowedMethods()).callback() as RequestListener;
    for (let i = 0; i < 2; i++) {
      expect(await call(app, "GET", "/things/1")).toMatchObject({ status: 200, body: '{"id":"1"}' });
      expect(await call(app, "GET", "/things/2")).toMatchObject({ status: 200, body: '{"id":"2"}' });
      expect(await call(app, "DELETE", "/things")).toMatchObject({ status: 405, allow: "POST" });
    }
  });
});
