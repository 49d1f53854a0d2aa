from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.problem import Problem
from ...models.read_page import ReadPage
from ...models.value_encoding import ValueEncoding
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    tenant: str,
    namespace: str,
    topic: str,
    *,
    start: str | Unset = 'earliest',
    max_messages: int | Unset = 100,
    read_compacted: bool | Unset = False,
    wait_ms: int | Unset = 0,
    value_encoding: ValueEncoding | Unset = UNSET,

) -> dict[str, Any]:
    

    

    params: dict[str, Any] = {}

    params["start"] = start

    params["max_messages"] = max_messages

    params["read_compacted"] = read_compacted

    params["wait_ms"] = wait_ms

    json_value_encoding: str | Unset = UNSET
    if not isinstance(value_encoding, Unset):
        json_value_encoding = value_encoding.value

    params["value_encoding"] = json_value_encoding


    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}


    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/topics/{tenant}/{namespace}/{topic}/messages".format(tenant=quote(str(tenant), safe=""),namespace=quote(str(namespace), safe=""),topic=quote(str(topic), safe=""),),
        "params": params,
    }


    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Problem | ReadPage | None:
    if response.status_code == 200:
        response_200 = ReadPage.from_dict(response.json())



        return response_200

    if response.status_code == 307:
        response_307 = Problem.from_dict(response.json())



        return response_307

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())



        return response_400

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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Problem | ReadPage]:
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
    start: str | Unset = 'earliest',
    max_messages: int | Unset = 100,
    read_compacted: bool | Unset = False,
    wait_ms: int | Unset = 0,
    value_encoding: ValueEncoding | Unset = UNSET,

) -> Response[Problem | ReadPage]:
    """ Read a page of messages without a subscription (non-durable reader)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic
        start (str | Unset): earliest, latest, an id (inclusive), after:<id>, or time:<ms> (the
            first message published at or after it) Default: 'earliest'.
        max_messages (int | Unset): at most this many messages (capped by a setting) Default: 100.
        read_compacted (bool | Unset):  Default: False.
        wait_ms (int | Unset): long-poll up to this long for the first message (capped) Default:
            0.
        value_encoding (ValueEncoding | Unset): How a value is written in JSON. On reads, `text`
            means: text when the payload is UTF-8.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ReadPage]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
namespace=namespace,
topic=topic,
start=start,
max_messages=max_messages,
read_compacted=read_compacted,
wait_ms=wait_ms,
value_encoding=value_encoding,

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
    start: str | Unset = 'earliest',
    max_messages: int | Unset = 100,
    read_compacted: bool | Unset = False,
    wait_ms: int | Unset = 0,
    value_encoding: ValueEncoding | Unset = UNSET,

) -> Problem | ReadPage | None:
    """ Read a page of messages without a subscription (non-durable reader)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic
        start (str | Unset): earliest, latest, an id (inclusive), after:<id>, or time:<ms> (the
            first message published at or after it) Default: 'earliest'.
        max_messages (int | Unset): at most this many messages (capped by a setting) Default: 100.
        read_compacted (bool | Unset):  Default: False.
        wait_ms (int | Unset): long-poll up to this long for the first message (capped) Default:
            0.
        value_encoding (ValueEncoding | Unset): How a value is written in JSON. On reads, `text`
            means: text when the payload is UTF-8.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ReadPage
     """


    return sync_detailed(
        tenant=tenant,
namespace=namespace,
topic=topic,
client=client,
start=start,
max_messages=max_messages,
read_compacted=read_compacted,
wait_ms=wait_ms,
value_encoding=value_encoding,

    ).parsed

async def asyncio_detailed(
    tenant: str,
    namespace: str,
    topic: str,
    *,
    client: AuthenticatedClient | Client,
    start: str | Unset = 'earliest',
    max_messages: int | Unset = 100,
    read_compacted: bool | Unset = False,
    wait_ms: int | Unset = 0,
    value_encoding: ValueEncoding | Unset = UNSET,

) -> Response[Problem | ReadPage]:
    """ Read a page of messages without a subscription (non-durable reader)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic
        start (str | Unset): earliest, latest, an id (inclusive), after:<id>, or time:<ms> (the
            first message published at or after it) Default: 'earliest'.
        max_messages (int | Unset): at most this many messages (capped by a setting) Default: 100.
        read_compacted (bool | Unset):  Default: False.
        wait_ms (int | Unset): long-poll up to this long for the first message (capped) Default:
            0.
        value_encoding (ValueEncoding | Unset): How a value is written in JSON. On reads, `text`
            means: text when the payload is UTF-8.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ReadPage]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
namespace=namespace,
topic=topic,
start=start,
max_messages=max_messages,
read_compacted=read_compacted,
wait_ms=wait_ms,
value_encoding=value_encoding,

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
    start: str | Unset = 'earliest',
    max_messages: int | Unset = 100,
    read_compacted: bool | Unset = False,
    wait_ms: int | Unset = 0,
    value_encoding: ValueEncoding | Unset = UNSET,

) -> Problem | ReadPage | None:
    """ Read a page of messages without a subscription (non-durable reader)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic
        start (str | Unset): earliest, latest, an id (inclusive), after:<id>, or time:<ms> (the
            first message published at or after it) Default: 'earliest'.
        max_messages (int | Unset): at most this many messages (capped by a setting) Default: 100.
        read_compacted (bool | Unset):  Default: False.
        wait_ms (int | Unset): long-poll up to this long for the first message (capped) Default:
            0.
        value_encoding (ValueEncoding | Unset): How a value is written in JSON. On reads, `text`
            means: text when the payload is UTF-8.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ReadPage
     """


    return (await asyncio_detailed(
        tenant=tenant,
namespace=namespace,
topic=topic,
client=client,
start=start,
max_messages=max_messages,
read_compacted=read_compacted,
wait_ms=wait_ms,
value_encoding=value_encoding,

    )).parsed
