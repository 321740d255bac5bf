"""Agent Market client, standard library only. See README.md."""
from .client import AgentMarket, __version__
from .errors import AgentMarketError
from .types import (
    ExecutePending,
    ExecuteResult,
    InvocationStatus,
    ListingRecord,
    MatchResult,
    Pricing,
    Quote,
    Receipt,
    RegisterResult,
    SellerStatus,
    Split,
    Wallet,
)

__all__ = [
    "AgentMarket",
    "AgentMarketError",
    "ExecutePending",
    "ExecuteResult",
    "InvocationStatus",
    "ListingRecord",
    "MatchResult",
    "Pricing",
    "Quote",
    "Receipt",
    "RegisterResult",
    "SellerStatus",
    "Split",
    "Wallet",
    "__version__",
]
