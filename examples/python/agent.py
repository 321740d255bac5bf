"""A small agent on the Python SDK: register, execute a task, poll, print the receipt.

    python3 examples/python/agent.py [task]      # AGENTMARKET_URL defaults to http://localhost:3000

With AGENTMARKET_API_KEY set (a funded key, e.g. from examples/node/agent.mjs), it acts as that agent
instead of registering, so a paid task can be bought. The task defaults to "echo" (free).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk", "python"))

from agentmarket import AgentMarket  # noqa: E402

market = AgentMarket(os.environ.get("AGENTMARKET_URL", "http://localhost:3000"))
key = os.environ.get("AGENTMARKET_API_KEY") or market.register("python-agent")["api_key"]
me = market.with_key(key)
task = sys.argv[1] if len(sys.argv) > 1 else "echo"
result = me.execute(task, {"message": "hello from the Python SDK"}, max_cost=1)
if "status_url" in result:
    result = me.wait_for_result(result["invocation_id"])
receipt = me.receipt(result["receipt_id"]) if result.get("receipt_id") else None
print(json.dumps({"ok": result.get("success", result.get("status") == "succeeded"), "receipt": receipt}))
