"""The Agent Market client: the seven SDK calls of the spec, wait_for_result and helpers.

Retries only errors the service marks retryable (and network failures), with the same idempotency key,
honouring Retry-After, so a retried purchase runs once. urllib only.
"""
import json
import time
import uuid
from typing import Any, Callable, Dict, Optional, Tuple
from urllib.error import HTTPError, URLError
from urllib.parse import quote as urlquote
from urllib.parse import urlencode
from urllib.request import Request, urlopen

from .errors import AgentMarketError

Json = Dict[str, Any]
#: (request, timeout) -> (status, headers, body bytes); replaceable for tests and custom transports.
Opener = Callable[[Request, float], Tuple[int, Dict[str, str], bytes]]


def _urllib_open(request: Request, timeout: float) -> Tuple[int, Dict[str, str], bytes]:
    try:
        with urlopen(request, timeout=timeout) as res:
            return res.status, {k.lower(): v for k, v in res.headers.items()}, res.read()
    except HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


class AgentMarket:
    def __init__(
        self,
        base_url: str,
        api_key: Optional[str] = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        opener: Optional[Opener] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self._open = opener or _urllib_open

    def with_key(self, api_key: str) -> "AgentMarket":
        """A client for the same service with another key (e.g. the one register answered)."""
        return AgentMarket(self.base_url, api_key, self.timeout, self.max_retries, self._open)

    def request(
        self, method: str, path: str, body: Optional[Json] = None, idempotency_key: Optional[str] = None
    ) -> Tuple[int, Dict[str, str], Any]:
        """One call with the retry rule; answers (status, headers, parsed body)."""
        key = (idempotency_key or str(uuid.uuid4())) if method == "POST" else None
        for attempt in range(self.max_retries + 1):
            headers = {"accept": "application/json"}
            if self.api_key:
                headers["authorization"] = f"Bearer {self.api_key}"
            if key:
                headers["x-idempotency-key"] = key
            data = None
            if body is not None:
                headers["content-type"] = "application/json"
                data = json.dumps(body).encode()
            request = Request(f"{self.base_url}{path}", data=data, headers=headers, method=method)
            try:
                status, res_headers, raw = self._open(request, self.timeout)
            except (URLError, OSError) as err:
                failure = AgentMarketError("NETWORK_ERROR", f"could not reach {self.base_url}: {err}", None, True)
            else:
                parsed: Any = raw.decode() if raw else None
                if raw and "json" in res_headers.get("content-type", ""):
                    parsed = json.loads(raw)
                if 200 <= status < 300:
                    return status, res_headers, parsed
                failure = _error_of(status, res_headers, parsed)
            if not failure.retryable or attempt >= self.max_retries:
                raise failure
            time.sleep(failure.retry_after if failure.retry_after is not None else min(0.25 * 2**attempt, 5.0))
        raise AssertionError("unreachable")

    # The seven calls of the spec.

    def register(self, name: str, intent: str = "buyer") -> Json:
        return self.request("POST", "/api/quickstart", {"name": name, "intent": intent})[2]

    def match(self, task: str, max_cost: Optional[float] = None) -> Json:
        query = {"task": task, **({} if max_cost is None else {"max_cost": max_cost})}
        return self.request("GET", f"/api/execute/match?{urlencode(query)}")[2]

    def quote(self, listing_id: str, input: Optional[Json] = None, max_cost: Optional[float] = None) -> Json:
        body: Json = {"listing_id": listing_id}
        if input is not None:
            body["input"] = input
        if max_cost is not None:
            body["max_cost"] = max_cost
        return self.request("POST", "/api/quotes", body)[2]

    def execute(
        self,
        task: str,
        input: Json,
        max_cost: Optional[float] = None,
        quote_id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Json:
        """The result, or the pending status (with status_url) when the run outlasts the service's wait."""
        body: Json = {"task": task, "input": input}
        if max_cost is not None:
            body["constraints"] = {"max_cost": max_cost}
        if quote_id:
            body["quote_id"] = quote_id
        return self.request("POST", "/api/execute", body, idempotency_key)[2]

    def status(self, invocation_id: str) -> Json:
        return self.request("GET", f"/api/execute/status/{urlquote(invocation_id, safe='')}")[2]

    def receipt(self, receipt_id: str) -> Json:
        return self.request("GET", f"/api/commerce/receipts/{urlquote(receipt_id, safe='')}")[2]

    def invoke(
        self,
        listing_id: str,
        input: Json,
        max_cost: Optional[float] = None,
        quote_id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Json:
        body: Json = {"input": input}
        if max_cost is not None:
            body["max_cost"] = max_cost
        if quote_id:
            body["quote_id"] = quote_id
        return self.request("POST", f"/api/invoke/{urlquote(listing_id, safe='')}", body, idempotency_key)[2]

    # Helpers.

    def wait_for_result(self, invocation_id: str, timeout: float = 60.0) -> Json:
        """Polls until the invocation ended (succeeded or failed), honouring Retry-After; TIMEOUT after."""
        deadline = time.monotonic() + timeout
        while True:
            _, headers, status = self.request("GET", f"/api/execute/status/{urlquote(invocation_id, safe='')}")
            if status["status"] in ("succeeded", "failed"):
                return status
            wait = float(headers.get("retry-after", "1"))
            if time.monotonic() + wait > deadline:
                raise AgentMarketError("TIMEOUT", f"invocation {invocation_id} had not ended by the deadline", None, True)
            time.sleep(max(wait, 0.2))

    def wallet(self) -> Json:
        return self.request("GET", "/api/wallet")[2]

    def pricing(self) -> Json:
        return self.request("GET", "/api/wallet/pricing")[2]

    def publish(self, listing: Json) -> Json:
        return self.request("POST", "/api/capabilities", listing)[2]

    def seller_status(self) -> Json:
        return self.request("GET", "/api/seller/status")[2]


def _error_of(status: int, headers: Dict[str, str], body: Any) -> AgentMarketError:
    envelope = body if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
    error = (envelope or {}).get("error", {})
    retry_after: Optional[float] = None
    if headers.get("retry-after", "").isdigit():
        retry_after = float(headers["retry-after"])
    elif isinstance(error.get("details", {}).get("retry_after_seconds"), (int, float)):
        retry_after = float(error["details"]["retry_after_seconds"])
    return AgentMarketError(
        error.get("code", f"HTTP_{status}"),
        error.get("message", f"HTTP {status}"),
        status,
        bool(error.get("retryable", status >= 500)),
        retry_after,
        envelope,
    )
