"""The retry rule, without a network: a fake opener answers what each test needs, time.sleep is recorded."""
import json
import os
import sys
import unittest
from typing import Any, Dict, List, Optional, Tuple
from unittest import mock
from urllib.error import URLError
from urllib.request import Request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from agentmarket import AgentMarket, AgentMarketError  # noqa: E402

JSON = {"content-type": "application/json"}
OK = (200, JSON, b'{"success": true, "status": "succeeded", "output": {}}')


def envelope(code: str, retryable: bool, details: Optional[Dict[str, Any]] = None) -> bytes:
    error: Dict[str, Any] = {"code": code, "message": "m", "retryable": retryable, "buyer_action": "a",
                             "fallback": "f", "request_id": "req-1"}
    if details is not None:
        error["details"] = details
    return json.dumps({"success": False, "error": error}).encode()


class FakeOpener:
    """Answers from a script (an exception is raised), recording each request's idempotency key."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.keys: List[Optional[str]] = []

    def __call__(self, request: Request, timeout: float) -> Tuple[int, Dict[str, str], bytes]:
        self.keys.append(request.get_header("X-idempotency-key"))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]


@mock.patch("agentmarket.client.time.sleep")
class RetryRule(unittest.TestCase):
    def test_retryable_503_is_retried_with_the_same_idempotency_key(self, sleep: mock.Mock) -> None:
        unavailable = (503, {**JSON, "retry-after": "2"}, envelope("TEMPORARILY_UNAVAILABLE", True))
        opener = FakeOpener(unavailable, unavailable, OK)
        result = AgentMarket("http://sdk.invalid", "amk_x", opener=opener).execute("t", {})
        self.assertEqual(result["status"], "succeeded")
        self.assertEqual(len(opener.keys), 3)
        self.assertEqual(len(set(opener.keys)), 1)  # one key for every attempt: the service replays
        self.assertEqual(len(opener.keys[0] or ""), 36)  # a uuid4
        self.assertEqual(sleep.call_args_list, [mock.call(2.0), mock.call(2.0)])  # Retry-After honoured

    def test_the_callers_key_is_kept_and_details_retry_after_is_honoured(self, sleep: mock.Mock) -> None:
        limited = (429, JSON, envelope("RATE_LIMITED", True, {"retry_after_seconds": 3}))
        opener = FakeOpener(limited, OK)
        AgentMarket("http://sdk.invalid", "amk_x", opener=opener).invoke("l", {}, idempotency_key="mine")
        self.assertEqual(opener.keys, ["mine", "mine"])
        sleep.assert_called_once_with(3.0)

    def test_network_errors_are_retried_with_backoff_until_max_retries(self, sleep: mock.Mock) -> None:
        opener = FakeOpener(*[URLError("connection refused")] * 3)
        with self.assertRaises(AgentMarketError) as caught:
            AgentMarket("http://sdk.invalid", max_retries=2, opener=opener).status("i")
        self.assertEqual((caught.exception.code, caught.exception.retryable), ("NETWORK_ERROR", True))
        self.assertEqual(len(opener.keys), 3)
        self.assertEqual(opener.keys, [None, None, None])  # reads carry no key
        self.assertEqual(sleep.call_args_list, [mock.call(0.5), mock.call(1.0)])

    def test_non_retryable_400_is_raised_at_once(self, sleep: mock.Mock) -> None:
        opener = FakeOpener((400, {**JSON, "x-request-id": "req-1"}, envelope("SCHEMA_VALIDATION_FAILED", False)))
        with self.assertRaises(AgentMarketError) as caught:
            AgentMarket("http://sdk.invalid", opener=opener).execute("t", {})
        error = caught.exception
        self.assertEqual((error.code, error.status, error.retryable), ("SCHEMA_VALIDATION_FAILED", 400, False))
        self.assertEqual(error.request_id, "req-1")
        self.assertEqual(error.buyer_action, "a")
        self.assertEqual(len(opener.keys), 1)
        sleep.assert_not_called()

    def test_wait_for_result_polls_until_the_invocation_ended(self, sleep: mock.Mock) -> None:
        running = (200, {**JSON, "retry-after": "1"}, b'{"status": "running"}')
        opener = FakeOpener(running, (200, JSON, b'{"status": "failed", "error": {"code": "PROVIDER_FAILED"}}'))
        done = AgentMarket("http://sdk.invalid", "amk_x", opener=opener).wait_for_result("i")
        self.assertEqual(done["status"], "failed")
        sleep.assert_called_once_with(1.0)


if __name__ == "__main__":
    unittest.main()
