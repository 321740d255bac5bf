"""The Agent Market client: the seven SDK calls of the spec, wait_for_result and the wallet/seller helpers.

Retries only errors the service marks retryable (and network failures), honouring Retry-After, and a
retried execute/invoke carries the same idempotency key, so a retried purchase runs (and is paid) once.
urllib only, so it installs anywhere Python >= 3.9 does.
"""
import http.client
import json
import time
import uuid
from typing import Any, Callable, Dict, Optional, Tuple, Union, cast
from urllib.error import HTTPError, URLError
from urllib.parse import quote as _quote
from urllib.parse import urlencode
from urllib.request import Request, urlopen

from .errors import AgentMarketError
from .types import (
    ExecutePending,
    ExecuteResult,
    InvocationStatus,
    Json,
    ListingRecord,
    MatchResult,
    Pricing,
    Quote,
    Receipt,
    RegisterResult,
    SellerStatus,
    Wallet,
)

__version__ = "0.1.0"

#: What execute and invoke answer: the result (200) or the pending invocation (202).
Outcome = Union[ExecuteResult, ExecutePending]

#: (request, timeout seconds) -> (HTTP status, lower-cased headers, body bytes). Replaceable, so tests and
#: custom transports need no network; it raises OSError/URLError when nothing was answered.
Opener = Callable[[Request, float], Tuple[int, Dict[str, str], bytes]]


def _urllib_open(request: Request, timeout: float) -> Tuple[int, Dict[str, str], bytes]:
    try:
        with urlopen(request, timeout=timeout) as res:
            return res.status, {k.lower(): v for k, v in res.headers.items()}, res.read()
    except HTTPError as err:  # an answer with an error status: the envelope is in its body
        with err:
            return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def _seg(value: str) -> str:
    """One path segment, escaped (ids come from callers; a '/' must not change the route)."""
    return _quote(value, safe="")


