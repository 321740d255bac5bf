"""The service's error envelope as an exception (docs/api.md "Errors")."""
from typing import Any, Dict, Optional


class AgentMarketError(Exception):
    """An error answer of the service, or a failure to reach it.

    `code` is the envelope's code (e.g. SCHEMA_VALIDATION_FAILED), or NETWORK_ERROR / TIMEOUT when the
    service could not be reached or did not finish in time. `retryable` is the envelope's flag: repeating
    the request unchanged may succeed (the client does so itself, up to max_retries).
    """

    def __init__(
        self,
        code: str,
        message: str,
        retryable: bool = False,
        retry_after: Optional[float] = None,
        status: Optional[int] = None,
        envelope: Optional[Dict[str, Any]] = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" (HTTP {status})" if status else ""))
        self.code = code
        self.message = message
        self.retryable = retryable
        #: Seconds to wait before retrying (Retry-After or details.retry_after_seconds), when the service said.
        self.retry_after = retry_after
        #: The HTTP status; None when no answer arrived.
        self.status = status
        #: The whole answer ({"success": false, "error": {...}}), when the service sent one.
        self.envelope = envelope
        #: The X-Request-Id of the failed request: quote it when asking the operator about a failure.
        self.request_id = request_id or self._error().get("request_id")

    def _error(self) -> Dict[str, Any]:
        error = (self.envelope or {}).get("error")
        return error if isinstance(error, dict) else {}

    @property
    def details(self) -> Dict[str, Any]:
        """The envelope's details (e.g. violations, reason), or {}."""
        details = self._error().get("details")
        return details if isinstance(details, dict) else {}

    @property
    def buyer_action(self) -> Optional[str]:
        """What the caller should do next, as the service advises (e.g. add_funds)."""
        return self._error().get("buyer_action")
