from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.tenant_info import TenantInfo
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    tenant: str,
    *,
    body: TenantInfo | Unset = UNSET,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/admin/v2/tenants/{tenant}".format(tenant=quote(str(tenant), safe=""),),
    }

    
    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Any | Problem | None:
    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())



        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())



        return response_403

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())



        return response_409

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())



        return response_422

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())



        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Any | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    tenant: str,
    *,
    client: AuthenticatedClient | Client,
    body: TenantInfo | Unset = UNSET,

) -> Response[Any | Problem]:
    """ Create a tenant, with the roles that administer it (Pulsar's TenantInfo)

    Args:
        tenant (str):
        body (TenantInfo | Unset): Pulsar's TenantInfo: the roles that administer the tenant (its
            namespaces, topics, policies
            and permissions), and the clusters it may use (stored and shown; Quire is one cluster).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
body=body,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    tenant: str,
    *,
    client: AuthenticatedClient | Client,
    body: TenantInfo | Unset = UNSET,

) -> Any | Problem | None:
    """ Create a tenant, with the roles that administer it (Pulsar's TenantInfo)

    Args:
        tenant (str):
        body (TenantInfo | Unset): Pulsar's TenantInfo: the roles that administer the tenant (its
            namespaces, topics, policies
            and permissions), and the clusters it may use (stored and shown; Quire is one cluster).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
     """


    return sync_detailed(
        tenant=tenant,
client=client,
body=body,

    ).parsed

async def asyncio_detailed(
    tenant: str,
    *,
    client: AuthenticatedClient | Client,
    body: TenantInfo | Unset = UNSET,

) -> Response[Any | Problem]:
    """ Create a tenant, with the roles that administer it (Pulsar's TenantInfo)

    Args:
        tenant (str):
        body (TenantInfo | Unset): Pulsar's TenantInfo: the roles that administer the tenant (its
            namespaces, topics, policies
            and permissions), and the clusters it may use (stored and shown; Quire is one cluster).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
body=body,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    tenant: str,
    *,
    client: AuthenticatedClient | Client,
    body: TenantInfo | Unset = UNSET,

) -> Any | Problem | None:
    """ Create a tenant, with the roles that administer it (Pulsar's TenantInfo)

    Args:
        tenant (str):
        body (TenantInfo | Unset): Pulsar's TenantInfo: the roles that administer the tenant (its
            namespaces, topics, policies
            and permissions), and the clusters it may use (stored and shown; Quire is one cluster).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
     """


    return (await asyncio_detailed(
        tenant=tenant,
client=client,
body=body,

    )).parsed
