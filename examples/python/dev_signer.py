"""A minimal EIP-712 signer in pure Python, for the dev chain example only.

The Python SDK has no dependencies, and the standard library has neither keccak-256 nor secp256k1, so
this example carries its own: keccak-256 (the Keccak-f[1600] permutation with Ethereum's 0x01 padding),
secp256k1 ECDSA with RFC 6979 deterministic nonces and low-s, and EIP-712 hashing for the flat types the
gasless deposit uses (address, uint256, bytes32, string). It is not constant-time: do not sign real money
with it; use a wallet library (eth-account) or a hardware signer for that.
"""
import hashlib
import hmac
from typing import Any, Dict, List, Tuple

# Keccak-256 ------------------------------------------------------------------------------------------

_RC = [
    0x0000000000000001, 0x0000000000008082, 0x800000000000808A, 0x8000000080008000,
    0x000000000000808B, 0x0000000080000001, 0x8000000080008081, 0x8000000000008009,
    0x000000000000008A, 0x0000000000000088, 0x0000000080008009, 0x000000008000000A,
    0x000000008000808B, 0x800000000000008B, 0x8000000000008089, 0x8000000000008003,
    0x8000000000008002, 0x8000000000000080, 0x000000000000800A, 0x800000008000000A,
    0x8000000080008081, 0x8000000000008080, 0x0000000080000001, 0x8000000080008008,
]
_ROT = [[0, 36, 3, 41, 18], [1, 44, 10, 45, 2], [62, 6, 43, 15, 61], [28, 55, 25, 21, 56], [27, 20, 39, 8, 14]]
_MASK = (1 << 64) - 1


def _rol(v: int, n: int) -> int:
    return ((v << n) | (v >> (64 - n))) & _MASK if n else v


def _keccak_f(a: List[List[int]]) -> None:
    for rc in _RC:
        c = [a[x][0] ^ a[x][1] ^ a[x][2] ^ a[x][3] ^ a[x][4] for x in range(5)]
        d = [c[(x - 1) % 5] ^ _rol(c[(x + 1) % 5], 1) for x in range(5)]
        for x in range(5):
            for y in range(5):
                a[x][y] ^= d[x]
        b = [[0] * 5 for _ in range(5)]
        for x in range(5):
            for y in range(5):
                b[y][(2 * x + 3 * y) % 5] = _rol(a[x][y], _ROT[x][y])
        for x in range(5):
            for y in range(5):
                a[x][y] = b[x][y] ^ ((~b[(x + 1) % 5][y]) & b[(x + 2) % 5][y])
        a[0][0] ^= rc


def keccak256(data: bytes) -> bytes:
    rate = 136
    padded = bytearray(data) + b"\x01" + b"\x00" * ((rate - (len(data) + 1) % rate) % rate)
    padded[-1] |= 0x80
    state = [[0] * 5 for _ in range(5)]
    for off in range(0, len(padded), rate):
        block = padded[off : off + rate]
        for i in range(rate // 8):
            state[i % 5][i // 5] ^= int.from_bytes(block[8 * i : 8 * i + 8], "little")
        _keccak_f(state)
    out = b"".join(state[i % 5][i // 5].to_bytes(8, "little") for i in range(4))
    return out


# secp256k1 -------------------------------------------------------------------------------------------

_P = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F
_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_G = (
    0x79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798,
    0x483ADA7726A3C4655DA4FBFC0E1108A8FD17B448A68554199C47D08FFB10D4B8,
)


def _add(p: Any, q: Any) -> Any:
    if p is None:
        return q
    if q is None:
        return p
    if p[0] == q[0] and (p[1] + q[1]) % _P == 0:
        return None
    if p == q:
        lam = 3 * p[0] * p[0] * pow(2 * p[1], -1, _P) % _P
    else:
        lam = (q[1] - p[1]) * pow(q[0] - p[0], -1, _P) % _P
    x = (lam * lam - p[0] - q[0]) % _P
    return (x, (lam * (p[0] - x) - p[1]) % _P)


def _mul(k: int, point: Any = _G) -> Any:
    result = None
    while k:
        if k & 1:
            result = _add(result, point)
        point = _add(point, point)
        k >>= 1
    return result


def address_of(private_key: bytes) -> str:
    x, y = _mul(int.from_bytes(private_key, "big"))
    return "0x" + keccak256(x.to_bytes(32, "big") + y.to_bytes(32, "big"))[12:].hex()


def _rfc6979_k(key: bytes, digest: bytes) -> int:
    v, k = b"\x01" * 32, b"\x00" * 32
    k = hmac.new(k, v + b"\x00" + key + digest, hashlib.sha256).digest()
    v = hmac.new(k, v, hashlib.sha256).digest()
    k = hmac.new(k, v + b"\x01" + key + digest, hashlib.sha256).digest()
    v = hmac.new(k, v, hashlib.sha256).digest()
    while True:
        v = hmac.new(k, v, hashlib.sha256).digest()
        candidate = int.from_bytes(v, "big")
        if 1 <= candidate < _N:
            return candidate
        k = hmac.new(k, v + b"\x00", hashlib.sha256).digest()
        v = hmac.new(k, v, hashlib.sha256).digest()


def sign_digest(private_key: bytes, digest: bytes) -> Tuple[int, int, int]:
    """(r, s, v) with low s and v in {27, 28}."""
    d = int.from_bytes(private_key, "big")
    z = int.from_bytes(digest, "big")
    k = _rfc6979_k(private_key, digest)
    rx, ry = _mul(k)
    r = rx % _N
    s = pow(k, -1, _N) * (z + r * d) % _N
    recovery = ry & 1
    if s > _N // 2:
        s, recovery = _N - s, recovery ^ 1
    return r, s, 27 + recovery


# EIP-712 ---------------------------------------------------------------------------------------------


def _encode_type(primary: str, types: Dict[str, List[Dict[str, str]]]) -> bytes:
    fields = ",".join(f"{f['type']} {f['name']}" for f in types[primary])
    return f"{primary}({fields})".encode()


def _encode_value(kind: str, value: Any) -> bytes:
    if kind == "address":
        return int(value, 16).to_bytes(32, "big")
    if kind.startswith("uint"):
        return int(value).to_bytes(32, "big")
    if kind == "bytes32":
        return bytes.fromhex(value[2:] if value.startswith("0x") else value)
    if kind == "string":
        return keccak256(value.encode())
    raise ValueError(f"type {kind} is not supported by this example signer")


def _hash_struct(primary: str, types: Dict[str, List[Dict[str, str]]], data: Dict[str, Any]) -> bytes:
    encoded = keccak256(_encode_type(primary, types))
    for field in types[primary]:
        encoded += _encode_value(field["type"], data[field["name"]])
    return keccak256(encoded)


def sign_typed_data(private_key_hex: str, typed: Dict[str, Any]) -> str:
    """eth_signTypedData_v4 for flat structs: the 65-byte signature as 0x hex."""
    key = bytes.fromhex(private_key_hex[2:] if private_key_hex.startswith("0x") else private_key_hex)
    types = typed["types"]
    digest = keccak256(
        b"\x19\x01"
        + _hash_struct("EIP712Domain", types, typed["domain"])
        + _hash_struct(typed["primaryType"], types, typed["message"])
    )
    r, s, v = sign_digest(key, digest)
    return "0x" + r.to_bytes(32, "big").hex() + s.to_bytes(32, "big").hex() + bytes([v]).hex()
