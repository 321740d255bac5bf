import { createServer } from "node:net";
import { expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { api } from "../helpers/http.js";
import { startService } from "../helpers/service.js";

// The test service moves to a new port when its file's port was taken since setup-env chose it (the
// OS's ephemeral range is shared with outgoing connections), and the echo listing follows it.
it("a file whose port was taken in the meantime moves to a free one, echo included", async () => {
  const blocker = createServer();
  const taken = getConfig().port;
  await new Promise<void>((resolve) => blocker.listen(taken, "127.0.0.1", resolve));
  const service = await startService();
  try {
    expect(getConfig().port).not.toBe(taken);
    const agent = await api("POST", "/api/quickstart", { body: { name: "port mover", intent: "buyer" } });
    const res = await api("POST", "/api/execute", {
      key: agent.body.api_key,
      body: { task: "echo", input: { message: "moved" } },
    });
    expect(res.status).toBe(200);
    expect(res.body.output.echo).toEqual({ message: "moved" });
  } finally {
    await service.stop();
    blocker.close();
  }
});
