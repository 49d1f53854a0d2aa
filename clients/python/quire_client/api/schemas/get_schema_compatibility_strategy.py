from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.get_schema_compatibility_strategy_response_getschemacompatibilitystrategy import GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy
from ...models.problem import Problem
from typing import cast



def _get_kwargs(
    tenant: str,
    namespace: str,

) -> dict[str, Any]:
    

    

    

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/admin/v2/namespaces/{tenant}/{namespace}/schemaCompatibilityStrategy".format(tenant=quote(str(tenant), safe=""),namespace=quote(str(namespace), safe=""),),
    }


    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy | Problem | None:
    if response.status_code == 200:
        response_200 = GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy(response.json())



        return response_200

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy | Problem]:
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

) -> Response[GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy | Problem]:
    """ The namespace's schema compatibility strategy (FULL when unset)

    Args:
        tenant (str): tenant
        namespace (str): namespace

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy | Problem]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
namespace=namespace,

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

) -> GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy | Problem | None:
    """ The namespace's schema compatibility strategy (FULL when unset)

    Args:
        tenant (str): tenant
        namespace (str): namespace

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy | Problem
     """


    return sync_detailed(
        tenant=tenant,
namespace=namespace,
client=client,

    ).parsed

async def asyncio_detailed(
    tenant: str,
    namespace: str,
    *,
    client: AuthenticatedClient | Client,

) -> Response[GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy | Problem]:
    """ The namespace's schema compatibility strategy (FULL when unset)

    Args:
        tenant (str): tenant
        namespace (str): namespace

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy | Problem]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
namespace=namespace,

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

) -> GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy | Problem | None:
    """ The namespace's schema compatibility strategy (FULL when unset)

    Args:
        tenant (str): tenant
        namespace (str): namespace

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetSchemaCompatibilityStrategyResponseGetschemacompatibilitystrategy | Problem
     """


    return (await asyncio_detailed(
        tenant=tenant,
namespace=namespace,
client=client,

    )).parsed
