from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.kafka_group import KafkaGroup
from ...models.problem import Problem
from typing import cast



def _get_kwargs(
    group: str,

) -> dict[str, Any]:
    

    

    

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/admin/v2/kafka/groups/{group}".format(group=quote(str(group), safe=""),),
    }


    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> KafkaGroup | Problem | None:
    if response.status_code == 200:
        response_200 = KafkaGroup.from_dict(response.json())



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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[KafkaGroup | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    group: str,
    *,
    client: AuthenticatedClient | Client,

) -> Response[KafkaGroup | Problem]:
    """ A Kafka consumer group's committed offsets, and its members if this broker coordinates it

    Args:
        group (str): the group id

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[KafkaGroup | Problem]
     """


    kwargs = _get_kwargs(
        group=group,

    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)

def sync(
    group: str,
    *,
    client: AuthenticatedClient | Client,

) -> KafkaGroup | Problem | None:
    """ A Kafka consumer group's committed offsets, and its members if this broker coordinates it

    Args:
        group (str): the group id

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        KafkaGroup | Problem
     """


    return sync_detailed(
        group=group,
client=client,

    ).parsed

async def asyncio_detailed(
    group: str,
    *,
    client: AuthenticatedClient | Client,

) -> Response[KafkaGroup | Problem]:
    """ A Kafka consumer group's committed offsets, and its members if this broker coordinates it

    Args:
        group (str): the group id

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[KafkaGroup | Problem]
     """


    kwargs = _get_kwargs(
        group=group,

    )

    response = await client.get_async_httpx_client().request(
        **kwargs
    )

    return _build_response(client=client, response=response)

async def asyncio(
    group: str,
    *,
    client: AuthenticatedClient | Client,

) -> KafkaGroup | Problem | None:
    """ A Kafka consumer group's committed offsets, and its members if this broker coordinates it

    Args:
        group (str): the group id

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        KafkaGroup | Problem
     """


    return (await asyncio_detailed(
        group=group,
client=client,

    )).parsed