class AgentMarket:
    def __init__(
        self,
        base_url: str,
        api_key: Optional[str] = None,
        timeout: float = 30,
        max_retries: int = 3,
        opener: Optional[Opener] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self._open: Opener = opener or _urllib_open

    def with_key(self, api_key: str) -> "AgentMarket":
        """A client for the same service with another key (e.g. the one register answered)."""
        return AgentMarket(self.base_url, api_key, self.timeout, self.max_retries, self._open)

    # Transport.

    def request(
        self,
        method: str,
        path: str,
        body: Optional[Json] = None,
        idempotency_key: Optional[str] = None,
    ) -> Tuple[int, Dict[str, str], Any]:
        """One call under the retry rule; answers (status, lower-cased headers, parsed body).

        Any route can be called this way (e.g. POST /api/crypto/wallet). The idempotency key, when given,
        is sent as X-Idempotency-Key on every attempt: only execute and invoke honour it.
        """
        headers = {"accept": "application/json", "user-agent": f"agentmarket-python/{__version__}"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        if idempotency_key:
            headers["x-idempotency-key"] = idempotency_key
        data = None
        if body is not None:
            headers["content-type"] = "application/json"
            data = json.dumps(body).encode()
        for attempt in range(self.max_retries + 1):
            request = Request(f"{self.base_url}{path}", data=data, headers=headers, method=method)
            try:
                status, res_headers, raw = self._open(request, self.timeout)
            except (URLError, OSError, http.client.HTTPException) as err:
                # Nothing (or half an answer) arrived: the request may or may not have run. Retrying is
                # safe for reads, and for execute/invoke thanks to the idempotency key.
                failure = AgentMarketError("NETWORK_ERROR", f"{method} {path}: {err}", retryable=True)
            else:
                parsed: Any = raw.decode("utf-8", "replace") if raw else None
                if raw and "json" in res_headers.get("content-type", ""):
                    try:
                        parsed = json.loads(raw)
                    except ValueError:  # a broken body is reported below as the HTTP status, not a crash
                        pass
                if 200 <= status < 300:
                    return status, res_headers, parsed
                failure = _error_of(status, res_headers, parsed)
            if not failure.retryable or attempt >= self.max_retries:
                raise failure
            # The service's Retry-After when it gave one, else exponential backoff (0.5, 1, 2 … 8 s).
            time.sleep(failure.retry_after if failure.retry_after is not None else min(0.5 * 2**attempt, 8.0))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _call(self, method: str, path: str, body: Optional[Json] = None, key: Optional[str] = None) -> Any:
        return self.request(method, path, body, key)[2]

    # The seven calls of the spec.

    def register(self, name: str, intent: str = "buyer") -> RegisterResult:
        """A new agent (intent: buyer, seller or both); keep api_key and signing_key, they are shown once."""
        body = {"name": name, "intent": intent}
        return cast(RegisterResult, self._call("POST", "/api/quickstart", body))

    def match(self, task: str, max_cost: Optional[float] = None) -> MatchResult:
        query: Dict[str, Any] = {"task": task}
        if max_cost is not None:
            query["max_cost"] = max_cost
        return cast(MatchResult, self._call("GET", f"/api/execute/match?{urlencode(query)}"))

    def quote(self, listing_id: str, input: Optional[Json] = None, max_cost: Optional[float] = None) -> Quote:
        """A binding price for one listing until expires_at; pay it with execute/invoke(quote_id=...)."""
        body: Json = {"listing_id": listing_id}
        if input is not None:
            body["input"] = input
        if max_cost is not None:
            body["max_cost"] = max_cost
        return cast(Quote, self._call("POST", "/api/quotes", body))

    def execute(
        self,
        task: str,
        input: Json,
        max_cost: Optional[float] = None,
        quote_id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Outcome:
        """The result (status "succeeded"), or the pending answer (202: queued, running or awaiting_approval)
        when the run outlasts the service's wait: then wait_for_result(answer["invocation_id"])."""
        body: Json = {"task": task, "input": input}
        if max_cost is not None:
            body["constraints"] = {"max_cost": max_cost}
        if quote_id is not None:
            body["quote_id"] = quote_id
        # One key per call, made here so every retry of this call carries it: the service replays.
        key = idempotency_key or str(uuid.uuid4())
        return cast(Outcome, self._call("POST", "/api/execute", body, key))

    def status(self, invocation_id: str) -> InvocationStatus:
        return cast(InvocationStatus, self._call("GET", f"/api/execute/status/{_seg(invocation_id)}"))

    def receipt(self, receipt_id: str) -> Receipt:
        return cast(Receipt, self._call("GET", f"/api/commerce/receipts/{_seg(receipt_id)}"))

    def invoke(
        self,
        listing_id: str,
        input: Json,
        max_cost: Optional[float] = None,
        quote_id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Outcome:
        """One listing directly (no ranking, no fallback); answers as execute does."""
        body: Json = {"input": input}
        if max_cost is not None:
            body["max_cost"] = max_cost
        if quote_id is not None:
            body["quote_id"] = quote_id
        key = idempotency_key or str(uuid.uuid4())
        return cast(Outcome, self._call("POST", f"/api/invoke/{_seg(listing_id)}", body, key))

    # Helpers.

    def get_quote(self, quote_id: str) -> Quote:
        """A quote read back (its status: open, used or expired)."""
        return cast(Quote, self._call("GET", f"/api/quotes/{_seg(quote_id)}"))

    def wait_for_result(self, invocation_id: str, timeout: float = 60) -> InvocationStatus:
        """Polls the status until the invocation ended (succeeded or failed) and answers it.

        Waits the Retry-After the service sends, else 0.25 s growing to 2 s. Raises TIMEOUT (retryable:
        the invocation still runs; wait again) when it has not ended after `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        pause = 0.25
        while True:
            _, headers, status = self.request("GET", f"/api/execute/status/{_seg(invocation_id)}")
            if status["status"] in ("succeeded", "failed"):
                return cast(InvocationStatus, status)
            wait = _seconds(headers.get("retry-after")) or pause
            pause = min(pause * 2, 2.0)
            if time.monotonic() + wait > deadline:
                raise AgentMarketError(
                    "TIMEOUT", f"invocation {invocation_id} still {status['status']} after {timeout} s", True
                )
            time.sleep(wait)

    def wallet(self) -> Wallet:
        return cast(Wallet, self._call("GET", "/api/wallet"))

    def pricing(self) -> Pricing:
        return cast(Pricing, self._call("GET", "/api/wallet/pricing"))

    def publish(self, listing: Json) -> ListingRecord:
        """Publishes a listing (seller or both agents); answers its record (id, slug, ...)."""
        return cast(ListingRecord, self._call("POST", "/api/capabilities", listing))

    def seller_status(self) -> SellerStatus:
        return cast(SellerStatus, self._call("GET", "/api/seller/status"))


def _seconds(value: Any) -> Optional[float]:
    """Retry-After in seconds (the service sends integers; an HTTP date is ignored), or None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return max(float(value), 0.0)
    if isinstance(value, str):
        try:
            return max(float(value), 0.0)
        except ValueError:
            return None
    return None


def _error_of(status: int, headers: Dict[str, str], body: Any) -> AgentMarketError:
    envelope = body if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
    error: Json = envelope["error"] if envelope else {}
    details: Json = error["details"] if isinstance(error.get("details"), dict) else {}
    retry_after = _seconds(headers.get("retry-after"))
    if retry_after is None:
        retry_after = _seconds(details.get("retry_after_seconds"))
    return AgentMarketError(
        code=error.get("code", f"HTTP_{status}"),
        message=error.get("message", f"HTTP {status}"),
        # Without an envelope (a proxy's 502, say) only a gateway failure is worth repeating.
        retryable=bool(error.get("retryable", status >= 500 or status == 429)),
        retry_after=retry_after,
        status=status,
        envelope=envelope,
        request_id=error.get("request_id") or headers.get("x-request-id"),
    )
