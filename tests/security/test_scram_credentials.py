"""SCRAM credentials through the controller's decisions and the image, and the SASL exchanges over them."""

from __future__ import annotations

import hashlib

import pytest
import scramp

from kafkette.broker.controller.control_security import alter_user_scram_credentials, create_acls, delete_acls
from kafkette.broker.controller.image import MetadataImage, image_records, replay
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kafkette.broker.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from kafkette.broker.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from kafkette.broker.protocol.types import Message
from kafkette.broker.security.sasl import AuthenticationError, PlainExchange, ScramExchange
from kafkette.broker.security.scram import ScramMechanism

SHA512 = ScramMechanism.SCRAM_SHA_512


def apply(image: MetadataImage, records: list[Message]) -> MetadataImage:
    for record in records:
        image = replay(image, record)
    return image


def upsertion(name: str, password: str, iterations: int = 4096, mechanism: int = SHA512) -> ScramCredentialUpsertion:
    # What Kafka's admin client sends: the password salted on the client side (Hi() of RFC 5802).
    salt = b"salt-of-" + name.encode()
    hash_name = "sha512" if mechanism == SHA512 else "sha256"
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    return ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted
    )


def with_alice() -> MetadataImage:
    records, response = alter_user_scram_credentials(
        MetadataImage(), AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion("alice", "s3cret")])
    )
    assert [r.error_code for r in response.results or []] == [ErrorCode.NONE]
    return apply(MetadataImage(), records)


def lookup(image: MetadataImage):  # type: ignore[no-untyped-def]
    return lambda user, mechanism: image.scram.get((user, mechanism))


def test_a_scram_client_authenticates_against_the_stored_credential() -> None:
    image = with_alice()
    for password, succeeds in (("s3cret", True), ("wrong", False)):
        client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", password)
        server = ScramExchange(SHA512, lookup(image))
        first = server.step(client.get_client_first().encode())
        client.set_server_first(first.decode())
        if succeeds:
            client.set_server_final(server.step(client.get_client_final().encode()).decode())
            assert server.principal == "User:alice"
        else:
            with pytest.raises(AuthenticationError, match="invalid credentials with SASL mechanism SCRAM-SHA-512"):
                server.step(client.get_client_final().encode())
            assert server.principal is None


def test_unknown_user_and_plain() -> None:
    image = with_alice()
    client = scramp.ScramClient(["SCRAM-SHA-512"], "mallory", "x")
    with pytest.raises(AuthenticationError):
        ScramExchange(SHA512, lookup(image)).step(client.get_client_first().encode())
    plain = PlainExchange(lookup(image))
    assert plain.step(b"\0alice\0s3cret") == b"" and plain.principal == "User:alice"
    for token in (b"\0alice\0nope", b"\0mallory\0s3cret", b"garbage"):
        with pytest.raises(AuthenticationError):
            PlainExchange(lookup(image)).step(token)


def test_snapshot_keeps_credentials_and_acls() -> None:
    image = with_alice()
    creation = AclCreation(
        resource_type=2,
        resource_name="orders",
        resource_pattern_type=3,
        principal="User:alice",
        host="*",
        operation=3,
        permission_type=3,
    )
    records, response = create_acls(image, CreateAclsRequest(creations=[creation, creation]))
    assert len(records) == 1 and [r.error_code for r in response.results or []] == [0, 0]
    image = apply(image, records)
    assert apply(MetadataImage(), image_records(image)) == image
    every = DeleteAclsFilter(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    records, deleted = delete_acls(image, DeleteAclsRequest(filters=[every]))
    assert [m.resource_name for m in (deleted.filter_results or [])[0].matching_acls or []] == ["orders"]
    assert not apply(image, records).acls


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (
            AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion("bob", "pw", 100)]),
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
        ),
        (
            AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion("bob", "pw", mechanism=9)]),
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ),
        (
            AlterUserScramCredentialsRequest(
                deletions=[ScramCredentialDeletion(name="bob", mechanism=2)], upsertions=[]
            ),
            ErrorCode.RESOURCE_NOT_FOUND,
        ),
        (
            AlterUserScramCredentialsRequest(
                deletions=[ScramCredentialDeletion(name="alice", mechanism=2)], upsertions=[upsertion("alice", "x")]
            ),
            ErrorCode.DUPLICATE_RESOURCE,
        ),
    ],
)
def test_refused_changes_leave_the_user_untouched(request_: AlterUserScramCredentialsRequest, code: ErrorCode) -> None:
    image = with_alice()
    records, response = alter_user_scram_credentials(image, request_)
    assert [r.error_code for r in response.results or []] == [code]
    assert records == []
