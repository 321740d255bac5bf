"""Agent Market client (standard library only). See README.md."""
from .client import AgentMarket
from .errors import AgentMarketError

__all__ = ["AgentMarket", "AgentMarketError"]
