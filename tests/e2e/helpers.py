"""Assertions and waits shared by the end-to-end tests.

MongoDB errors are judged by their numeric `code` and `codeName` (drivers and
applications branch on them), so tests name the error they expect and this module
checks both.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import bson
import pymongo
import pytest
from pymongo.errors import NotPrimaryError, OperationFailure, WriteError

CODES = {
    "BadValue": 2,
    "UserNotFound": 11,
    "Unauthorized": 13,
    "ProtocolError": 17,
    "AuthenticationFailed": 18,
    "RoleNotFound": 31,
    "InvalidRoleModification": 71,
    "MechanismUnavailable": 334,
    "Overflow": 15,
    "ExceededMemoryLimit": 146,
    "MaxTimeMSExpired": 50,
    "FailedToParse": 9,
    "TypeMismatch": 14,
    "InvalidBSON": 22,
    "NamespaceNotFound": 26,
    "CursorNotFound": 43,
    "NamespaceExists": 48,
    "CommandNotFound": 59,
    "ImmutableField": 66,
    "CannotCreateIndex": 67,
    "IndexOptionsConflict": 85,
    "IndexNotFound": 27,
    "InvalidNamespace": 73,
    "BSONObjectTooLarge": 10334,
    "Location15952": 15952,
    "Location7406103": 7406103,
    "Location50989": 50989,
    "Location7268700": 7268700,
    "Location15955": 15955,
    "Location4568": 4568,
    "Location16493": 16493,
    "Location40099": 40099,
    "Location40101": 40101,
    "Location4031700": 4031700,
    "Location51173": 51173,
    "Location51174": 51174,
    "Location51175": 51175,
    "Location51176": 51176,
    "DuplicateKey": 11000,
    "QueryExceededMemoryLimitNoDiskUseAllowed": 292,
    "IllegalOperation": 20,
    "DataCorruptionDetected": 301,
    "OutOfDiskSpace": 14031,
    "KeyTooLong": 17280,
    "InvalidLength": 16,
    "CommandNotSupported": 115,
    "QueryRejectedBySettings": 411,
    "GraphContainsCycle": 5,
    "InvalidOptions": 72,
    "ViewDepthLimitExceeded": 165,
    "CommandNotSupportedOnView": 166,
    "OptionNotSupportedOnView": 167,
    "InvalidPipelineOperator": 168,
    "DocumentValidationFailure": 121,
    "Location40324": 40324,
    "Location232": 232,
    "Location40414": 40414,
    "Location26823": 26823,
    "Interrupted": 11601,
    "NoSuchKey": 4,
    "Location40415": 40415,
    "NoQueryExecutionPlans": 291,
    "Location13027": 13027,
    "Location16755": 16755,
    "Location16895": 16895,
    "Location40603": 40603,
    "Location5626500": 5626500,
    "AlreadyInitialized": 23,
    "OperationFailed": 96,
    "Location40602": 40602,
}


@contextmanager
def raises_code(code_name: str):
    """Expects the block to fail with the MongoDB error `code_name`.

    Command errors carry `code` and `codeName`; entries of `writeErrors` carry only
    `code` in MongoDB's replies, so only the code is required there.
    """
    with pytest.raises(OperationFailure) as info:
        yield info
    error = info.value
    assert error.code == CODES[code_name], f"expected {code_name}, got {error.details}"
    if not isinstance(error, WriteError):
        assert error.details.get("codeName") == code_name, error.details


def bson_size(doc: dict) -> int:
    return len(bson.encode(doc))


def ids(docs) -> list:
    return [d["_id"] for d in docs]


# Large values the server builds itself, so that tests of limits send little over the
# wire (used by test_resource_limits.py and scripts/soak.py).

# A string of 2**20 characters: "a" doubled twenty times.
ONE_MB_STRING = {
    "$reduce": {
        "input": {"$range": [0, 20]},
        "initialValue": "a",
        "in": {"$concat": ["$$value", "$$value"]},
    }
}


def doubling(initial, step, times=40):
    """A value doubled `times` times by $reduce: the classic value bomb."""
    return {"$reduce": {"input": {"$range": [0, times]}, "initialValue": initial, "in": step}}


def unwound(n):
    """Stages making `n` documents of 1 MB each from each input document."""
    return [{"$project": {"s": ONE_MB_STRING, "n": {"$range": [0, n]}}}, {"$unwind": "$n"}]


WAIT_S = 20.0


def wait_until(predicate, timeout_s: float = WAIT_S, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {timeout_s}s")


def reader_of(member) -> pymongo.MongoClient:
    """A client reading from this member alone, whatever its state."""
    return pymongo.MongoClient(
        member.uri,
        directConnection=True,
        readPreference="secondaryPreferred",
        serverMonitoringMode="poll",
    )


def count_on(member, collection: str = "c", db: str = "test") -> int:
    """The collection's count on this member; -1 while the member refuses reads (in
    STARTUP2, loading a copy of the data, as mongod during an initial sync)."""
    with reader_of(member) as client:
        try:
            return client[db][collection].count_documents({})
        except NotPrimaryError:
            return -1
