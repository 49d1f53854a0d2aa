from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.message_list import MessageList
from ...models.problem import Problem
from ...models.value_encoding import ValueEncoding
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    tenant: str,
    namespace: str,
    topic: str,
    subscription: str,
    *,
    max_messages: int | Unset = 100,
    wait_ms: int | Unset = 0,
    consumer_id: None | str | Unset = UNSET,
    value_encoding: ValueEncoding | Unset = UNSET,

) -> dict[str, Any]:
    

    

    params: dict[str, Any] = {}

    params["max_messages"] = max_messages

    params["wait_ms"] = wait_ms

    json_consumer_id: None | str | Unset
    if isinstance(consumer_id, Unset):
        json_consumer_id = UNSET
    else:
        json_consumer_id = consumer_id
    params["consumer_id"] = json_consumer_id

    json_value_encoding: str | Unset = UNSET
    if not isinstance(value_encoding, Unset):
        json_value_encoding = value_encoding.value

    params["value_encoding"] = json_value_encoding


    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}


    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/topics/{tenant}/{namespace}/{topic}/subscriptions/{subscription}/messages".format(tenant=quote(str(tenant), safe=""),namespace=quote(str(namespace), safe=""),topic=quote(str(topic), safe=""),subscription=quote(str(subscription), safe=""),),
        "params": params,
    }


    return _kwargs



def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> MessageList | Problem | None:
    if response.status_code == 200:
        response_200 = MessageList.from_dict(response.json())



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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[MessageList | Problem]:
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
    subscription: str,
    *,
    client: AuthenticatedClient | Client,
    max_messages: int | Unset = 100,
    wait_ms: int | Unset = 0,
    consumer_id: None | str | Unset = UNSET,
    value_encoding: ValueEncoding | Unset = UNSET,

) -> Response[MessageList | Problem]:
    """ Pull messages; they stay pending until acked (redelivered after the ack timeout)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic
        subscription (str): subscription
        max_messages (int | Unset): at most this many messages (capped by a setting) Default: 100.
        wait_ms (int | Unset): long-poll up to this long for the first message (capped) Default:
            0.
        consumer_id (None | str | Unset):
        value_encoding (ValueEncoding | Unset): How a value is written in JSON. On reads, `text`
            means: text when the payload is UTF-8.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MessageList | Problem]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
namespace=namespace,
topic=topic,
subscription=subscription,
max_messages=max_messages,
wait_ms=wait_ms,
consumer_id=consumer_id,
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
    subscription: str,
    *,
    client: AuthenticatedClient | Client,
    max_messages: int | Unset = 100,
    wait_ms: int | Unset = 0,
    consumer_id: None | str | Unset = UNSET,
    value_encoding: ValueEncoding | Unset = UNSET,

) -> MessageList | Problem | None:
    """ Pull messages; they stay pending until acked (redelivered after the ack timeout)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic
        subscription (str): subscription
        max_messages (int | Unset): at most this many messages (capped by a setting) Default: 100.
        wait_ms (int | Unset): long-poll up to this long for the first message (capped) Default:
            0.
        consumer_id (None | str | Unset):
        value_encoding (ValueEncoding | Unset): How a value is written in JSON. On reads, `text`
            means: text when the payload is UTF-8.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MessageList | Problem
     """


    return sync_detailed(
        tenant=tenant,
namespace=namespace,
topic=topic,
subscription=subscription,
client=client,
max_messages=max_messages,
wait_ms=wait_ms,
consumer_id=consumer_id,
value_encoding=value_encoding,

    ).parsed

async def asyncio_detailed(
    tenant: str,
    namespace: str,
    topic: str,
    subscription: str,
    *,
    client: AuthenticatedClient | Client,
    max_messages: int | Unset = 100,
    wait_ms: int | Unset = 0,
    consumer_id: None | str | Unset = UNSET,
    value_encoding: ValueEncoding | Unset = UNSET,

) -> Response[MessageList | Problem]:
    """ Pull messages; they stay pending until acked (redelivered after the ack timeout)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic
        subscription (str): subscription
        max_messages (int | Unset): at most this many messages (capped by a setting) Default: 100.
        wait_ms (int | Unset): long-poll up to this long for the first message (capped) Default:
            0.
        consumer_id (None | str | Unset):
        value_encoding (ValueEncoding | Unset): How a value is written in JSON. On reads, `text`
            means: text when the payload is UTF-8.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MessageList | Problem]
     """


    kwargs = _get_kwargs(
        tenant=tenant,
namespace=namespace,
topic=topic,
subscription=subscription,
max_messages=max_messages,
wait_ms=wait_ms,
consumer_id=consumer_id,
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
    subscription: str,
    *,
    client: AuthenticatedClient | Client,
    max_messages: int | Unset = 100,
    wait_ms: int | Unset = 0,
    consumer_id: None | str | Unset = UNSET,
    value_encoding: ValueEncoding | Unset = UNSET,

) -> MessageList | Problem | None:
    """ Pull messages; they stay pending until acked (redelivered after the ack timeout)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        topic (str): topic
        subscription (str): subscription
        max_messages (int | Unset): at most this many messages (capped by a setting) Default: 100.
        wait_ms (int | Unset): long-poll up to this long for the first message (capped) Default:
            0.
        consumer_id (None | str | Unset):
        value_encoding (ValueEncoding | Unset): How a value is written in JSON. On reads, `text`
            means: text when the payload is UTF-8.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MessageList | Problem
     """


    return (await asyncio_detailed(
        tenant=tenant,
namespace=namespace,
topic=topic,
subscription=subscription,
client=client,
max_messages=max_messages,
wait_ms=wait_ms,
consumer_id=consumer_id,
value_encoding=value_encoding,

    )).parsed
