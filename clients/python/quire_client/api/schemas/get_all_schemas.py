from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.get_all_versions_response import GetAllVersionsResponse
from ...models.problem import Problem
from typing import cast



def _get_kwargs(
    tenant: str,
    namespace: str,
    topic: str,

) -> dict[str, Any]:
    

    

    

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/admin/v2/schemas/{tenant}/{namespace}/{topic}/versions".format(tenant=quote(str(tenant), safe=""),namespace=quote(str(namespace), safe=""),topic=quote(str(topic), safe=""),),
    }


    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> GetAllVersionsResponse | Problem | None:
    if response.status_code == 200:
        response_200 = GetAllVersionsResponse.from_dict(response.json())



        return response_200

    if response.status_code == 307:
        response_307 = Problem.from_dict(response.json())



        return response_307

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[GetAllVersionsResponse | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    tenant: str,
    namespace: str,
    topic: str,
    *,
    client: AuthenticatedClient | Client,

) -> Response[GetAllVersionsResponse | Problem]:
    """ Every live version of the topic's schema, oldest first

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetAllVersionsResponse | Problem]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
namespace=namespace,
topic=topic,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    tenant: str,
    namespace: str,
    topic: str,
    *,
    client: AuthenticatedClient | Client,

) -> GetAllVersionsResponse | Problem | None:
    """ Every live version of the topic's schema, oldest first

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetAllVersionsResponse | Problem
     """


    return sync_detailed(
        tenant=tenant,
namespace=namespace,
topic=topic,
client=client,

    ).parsed

async def asyncio_detailed(
    tenant: str,
    namespace: str,
    topic: str,
    *,
    client: AuthenticatedClient | Client,

) -> Response[GetAllVersionsResponse | Problem]:
    """ Every live version of the topic's schema, oldest first

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[GetAllVersionsResponse | Problem]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
namespace=namespace,
topic=topic,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    tenant: str,
    namespace: str,
    topic: str,
    *,
    client: AuthenticatedClient | Client,

) -> GetAllVersionsResponse | Problem | None:
    """ Every live version of the topic's schema, oldest first

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        GetAllVersionsResponse | Problem
     """


    return (await asyncio_detailed(
        tenant=tenant,
namespace=namespace,
topic=topic,
client=client,

    )).parsed
