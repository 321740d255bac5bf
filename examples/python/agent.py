"""A small agent on the Python SDK: register, execute a task, poll, print the receipt.

    python3 examples/python/agent.py [task]      # AGENTMARKET_URL defaults to http://localhost:3000

The task defaults to "echo" (free); give a paid listing's task alias to see a paid call and its 97/3 split.
A paid call needs USDC on the balance, from either
- AGENTMARKET_API_KEY: a funded key (e.g. from examples/node/agent.mjs); the agent buys with it, or
- a service started with DEV_CHAIN=1: the new agent funds itself on the dev chain with a gasless EIP-3009
  deposit (no ETH needed), signed by dev_signer.py (pure Python, for the dev chain only).
The last line printed is JSON: {"ok": ..., "receipt": ...}.
"""
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if importlib.util.find_spec("agentmarket") is None:  # not installed (pip install ./sdk/python): use the checkout's
    sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python"))

from agentmarket import AgentMarket, AgentMarketError  # noqa: E402


def fund_on_dev_chain(me: AgentMarket, amount_usdc: float = 1) -> bool:
    """Deposits test USDC when the service runs a dev chain; False (nothing done) when it does not."""
    try:
        me.request("GET", "/api/dev/chain")
    except AgentMarketError as err:
        if err.code == "NOT_FOUND":
            return False
        raise
    sys.path.insert(0, HERE)
    from dev_signer import sign_typed_data  # only needed here: keccak and secp256k1 in pure Python

    # A self-custody wallet (linked to the agent), test USDC from the faucet, then a gasless deposit:
    # sign the EIP-3009 authorization the service describes; the platform submits it and pays the gas.
    wallet = me.request("POST", "/api/crypto/wallet", {})[2]
    me.request("POST", "/api/dev/faucet", {"wallet_address": wallet["address"], "amount_usdc": 2 * amount_usdc})
    order = {"amount_usdc": amount_usdc, "method": "authorization"}
    purchase = me.request("POST", "/api/wallet/purchase", order)[2]
    request = purchase["authorization"]
    signature = sign_typed_data(wallet["private_key"], request["typed_data"])
    deposit = me.request(
        "POST", "/api/wallet/purchase/authorize",
        {"deposit_request_id": request["deposit_request_id"], "signature": signature},
    )[2]
    for _ in range(60):  # the credit follows the chain's confirmation
        if deposit["status"] == "credited":
            print(f"funded: {deposit.get('message', deposit['status'])}")
            return True
        time.sleep(1)
        deposit = me.request("GET", f"/api/wallet/deposits/{deposit['deposit_id']}")[2]
    raise SystemExit(f"deposit not credited: {deposit}")


market = AgentMarket(os.environ.get("AGENTMARKET_URL", "http://localhost:3000"))
agent = market.register("python-agent")
print(f"registered {agent['agent_id']}")

funded_key = os.environ.get("AGENTMARKET_API_KEY")
if funded_key:
    me = market.with_key(funded_key)
else:
    me = market.with_key(agent["api_key"])
    fund_on_dev_chain(me)

task = sys.argv[1] if len(sys.argv) > 1 else "echo"
result = me.execute(task, {"message": "hello from the Python SDK"}, max_cost=1)
done = me.wait_for_result(result["invocation_id"])  # at once when execute already finished
print(f"{task}: {done['status']}, output {json.dumps(done['output'])}")
receipt = me.receipt(done["receipt_id"]) if done["receipt_id"] else None
print(json.dumps({"ok": done["status"] == "succeeded", "receipt": receipt}))
