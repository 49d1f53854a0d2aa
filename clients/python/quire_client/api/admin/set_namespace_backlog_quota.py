from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ...client import AuthenticatedClient, Client
from ...types import Response, UNSET
from ... import errors

from ...models.backlog_quota_update import BacklogQuotaUpdate
from ...models.problem import Problem
from ...models.set_namespace_backlog_quota_backlogquotatype import SetNamespaceBacklogQuotaBacklogquotatype
from ...types import UNSET, Unset
from typing import cast



def _get_kwargs(
    tenant: str,
    namespace: str,
    *,
    body: BacklogQuotaUpdate,
    backlog_quota_type: SetNamespaceBacklogQuotaBacklogquotatype | Unset = SetNamespaceBacklogQuotaBacklogquotatype.DESTINATION_STORAGE,

) -> dict[str, Any]:
    headers: dict[str, Any] = {}


    

    params: dict[str, Any] = {}

    json_backlog_quota_type: str | Unset = UNSET
    if not isinstance(backlog_quota_type, Unset):
        json_backlog_quota_type = backlog_quota_type.value

    params["backlogQuotaType"] = json_backlog_quota_type


    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}


    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/admin/v2/namespaces/{tenant}/{namespace}/backlogQuota".format(tenant=quote(str(tenant), safe=""),namespace=quote(str(namespace), safe=""),),
        "params": params,
    }

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
    body: BacklogQuotaUpdate,
    backlog_quota_type: SetNamespaceBacklogQuotaBacklogquotatype | Unset = SetNamespaceBacklogQuotaBacklogquotatype.DESTINATION_STORAGE,

) -> Response[Any | Problem]:
    """ Set one type of backlog quota on the namespace (its topics without their own take it)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        backlog_quota_type (SetNamespaceBacklogQuotaBacklogquotatype | Unset): destination_storage
            (limitSize, bytes) or message_age (limitTime, seconds) Default:
            SetNamespaceBacklogQuotaBacklogquotatype.DESTINATION_STORAGE.
        body (BacklogQuotaUpdate): A backlog quota as posted, in Pulsar's ranges (what pulsar-
            admin sends): `limitSize` -1 and
            a `limitTime` of 0 or less mean "no such limit". The fields left out (or null) keep the
            value
            of the quota of that type in effect (the scope's own, else the namespace's); with none in
            effect, `policy` and the type's own limit are needed.

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
backlog_quota_type=backlog_quota_type,

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
    body: BacklogQuotaUpdate,
    backlog_quota_type: SetNamespaceBacklogQuotaBacklogquotatype | Unset = SetNamespaceBacklogQuotaBacklogquotatype.DESTINATION_STORAGE,

) -> Any | Problem | None:
    """ Set one type of backlog quota on the namespace (its topics without their own take it)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        backlog_quota_type (SetNamespaceBacklogQuotaBacklogquotatype | Unset): destination_storage
            (limitSize, bytes) or message_age (limitTime, seconds) Default:
            SetNamespaceBacklogQuotaBacklogquotatype.DESTINATION_STORAGE.
        body (BacklogQuotaUpdate): A backlog quota as posted, in Pulsar's ranges (what pulsar-
            admin sends): `limitSize` -1 and
            a `limitTime` of 0 or less mean "no such limit". The fields left out (or null) keep the
            value
            of the quota of that type in effect (the scope's own, else the namespace's); with none in
            effect, `policy` and the type's own limit are needed.

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
backlog_quota_type=backlog_quota_type,

    ).parsed

async def asyncio_detailed(
    tenant: str,
    namespace: str,
    *,
    client: AuthenticatedClient | Client,
    body: BacklogQuotaUpdate,
    backlog_quota_type: SetNamespaceBacklogQuotaBacklogquotatype | Unset = SetNamespaceBacklogQuotaBacklogquotatype.DESTINATION_STORAGE,

) -> Response[Any | Problem]:
    """ Set one type of backlog quota on the namespace (its topics without their own take it)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        backlog_quota_type (SetNamespaceBacklogQuotaBacklogquotatype | Unset): destination_storage
            (limitSize, bytes) or message_age (limitTime, seconds) Default:
            SetNamespaceBacklogQuotaBacklogquotatype.DESTINATION_STORAGE.
        body (BacklogQuotaUpdate): A backlog quota as posted, in Pulsar's ranges (what pulsar-
            admin sends): `limitSize` -1 and
            a `limitTime` of 0 or less mean "no such limit". The fields left out (or null) keep the
            value
            of the quota of that type in effect (the scope's own, else the namespace's); with none in
            effect, `policy` and the type's own limit are needed.

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
backlog_quota_type=backlog_quota_type,

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
    body: BacklogQuotaUpdate,
    backlog_quota_type: SetNamespaceBacklogQuotaBacklogquotatype | Unset = SetNamespaceBacklogQuotaBacklogquotatype.DESTINATION_STORAGE,

) -> Any | Problem | None:
    """ Set one type of backlog quota on the namespace (its topics without their own take it)

    Args:
        tenant (str): tenant
        namespace (str): namespace
        backlog_quota_type (SetNamespaceBacklogQuotaBacklogquotatype | Unset): destination_storage
            (limitSize, bytes) or message_age (limitTime, seconds) Default:
            SetNamespaceBacklogQuotaBacklogquotatype.DESTINATION_STORAGE.
        body (BacklogQuotaUpdate): A backlog quota as posted, in Pulsar's ranges (what pulsar-
            admin sends): `limitSize` -1 and
            a `limitTime` of 0 or less mean "no such limit". The fields left out (or null) keep the
            value
            of the quota of that type in effect (the scope's own, else the namespace's); with none in
            effect, `policy` and the type's own limit are needed.

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
backlog_quota_type=backlog_quota_type,

    )).parsed
