from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.set_schema_compatibility_strategy_strategy import SetSchemaCompatibilityStrategyStrategy
from typing import cast



def _get_kwargs(
    tenant: str,
    namespace: str,
    *,
    body: SetSchemaCompatibilityStrategyStrategy,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/admin/v2/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy".format(tenant=quote(str(tenant), safe=""),namespace=quote(str(namespace), safe=""),),
    }

    _kwargs["json"] = body.value

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

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())



        return response_404

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
    namespace: str,
    *,
    client: AuthenticatedClient | Client,
    body: SetSchemaCompatibilityStrategyStrategy,

) -> Response[Any | Problem]:
    """ Set the namespace's schema compatibility strategy

    Args:
        tenant (str): tenant
        namespace (str): namespace
        body (SetSchemaCompatibilityStrategyStrategy):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
namespace=namespace,
body=body,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    tenant: str,
    namespace: str,
    *,
    client: AuthenticatedClient | Client,
    body: SetSchemaCompatibilityStrategyStrategy,

) -> Any | Problem | None:
    """ Set the namespace's schema compatibility strategy

    Args:
        tenant (str): tenant
        namespace (str): namespace
        body (SetSchemaCompatibilityStrategyStrategy):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
     """


    return sync_detailed(
        tenant=tenant,
namespace=namespace,
client=client,
body=body,

    ).parsed

async def asyncio_detailed(
    tenant: str,
    namespace: str,
    *,
    client: AuthenticatedClient | Client,
    body: SetSchemaCompatibilityStrategyStrategy,

) -> Response[Any | Problem]:
    """ Set the namespace's schema compatibility strategy

    Args:
        tenant (str): tenant
        namespace (str): namespace
        body (SetSchemaCompatibilityStrategyStrategy):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
namespace=namespace,
body=body,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    tenant: str,
    namespace: str,
    *,
    client: AuthenticatedClient | Client,
    body: SetSchemaCompatibilityStrategyStrategy,

) -> Any | Problem | None:
    """ Set the namespace's schema compatibility strategy

    Args:
        tenant (str): tenant
        namespace (str): namespace
        body (SetSchemaCompatibilityStrategyStrategy):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
     """


    return (await asyncio_detailed(
        tenant=tenant,
namespace=namespace,
client=client,
body=body,

    )).parsed
