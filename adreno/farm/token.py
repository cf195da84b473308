"""The farm's registration token: only a device server that knows it can register at the tracker.

TVM's tracker hands the next client of a key to whichever server registered under it last, and TVM's protocol
has no credentials: any process that reaches the tracker could register a server of its own under `adreno-740`
and receive the next candidate (its artifact, and the times the tuner believes). `adreno farm tracker` makes a
random token at start (or takes ADRENO_FARM_TOKEN), prints it once, and refuses every registration (`PUT`) and
server report (`UPDATE_INFO`) that does not carry it. The farm's servers (`adreno farm agent`, `ssh`, `android`)
read it from ADRENO_FARM_TOKEN and send it appended to the address they report (the one field of TVM's
registration message a server sets, also from TVM's C++ `tvm_rpc --custom-addr` on a phone); the tracker strips it
before the address is stored, so no client ever sees it (not in a lease, not in `adreno farm status`).

What stays unauthenticated (docs/farm.md): leasing a device (any client reaching the tracker may request one) and
the RPC sessions themselves (any client reaching an agent's port; confined by `adreno.farm.rpc_gate`).
"""

from __future__ import annotations

import hmac
import os
import secrets

from .common import FarmError

TOKEN_ENV = "ADRENO_FARM_TOKEN"
_MARK = "|adreno-token="


def new_token() -> str:
    return secrets.token_urlsafe(24)


def farm_token() -> str | None:
    """ADRENO_FARM_TOKEN, or None when it is unset or empty."""
    return os.environ.get(TOKEN_ENV, "").strip() or None


def checked_token(token: str | None, what: str) -> str:
    """`token` (from `farm_token`) for `what` to register with; FarmError (one line) when there is none. Each farm
    command calls it after checking its own arguments, so a wrong port is still the error a user sees first."""
    if not token:
        raise FarmError(f"{what} needs the farm's registration token: export {TOKEN_ENV}=<the token `adreno farm "
                        "tracker` printed at start> (the tracker refuses devices without it)")
    if _MARK in token or any(c.isspace() for c in token):
        raise FarmError(f"{TOKEN_ENV} holds spaces or {_MARK!r}: use the token `adreno farm tracker` printed")
    return token


def with_token(address: str | None, token: str) -> str:
    """The address a server reports to the tracker (None: the tracker uses the connection's), carrying `token`."""
    return f"{address or ''}{_MARK}{token}"


def split_token(reported) -> tuple[str | None, str | None]:
    """(address, token) of what a server reported; (address, None) when it carries no token."""
    if not isinstance(reported, str) or _MARK not in reported:
        return reported if isinstance(reported, str) else None, None
    address, token = reported.rsplit(_MARK, 1)
    return address or None, token


def token_matches(presented: str | None, expected: str) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), expected.encode())
