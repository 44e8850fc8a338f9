"""SASL authentication, SCRAM credentials and ACLs: SaslHandshake, SaslAuthenticate, Describe/AlterUserScram-
Credentials, DescribeAcls, CreateAcls, DeleteAcls. Changes go to the active controller; reads come from this
broker's metadata image."""

from __future__ import annotations

from collections.abc import Awaitable
from itertools import groupby

from kafkette.broker.controller.control_security import filter_of
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
from kafkette.broker.protocol.messages.alter_user_scram_credentials_response import AlterUserScramCredentialsResponse
from kafkette.broker.protocol.messages.create_acls_request import CreateAclsRequest
from kafkette.broker.protocol.messages.create_acls_response import CreateAclsResponse
from kafkette.broker.protocol.messages.delete_acls_request import DeleteAclsRequest
from kafkette.broker.protocol.messages.delete_acls_response import DeleteAclsResponse
from kafkette.broker.protocol.messages.describe_acls_request import DescribeAclsRequest
from kafkette.broker.protocol.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kafkette.broker.protocol.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from kafkette.broker.protocol.messages.describe_client_quotas_response import DescribeClientQuotasResponse
from kafkette.broker.protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from kafkette.broker.protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kafkette.broker.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kafkette.broker.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from kafkette.broker.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from kafkette.broker.protocol.messages.sasl_handshake_response import SaslHandshakeResponse
from kafkette.broker.protocol.types import UNSET
from kafkette.broker.security.sasl import AuthenticationError, Credentials, new_exchange
from kafkette.broker.security.scram import ScramCredential, ScramMechanism
from kafkette.broker.server.context import RequestContext


def _credentials(ctx: RequestContext) -> Credentials:
    image_of = ctx.broker.topics

    def lookup(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return image_of.image.scram.get((user, mechanism))

    return lookup


def handle_sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    session = ctx.session
    enabled = list(ctx.broker.config.sasl_mechanisms_on(session.listener))
    if session.authenticated or not session.protocol.startswith("SASL_"):
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled)
    if request.mechanism not in enabled:
        session.failed = True  # Kafka closes the connection once the client has read why
        return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
    session.exchange = new_exchange(request.mechanism, _credentials(ctx))
    return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)


def handle_sasl_authenticate(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    session = ctx.session
    exchange = session.exchange
    if exchange is None:
        session.failed = True
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate before a successful SaslHandshake",
            auth_bytes=b"",
        )
    try:
        answer = exchange.step(request.auth_bytes)
    except AuthenticationError as exc:
        session.failed = True
        session.exchange = None
        return SaslAuthenticateResponse(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc), auth_bytes=b""
        )
    if exchange.principal is not None:
        session.principal = exchange.principal
        session.authenticated = True
        session.exchange = None
    return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message=None, auth_bytes=answer)


def handle_describe_user_scram_credentials(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    scram = ctx.broker.topics.image.scram
    by_user: dict[str, list[CredentialInfo]] = {}
    for (user, mechanism), credential in sorted(scram.items()):
        by_user.setdefault(user, []).append(CredentialInfo(mechanism=mechanism, iterations=credential.iterations))
    users = request.users
    if users is None or users is UNSET or not users:
        results = [_described(user, infos) for user, infos in by_user.items()]
    else:
        names = [u.name for u in users]
        results = []
        for name in dict.fromkeys(names):
            if names.count(name) > 1:
                results.append(
                    _described_error(name, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe the same user twice")
                )
            elif name not in by_user:
                results.append(
                    _described_error(
                        name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist"
                    )
                )
            else:
                results.append(_described(name, by_user[name]))
    return DescribeUserScramCredentialsResponse(error_code=ErrorCode.NONE, error_message=None, results=results)


def _described(user: str, infos: list[CredentialInfo]) -> DescribeUserScramCredentialsResult:
    return DescribeUserScramCredentialsResult(
        user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=infos
    )


def _described_error(user: str, code: ErrorCode, message: str) -> DescribeUserScramCredentialsResult:
    return DescribeUserScramCredentialsResult(user=user, error_code=code, error_message=message, credential_infos=[])


def handle_describe_client_quotas(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    """No client quotas are kept, so none match: `kafka-configs.sh --describe --entity-type users` asks for a
    user's quotas beside their SCRAM credentials and needs an answer."""
    return DescribeClientQuotasResponse(error_code=ErrorCode.NONE, error_message=None, entries=[])


def handle_alter_user_scram_credentials(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> Awaitable[AlterUserScramCredentialsResponse]:
    return ctx.broker.controller.forward(request, AlterUserScramCredentialsResponse)


def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> Awaitable[CreateAclsResponse]:
    return ctx.broker.controller.forward(request, CreateAclsResponse)


def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> Awaitable[DeleteAclsResponse]:
    return ctx.broker.controller.forward(request, DeleteAclsResponse)


def handle_describe_acls(ctx: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
    acl_filter = filter_of(request)
    matching = sorted(
        (acl for acl in ctx.broker.topics.image.acls.values() if acl_filter.matches(acl)),
        key=lambda a: (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation),
    )
    resources = [
        DescribeAclsResource(
            resource_type=resource_type,
            resource_name=name,
            pattern_type=pattern,
            acls=[
                AclDescription(principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission)
                for a in acls
            ],
        )
        for (resource_type, name, pattern), acls in groupby(
            matching, key=lambda a: (a.resource_type, a.resource_name, a.pattern_type)
        )
    ]
    return DescribeAclsResponse(error_code=ErrorCode.NONE, error_message=None, resources=resources)
