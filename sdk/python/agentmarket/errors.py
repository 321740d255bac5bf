"""The service's error envelope as an exception (docs/api.md "Errors")."""
from typing import Any, Dict, Optional


class AgentMarketError(Exception):
    """An error answer of the service, or a failure to reach it (NETWORK_ERROR / TIMEOUT, retryable)."""

    def __init__(
        self,
        code: str,
        message: str,
        status: Optional[int],
        retryable: bool,
        retry_after: Optional[float] = None,
        envelope: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.retryable = retryable
        #: Seconds to wait before retrying (Retry-After or details.retry_after_seconds), when given.
        self.retry_after = retry_after
        self.envelope = envelope
        self.request_id: Optional[str] = (envelope or {}).get("error", {}).get("request_id")
