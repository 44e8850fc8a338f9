"""The controller's security decisions, pure: SCRAM credentials and ACL bindings in, records and answers out.

Brokers forward AlterUserScramCredentials, CreateAcls and DeleteAcls here (after authorizing them), so every
change is one committed metadata record that every broker replays; reads are served from each broker's image.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID, uuid4

from kafkette.broker.controller.image import MetadataImage, acl_record, scram_record
from kafkette.broker.controller.records.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from kafkette.broker.controller.records.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
from kafkette.broker.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kafkette.broker.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from kafkette.broker.protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from kafkette.broker.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from kafkette.broker.protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from kafkette.broker.protocol.messages.describe_acls_request import DescribeAclsRequest
from kafkette.broker.protocol.types import Message
from kafkette.broker.security.acl import (
    AclBinding,
    AclError,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    enum_or_unknown,
    validate_binding,
)
from kafkette.broker.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism, salted_credential


def binding_of(creation: AclCreation) -> AclBinding:
    return AclBinding(
        enum_or_unknown(ResourceType, creation.resource_type),
        creation.resource_name,
        enum_or_unknown(PatternType, creation.resource_pattern_type),
        creation.principal,
        creation.host,
        enum_or_unknown(AclOperation, creation.operation),
        enum_or_unknown(PermissionType, creation.permission_type),
    )


def filter_of(entry: DeleteAclsFilter | DescribeAclsRequest) -> AclFilter:
    """DeleteAcls' filters and DescribeAcls' request name a filter's fields alike."""
    return AclFilter(
        enum_or_unknown(ResourceType, entry.resource_type_filter),
        entry.resource_name_filter,
        enum_or_unknown(PatternType, entry.pattern_type_filter),
        entry.principal_filter,
        entry.host_filter,
        enum_or_unknown(AclOperation, entry.operation),
        enum_or_unknown(PermissionType, entry.permission_type),
    )


def create_acls(
    image: MetadataImage, request: CreateAclsRequest, new_id: Callable[[], UUID] = uuid4
) -> tuple[list[Message], CreateAclsResponse]:
    records: list[Message] = []
    results = []
    existing = set(image.acls.values())
    for creation in request.creations or []:
        acl = binding_of(creation)
        try:
            validate_binding(acl)
        except AclError as exc:
            results.append(AclCreationResult(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc)))
            continue
        if acl not in existing:  # creating a binding twice is a success that changes nothing, as in Kafka
            existing.add(acl)
            records.append(acl_record(new_id(), acl))
        results.append(AclCreationResult(error_code=ErrorCode.NONE, error_message=None))
    return records, CreateAclsResponse(results=results)


def delete_acls(image: MetadataImage, request: DeleteAclsRequest) -> tuple[list[Message], DeleteAclsResponse]:
    records: list[Message] = []
    results = []
    deleted: set[UUID] = set()
    for entry in request.filters or []:
        acl_filter = filter_of(entry)
        matching = []
        for acl_id, acl in sorted(image.acls.items()):
            if not acl_filter.matches(acl):
                continue
            matching.append(_matching(acl))
            if acl_id not in deleted:
                deleted.add(acl_id)
                records.append(RemoveAccessControlEntryRecord(id=acl_id))
        results.append(DeleteAclsFilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=matching))
    return records, DeleteAclsResponse(filter_results=results)


def _matching(acl: AclBinding) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        error_code=ErrorCode.NONE,
        error_message=None,
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission,
    )


def alter_user_scram_credentials(
    image: MetadataImage, request: AlterUserScramCredentialsRequest
) -> tuple[list[Message], AlterUserScramCredentialsResponse]:
    """Per user: every deletion and upsertion applies, or none does and the user's result says why."""
    changes: dict[str, list[Message]] = {}
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: set[tuple[str, int]] = set()

    def refuse(user: str, code: ErrorCode, message: str) -> None:
        errors.setdefault(user, (code, message))

    for deletion in request.deletions or []:
        changes.setdefault(deletion.name, [])
        key = (deletion.name, deletion.mechanism)
        if not deletion.name:
            refuse(deletion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif ScramMechanism.from_number(deletion.mechanism) == ScramMechanism.UNKNOWN:
            refuse(deletion.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif key in seen:
            refuse(deletion.name, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice")
        elif key not in image.scram:
            refuse(
                deletion.name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            )
        else:
            changes[deletion.name].append(
                RemoveUserScramCredentialRecord(name=deletion.name, mechanism=deletion.mechanism)
            )
        seen.add(key)
    for upsertion in request.upsertions or []:
        changes.setdefault(upsertion.name, [])
        key = (upsertion.name, upsertion.mechanism)
        mechanism = ScramMechanism.from_number(upsertion.mechanism)
        if not upsertion.name:
            refuse(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mechanism == ScramMechanism.UNKNOWN:
            refuse(upsertion.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif key in seen:
            refuse(upsertion.name, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice")
        elif not MIN_ITERATIONS <= upsertion.iterations <= MAX_ITERATIONS:
            refuse(
                upsertion.name,
                ErrorCode.UNACCEPTABLE_CREDENTIAL,
                f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}",
            )
        elif not upsertion.salt or not upsertion.salted_password:
            refuse(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        else:
            credential = salted_credential(mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations)
            changes[upsertion.name].append(scram_record(upsertion.name, mechanism, credential))
        seen.add(key)
    records: list[Message] = []
    results = []
    for user, user_records in changes.items():
        if user in errors:
            code, message = errors[user]
            results.append(AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message))
        else:
            records.extend(user_records)
            results.append(AlterUserScramCredentialsResult(user=user, error_code=ErrorCode.NONE, error_message=None))
    return records, AlterUserScramCredentialsResponse(results=results)
