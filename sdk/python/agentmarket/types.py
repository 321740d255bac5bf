"""Types of the answers the client returns, from the service's OpenAPI document (docs/openapi.json).

Only the top level is spelled out; nested records the SDK does not interpret stay Dict[str, Any]. Money is
a 6-decimal string ("0.050000"), times are ISO 8601 strings, ids are UUID strings. These are type hints
only: nothing is checked at run time, and the service may add fields.
"""
from typing import Any, Dict, List, Literal, Optional, TypedDict

Json = Dict[str, Any]


class RegisterResult(TypedDict):
    """POST /api/quickstart (201). api_key and signing_key are shown once: keep them."""

    agent_id: str
    name: str
    intent: Literal["buyer", "seller", "both"]
    api_key: str
    api_key_notice: str
    signing_key: str
    signing_public_key: str
    signing_key_format: str
    created_at: str
    wallet_setup: Json
    next_steps: List[Any]


class MatchResult(TypedDict):
    """GET /api/execute/match: the providers in the order execute would try them."""

    task: str
    max_cost_usdc: Optional[str]
    candidates: List[Json]
    excluded: List[Json]
    ranking: Json


class PaymentOption(TypedDict):
    method: Literal["ledger", "x402", "mpp"]
    how: str
    url: str


class Quote(TypedDict):
    """POST /api/quotes (201), GET /api/quotes/{quote_id}: a binding price for one listing until expires_at."""

    quote_id: str
    rail: Literal["ledger", "x402", "tumbler"]
    listing_id: str
    task: str
    price_usdc: str
    platform_fee_usdc: str
    seller_share_usdc: str
    currency: str
    network: Optional[str]
    asset: Optional[str]
    pay_to: Optional[str]
    expires_at: str
    status: Literal["open", "used", "expired"]
    invocation_id: Optional[str]
    payment_options: List[PaymentOption]
    constraints: Json


class ExecuteResult(TypedDict):
    """POST /api/execute or /api/invoke/{id} (200): the call finished within the service's wait."""

    success: Literal[True]
    output: Any
    invocation_id: str
    status: Literal["succeeded"]
    receipt_id: Optional[str]
    provider: Json
    served_listing_id: Optional[str]
    selection_reason: Optional[str]
    cost: Json
    metering: Json
    status_url: str
    receipt_url: Optional[str]


class _PendingBase(TypedDict):
    success: Literal[False]
    status: Literal["queued", "running", "awaiting_approval"]
    invocation_id: str
    message: str
    status_url: str


class ExecutePending(_PendingBase, total=False):
    """POST /api/execute or /api/invoke/{id} (202): still running (poll wait_for_result), or awaiting a
    supervisor's approval (the approval_* fields are set then)."""

    approval_id: str
    amount_usdc: str
    approval_above_usdc: str
    expires_at: str
    next_steps: List[str]
    approval_url: str


class InvocationStatus(TypedDict):
    """GET /api/execute/status/{invocation_id}."""

    invocation_id: str
    status: Literal["queued", "running", "awaiting_approval", "succeeded", "failed"]
    task: str
    route: str
    listing_id: str
    served_listing_id: Optional[str]
    created_at: str
    started_at: Optional[str]
    completed_at: Optional[str]
    output: Any
    error: Optional[Json]
    attempts: List[Json]
    receipt_id: Optional[str]
    receipt_null_reason: Optional[str]
    cost: Json
    payment: Json
    settlement: Json
    status_url: str
    receipt_url: Optional[str]


class Split(TypedDict):
    """The 97/3 split of a paid call's price."""

    seller_share_usdc: str
    platform_fee_usdc: str
    platform_fee_rate: float
    rule: str


class Receipt(TypedDict):
    """GET /api/commerce/receipts/{receipt_id}: written for succeeded invocations only."""

    receipt_id: str
    schema: str
    invocation_id: str
    agent_id: str
    listing_id: str
    provider_name: Optional[str]
    served_listing_id: Optional[str]
    attempts: List[Json]
    outcome: Literal["succeeded"]
    amount_usdc: str
    currency: str
    split: Optional[Split]
    split_null_reason: Optional[str]
    provider_evidence: Json
    payment: Json
    settlement: Json
    created_at: str
    status_url: str


class Wallet(TypedDict):
    """GET /api/wallet; balances["USDC"]["available_usdc"] is what can be spent now."""

    agent_id: str
    balances: Json
    linked_wallet: Optional[Json]
    funding: Json
    deposit_to: Json
    pending_deposits: List[Json]
    recent_deposits: List[Json]
    payouts: Json
    links: Json


class Pricing(TypedDict):
    """GET /api/wallet/pricing: the fee rate, the split rule and the funding routes."""

    currency: str
    decimals: int
    amounts: str
    platform_fee_rate: float
    split: Json
    listings: Json
    tools: List[Json]
    seller_bond_usdc: str
    deposits: Json
    funding: Json
    chain: Json


class SellerStatus(TypedDict):
    """GET /api/seller/status."""

    agent_id: str
    live_listings: int
    free_concurrent_listing_slots: int
    free_concurrent_listing_slots_remaining: int
    stake_required_for_next_listing: bool
    bond: Json
    payouts: Json
    publish_listing_template: Json
    next_best_action: str
    listings: List[Json]


#: POST /api/capabilities (201): the listing record (over a hundred fields; id and slug are the usual ones).
ListingRecord = Json
