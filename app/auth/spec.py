"""The spec's word on security: a bearer (JWT) scheme, what each operation needs, and its 401/403.

The security requirement is declared once, at the top, as "a bearer token, or none": whether a
broker asks for one is its setting (QUIRE_AUTHENTICATION_ENABLED), not the contract's, so
clients built from the spec send a token when they have one (`AuthenticatedClient(token=...)`)
and work without one against a broker that does not ask. Open operations say `security: []`.
Every other operation lists 401 and 403 and carries `x-quire-permission`, the row of
app/auth/policy.py that decides it.
"""

from __future__ import annotations

from typing import Any

from app.auth.policy import NEEDS, Need
from app.errors import PROBLEM_MEDIA_TYPE

SCHEME = "bearerAuth"
_PROBLEM = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
UNAUTHORIZED = {
    "description": "Authentication is on and the request has no token, or a bad one (expired, not yet "
    "valid, not signed by the broker's key); `WWW-Authenticate: Bearer`",
    "content": _PROBLEM,
}
FORBIDDEN = {
    "description": "Authorization is on and the token's role lacks what the operation needs "
    "(`permission` names it, with the `tenant` and `namespace`)",
    "content": _PROBLEM,
}


def document_security(spec: dict[str, Any]) -> None:
    components = spec.setdefault("components", {})
    components["securitySchemes"] = {
        SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "A token whose `sub` claim is the role (`quire tokens create`); asked for "
            "when the broker runs with QUIRE_AUTHENTICATION_ENABLED",
        }
    }
    spec["security"] = [{SCHEME: []}, {}]
    for operations in spec.get("paths", {}).values():
        for operation in operations.values():
            need = NEEDS[operation["operationId"]]
            if need == Need.OPEN:
                operation["security"] = []
                continue
            operation["x-quire-permission"] = need.value
            responses = operation.setdefault("responses", {})
            responses["401"] = UNAUTHORIZED
            responses["403"] = FORBIDDEN
            operation["responses"] = dict(sorted(responses.items()))
