"""The SDK against a running service: test/sdk/python.test.ts starts one on a local chain and sets

AGENTMARKET_BASE_URL          the service
AGENTMARKET_FUNDED_KEY        a buyer key whose balance holds USDC
AGENTMARKET_PAID_LISTING_ID   a paid listing (of another agent)
AGENTMARKET_FREE_TASK         the task alias of a free listing
AGENTMARKET_SELLER_URL        a loopback seller endpoint to publish

Without AGENTMARKET_BASE_URL these tests are skipped (the unit tests in test_retry.py still run).
"""
import os
import sys
import time
import unittest
from decimal import Decimal
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from agentmarket import AgentMarket, AgentMarketError  # noqa: E402

BASE = os.environ.get("AGENTMARKET_BASE_URL", "")


def usdc(amount: str) -> Decimal:
    return Decimal(amount)


@unittest.skipUnless(BASE, "needs AGENTMARKET_BASE_URL (run through test/sdk/python.test.ts)")
class Flow(unittest.TestCase):
    def setUp(self) -> None:
        self.market = AgentMarket(BASE)
        self.funded = self.market.with_key(os.environ["AGENTMARKET_FUNDED_KEY"])
        self.paid_listing = os.environ["AGENTMARKET_PAID_LISTING_ID"]
        self.free_task = os.environ["AGENTMARKET_FREE_TASK"]

    def buyer(self) -> AgentMarket:
        return self.market.with_key(self.market.register("py-buyer")["api_key"])

    def expect_error(self, call: Callable[[], object], code: str, status: int) -> AgentMarketError:
        with self.assertRaises(AgentMarketError) as caught:
            call()
        error = caught.exception
        self.assertEqual((error.code, error.status), (code, status), error.envelope)
        self.assertIsNotNone(error.request_id)
        return error

    def test_register(self) -> None:
        agent = self.market.register("py-both", "both")
        self.assertTrue(agent["api_key"].startswith("amk_"))
        self.assertEqual(agent["intent"], "both")
        self.assertTrue(agent["agent_id"] and agent["signing_key"])

    def test_free_execute_and_wait(self) -> None:
        buyer = self.buyer()
        ran = buyer.execute(self.free_task, {"from": "python"})
        # 200 (finished within the service's wait) or 202 (poll): wait_for_result covers both.
        done = buyer.wait_for_result(ran["invocation_id"], timeout=20)
        self.assertEqual(done["status"], "succeeded")
        self.assertEqual(done["output"], {"got": {"from": "python"}})
        self.assertEqual(buyer.status(ran["invocation_id"])["invocation_id"], ran["invocation_id"])

    def test_publish_match_invoke(self) -> None:
        seller = self.market.with_key(self.market.register("py-seller", "seller")["api_key"])
        slug = f"py-{int(time.time() * 1000)}"
        published = seller.publish({
            "name": f"Python listing {slug}", "description": "published through the Python SDK",
            "category": "devtools", "endpoint_url": os.environ["AGENTMARKET_SELLER_URL"],
            "pricing_model": "per_call", "price_per_unit": 0, "input_schema": {"type": "object"}, "tags": [slug],
        })
        self.assertTrue(published["id"])
        self.assertGreaterEqual(seller.seller_status()["live_listings"], 1)

        buyer = self.buyer()
        matched = buyer.match(slug, max_cost=1)
        self.assertIn(published["id"], [c["listing_id"] for c in matched["candidates"]])
        invoked = buyer.invoke(published["id"], {"via": "invoke"})
        self.assertEqual(buyer.wait_for_result(invoked["invocation_id"], timeout=20)["status"], "succeeded")

    def test_quote_then_paid_execute_and_invoke(self) -> None:
        fee_rate = Decimal(str(self.funded.pricing()["platform_fee_rate"]))
        self.assertEqual(fee_rate, Decimal("0.03"))
        before = usdc(self.funded.wallet()["balances"]["USDC"]["available_usdc"])

        quote = self.funded.quote(self.paid_listing, max_cost=1)
        price = usdc(quote["price_usdc"])
        self.assertGreater(price, 0)
        self.assertEqual((quote["listing_id"], quote["status"]), (self.paid_listing, "open"))
        self.assertEqual(usdc(quote["platform_fee_usdc"]), price * fee_rate)
        self.assertEqual(usdc(quote["seller_share_usdc"]), price - price * fee_rate)
        self.assertIn("ledger", [o["method"] for o in quote["payment_options"]])

        # Paid execute with the quote (the quote carries the listing's task alias).
        paid = self.funded.execute(quote["task"], {"q": "py"}, max_cost=1, quote_id=quote["quote_id"])
        done = self.funded.wait_for_result(paid["invocation_id"], timeout=20)
        self.assertEqual(done["status"], "succeeded")
        self.assertEqual(self.funded.status(paid["invocation_id"])["status"], "succeeded")
        self.assertEqual(self.funded.get_quote(quote["quote_id"])["status"], "used")
        receipt = self.funded.receipt(done["receipt_id"] or "")
        self.assertEqual(usdc(receipt["amount_usdc"]), price)
        split = receipt["split"]
        assert split is not None
        self.assertEqual(usdc(split["platform_fee_usdc"]), price * Decimal("0.03"))
        self.assertEqual(usdc(split["seller_share_usdc"]), price * Decimal("0.97"))

        # Paid invoke with a second quote.
        second = self.funded.quote(self.paid_listing, input={"q": "again"})
        invoked = self.funded.invoke(self.paid_listing, {"q": "again"}, max_cost=1, quote_id=second["quote_id"])
        invoked_done = self.funded.wait_for_result(invoked["invocation_id"], timeout=20)
        self.assertEqual(usdc(self.funded.receipt(invoked_done["receipt_id"] or "")["amount_usdc"]), price)

        after = usdc(self.funded.wallet()["balances"]["USDC"]["available_usdc"])
        self.assertEqual(before - after, 2 * price)

    def test_one_error_per_family(self) -> None:
        stranger = self.market.with_key("amk_not_a_real_key")
        bad_key = self.expect_error(stranger.wallet, "UNAUTHORIZED", 401)
        self.assertFalse(bad_key.retryable)

        buyer = self.buyer()
        invalid = self.expect_error(lambda: buyer.execute("", {}), "SCHEMA_VALIDATION_FAILED", 400)
        self.assertFalse(invalid.retryable)
        self.assertTrue(invalid.details["violations"])
        self.expect_error(lambda: buyer.receipt("00000000-0000-4000-8000-000000000000"), "NOT_FOUND", 404)

        quote = self.funded.quote(self.paid_listing)
        self.funded.invoke(self.paid_listing, {"q": 1}, quote_id=quote["quote_id"])
        used = self.expect_error(
            lambda: self.funded.invoke(self.paid_listing, {"q": 2}, quote_id=quote["quote_id"]),
            "QUOTE_NOT_USABLE", 409,
        )
        self.assertFalse(used.retryable)
        self.assertEqual(used.details["reason"], "quote_already_used")

        # The service marks 402 retryable (a deposit may land), so the SDK would back off and try again;
        # max_retries=0 fails at once.
        unfunded = AgentMarket(BASE, buyer.api_key, max_retries=0)
        broke = self.expect_error(
            lambda: unfunded.invoke(self.paid_listing, {"q": 3}, max_cost=1), "PAYMENT_REQUIRED", 402
        )
        self.assertEqual(broke.buyer_action, "fund_wallet_or_sign_x402_retry")


if __name__ == "__main__":
    unittest.main()
