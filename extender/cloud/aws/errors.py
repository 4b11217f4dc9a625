"""EC2 error codes grouped by what karpy does about them, and the mapping to cloud-domain errors.

Called by every aws/ module that talks to boto3: they catch botocore's ClientError once and
re-raise through `to_cloud_error`, so callers above the cloud layer never see botocore types.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from extender.cloud.types import CloudError, InstanceNotFoundError, InsufficientCapacityError

# The thing is gone: deleting it again is a no-op.
NOT_FOUND = frozenset(
    {
        "InvalidInstanceID.NotFound",
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
    }
)
ALREADY_EXISTS = frozenset({"InvalidLaunchTemplateName.AlreadyExistsException"})
# The offering cannot be had right now; the caller marks it unavailable and re-plans without it.
UNFULFILLABLE_CAPACITY = frozenset(
    {
        "InsufficientInstanceCapacity",
        "UnfulfillableCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "InsufficientFreeAddressesInSubnet",
        "Unsupported",
    }
)


def code_of(err: BaseException) -> str:
    """The AWS error code of a botocore error, or the exception's class name."""
    if isinstance(err, CloudError):
        return err.code or type(err).__name__
    if isinstance(err, ClientError):
        return str(err.response.get("Error", {}).get("Code", "")) or "ClientError"
    return type(err).__name__


def is_not_found(err: BaseException) -> bool:
    return code_of(err) in NOT_FOUND


def is_already_exists(err: BaseException) -> bool:
    return code_of(err) in ALREADY_EXISTS


def is_unfulfillable(code: str) -> bool:
    return code in UNFULFILLABLE_CAPACITY


def to_cloud_error(err: ClientError | BotoCoreError, doing: str) -> CloudError:
    """Wrap a botocore error as the matching CloudError, naming the step that failed ("creating fleet")."""
    code = code_of(err)
    message = f"{doing}, {err}"
    if code.startswith("InvalidInstanceID."):
        return InstanceNotFoundError(message, code=code)
    if code in UNFULFILLABLE_CAPACITY:
        return InsufficientCapacityError(message, code=code)
    return CloudError(message, code=code)


@contextmanager
def translated(doing: str) -> Iterator[None]:
    """Run a boto3 call; a botocore failure leaves as a CloudError naming `doing`."""
    try:
        yield
    except (ClientError, BotoCoreError) as err:
        raise to_cloud_error(err, doing) from err
