"""The retry rule, without a network: a fake opener answers what each test needs."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from agentmarket import AgentMarket, AgentMarketError  # noqa: E402


def envelope(code: str, retryable: bool) -> bytes:
    return json.dumps(
        {"success": False, "error": {"code": code, "message": "m", "retryable": retryable,
                                     "buyer_action": "", "fallback": "", "request_id": "r"}}
    ).encode()


class RetryRule(unittest.TestCase):
    def test_retryable_error_is_retried_with_the_same_idempotency_key(self) -> None:
        keys = []

        def opener(request, timeout):
            keys.append(request.get_header("X-idempotency-key"))
            if len(keys) < 3:
                return 503, {"content-type": "application/json", "retry-after": "0"}, envelope("TEMPORARILY_UNAVAILABLE", True)
            return 200, {"content-type": "application/json"}, b'{"success": true, "output": {}}'

        result = AgentMarket("http://sdk.invalid", "amk_x", opener=opener).execute("t", {})
        self.assertTrue(result["success"])
        self.assertEqual(len(keys), 3)
        self.assertEqual(len(set(keys)), 1)
        self.assertEqual(len(keys[0]), 36)

    def test_non_retryable_error_is_raised_at_once(self) -> None:
        calls = []

        def opener(request, timeout):
            calls.append(1)
            return 400, {"content-type": "application/json"}, envelope("SCHEMA_VALIDATION_FAILED", False)

        with self.assertRaises(AgentMarketError) as caught:
            AgentMarket("http://sdk.invalid", opener=opener).execute("t", {})
        self.assertEqual(caught.exception.code, "SCHEMA_VALIDATION_FAILED")
        self.assertFalse(caught.exception.retryable)
        self.assertEqual(caught.exception.status, 400)
        self.assertEqual(len(calls), 1)


if __name__ == "__main__":
    unittest.main()
