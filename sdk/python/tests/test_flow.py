"""The whole flow against a running service, driven by test/sdk/python.test.ts (which sets the env)."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from agentmarket import AgentMarket, AgentMarketError  # noqa: E402

BASE = os.environ.get("AGENTMARKET_BASE_URL")


@unittest.skipUnless(BASE, "needs AGENTMARKET_BASE_URL (run through test/sdk/python.test.ts)")
class Flow(unittest.TestCase):
    def setUp(self) -> None:
        self.market = AgentMarket(BASE or "")
        self.funded = self.market.with_key(os.environ["AGENTMARKET_FUNDED_KEY"])
        self.paid_listing = os.environ["AGENTMARKET_PAID_LISTING_ID"]
        self.paid_task = os.environ["AGENTMARKET_PAID_TASK"]
        self.free_task = os.environ["AGENTMARKET_FREE_TASK"]

    def expect_error(self, call, code: str, status: int) -> AgentMarketError:
        with self.assertRaises(AgentMarketError) as caught:
            call()
        self.assertIn(caught.exception.code, code.split("|"))
        self.assertEqual(caught.exception.status, status)
        self.assertIsNotNone(caught.exception.request_id)
        return caught.exception

    def test_flow(self) -> None:
        agent = self.market.register("py-buyer")
        buyer = self.market.with_key(agent["api_key"])
        ran = buyer.execute(self.free_task, {"from": "python"})
        if "status_url" in ran:
            ran = buyer.wait_for_result(ran["invocation_id"])
        self.assertTrue(ran.get("success") or ran.get("status") == "succeeded")

        seller = self.market.with_key(self.market.register("py-seller", "seller")["api_key"])
        slug = f"py-{int(time.time() * 1000)}"
        published = seller.publish({
            "name": f"Python listing {slug}", "description": "published through the Python SDK",
            "category": "devtools", "endpoint_url": os.environ["AGENTMARKET_SELLER_URL"],
            "pricing_model": "per_call", "price_per_unit": 0, "input_schema": {"type": "object"}, "tags": [slug],
        })
        self.assertIn("id", published)
        self.assertTrue(buyer.match(slug)["candidates"])

        quote = self.funded.quote(self.paid_listing, max_cost=1)
        self.assertEqual(quote["seller_share_usdc"], "0.048500")
        paid = self.funded.execute(self.paid_task, {"q": "py"}, max_cost=1, quote_id=quote["quote_id"])
        status = self.funded.wait_for_result(paid["invocation_id"], timeout=20)
        self.assertEqual(status["status"], "succeeded")
        receipt = self.funded.receipt(paid["receipt_id"])
        self.assertEqual(receipt["amount_usdc"], "0.050000")
        self.assertEqual(receipt["split"]["platform_fee_usdc"], "0.001500")
        self.assertEqual(self.funded.status(paid["invocation_id"])["status"], "succeeded")
        invoked = self.funded.invoke(published["id"], {"via": "invoke"})
        self.assertTrue(invoked.get("success") or "status_url" in invoked)

        # One error per code family.
        self.expect_error(lambda: self.market.with_key("amk_not_a_real_key").wallet(), "UNAUTHORIZED", 401)
        self.expect_error(lambda: buyer.execute("", {}), "SCHEMA_VALIDATION_FAILED", 400)
        self.expect_error(lambda: buyer.receipt("00000000-0000-4000-8000-000000000000"), "NOT_FOUND|RECEIPT_UNAVAILABLE", 404)
        reused = self.expect_error(
            lambda: self.funded.execute(self.paid_task, {"q": 2}, max_cost=1, quote_id=quote["quote_id"]),
            "QUOTE_NOT_USABLE", 409,
        )
        self.assertFalse(reused.retryable)
        self.expect_error(lambda: buyer.invoke(self.paid_listing, {"q": 3}, max_cost=1), "PAYMENT_REQUIRED", 402)


if __name__ == "__main__":
    unittest.main()
