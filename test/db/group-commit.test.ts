import { describe, expect, it } from "vitest";
import { GroupCommit } from "../../shared/db/group-commit.js";

// Group commit's scheduling (shared/db/group-commit.ts), with a writer whose statements finish when the
// test says: who goes alone, who is grouped, in what order, and what a failed group does.

interface Call {
  kind: "one" | "many";
  items: number[];
  finish(answer?: unknown): void;
  fail(error: Error): void;
}

function recordingWriter() {
  const calls: Call[] = [];
  const call = (kind: Call["kind"], items: number[]) =>
    new Promise<unknown>((resolve, reject) =>
      calls.push({ kind, items, finish: (answer) => resolve(answer), fail: reject }),
    );
  return {
    calls,
    writer: {
      one: (item: number) => call("one", [item]) as Promise<string>,
      many: (items: readonly number[]) => call("many", [...items]) as Promise<string[]>,
    },
  };
}

const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("a group commit", () => {
  it("sends a lone write at once, alone", async () => {
    const { calls, writer } = recordingWriter();
    const group = new GroupCommit(writer, { name: "t", maxInFlight: 1, maxBatch: 8 });
    const answer = group.write(1);
    expect(calls.map((c) => [c.kind, c.items])).toEqual([["one", [1]]]);
    calls[0]!.finish("a1");
    expect(await answer).toBe("a1");
  });

  it("groups the writes that arrive while a statement is in flight, in order, each with its own answer", async () => {
    const { calls, writer } = recordingWriter();
    const group = new GroupCommit(writer, { name: "t", maxInFlight: 1, maxBatch: 8 });
    const first = group.write(1);
    const later = [group.write(2), group.write(3), group.write(4)];
    // Nothing more is sent until the statement in flight ends.
    expect(calls).toHaveLength(1);
    calls[0]!.finish("a1");
    await first;
    await settled();
    expect(calls.map((c) => [c.kind, c.items])).toEqual([
      ["one", [1]],
      ["many", [2, 3, 4]],
    ]);
    calls[1]!.finish(["a2", "a3", "a4"]);
    expect(await Promise.all(later)).toEqual(["a2", "a3", "a4"]);
  });

  it("keeps maxInFlight statements going and at most maxBatch rows in one", async () => {
    const { calls, writer } = recordingWriter();
    const group = new GroupCommit(writer, { name: "t", maxInFlight: 2, maxBatch: 2 });
    const answers = [1, 2, 3, 4, 5, 6].map((n) => group.write(n));
    // Two go alone at once; the other four wait.
    expect(calls.map((c) => c.items)).toEqual([[1], [2]]);
    calls[0]!.finish("a1");
    await settled();
    expect(calls.map((c) => c.items)).toEqual([[1], [2], [3, 4]]);
    calls[1]!.finish("a2");
    await settled();
    expect(calls.map((c) => c.items)).toEqual([[1], [2], [3, 4], [5, 6]]);
    calls[2]!.finish(["a3", "a4"]);
    calls[3]!.finish(["a5", "a6"]);
    expect(await Promise.all(answers)).toEqual(["a1", "a2", "a3", "a4", "a5", "a6"]);
  });

  it("sends a failed group's writes again alone: each meets its own answer or its own error", async () => {
    const { calls, writer } = recordingWriter();
    const group = new GroupCommit(writer, { name: "t", maxInFlight: 1, maxBatch: 8 });
    const first = group.write(1);
    const [two, three] = [group.write(2), group.write(3)];
    calls[0]!.finish("a1");
    await first;
    await settled();
    calls[1]!.fail(new Error("the group failed"));
    await settled();
    expect(calls.slice(2).map((c) => [c.kind, c.items])).toEqual([
      ["one", [2]],
      ["one", [3]],
    ]);
    calls[2]!.finish("a2");
    calls[3]!.fail(new Error("row 3 is bad"));
    expect(await two).toBe("a2");
    await expect(three).rejects.toThrow("row 3 is bad");
  });

  it("answers a lone write's error to its caller only, and goes on", async () => {
    const { calls, writer } = recordingWriter();
    const group = new GroupCommit(writer, { name: "t", maxInFlight: 1, maxBatch: 8 });
    const bad = group.write(1);
    const next = group.write(2);
    calls[0]!.fail(new Error("no"));
    await expect(bad).rejects.toThrow("no");
    await settled();
    expect(calls[1]!.items).toEqual([2]);
    expect(calls[1]!.kind).toBe("one");
    calls[1]!.finish("a2");
    expect(await next).toBe("a2");
  });
});
