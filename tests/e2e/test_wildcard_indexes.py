"""Wildcard indexes: `{"$**": 1}` (every path, or those of a `wildcardProjection`) and
`{"path.$**": 1}` (one subtree) hold each leaf value with its path, array elements
included, and serve a query's conditions on one such path as an index on that path
would; conditions a missing path could meet (null), and objects or arrays compared
whole, are left to a collection scan, as in MongoDB. Created, listed and refused as
mongod does.
"""

from __future__ import annotations

import pytest
from pymongo import ASCENDING
from pymongo.errors import OperationFailure

from helpers import ids


@pytest.fixture
def docs(coll):
    coll.insert_many(
        [
            {
                "_id": i,
                "a": i,
                "b": {"c": i % 5, "d": [i, i + 100]},
                "tags": ["x", "y"] if i % 2 else "z",
            }
            for i in range(200)
        ]
    )
    return coll


def plan_of(coll, query):
    explained = coll.database.command("explain", {"find": coll.name, "filter": query})
    return explained["queryPlanner"]["winningPlan"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"a": 5}, [5]),
        ({"b.c": 3, "a": {"$lt": 20}}, [3, 8, 13, 18]),
        ({"b.d": 150}, [50, 150]),
        ({"tags": "x", "a": {"$lt": 4}}, [1, 3]),
        ({"a": {"$gte": 197}}, [197, 198, 199]),
        ({"a": {"$in": [1, 2]}}, [1, 2]),
    ],
)
def test_conditions_on_any_path_use_the_index(docs, query, expected):
    docs.create_index([("$**", ASCENDING)])
    assert ids(docs.find(query).sort("_id", 1)) == expected
    plan = plan_of(docs, query)
    assert plan["inputStage"]["stage"] == "IXSCAN"
    assert plan["inputStage"]["keyPattern"]["$_path"] == 1


def test_what_the_index_cannot_answer_is_scanned(docs):
    docs.create_index([("$**", ASCENDING)])
    for query in [{"a": None}, {"missing": {"$exists": False}}, {"b": {"c": 1, "d": [1, 101]}}]:
        assert plan_of(docs, query)["stage"] == "COLLSCAN"
    assert ids(docs.find({"b": {"c": 1, "d": [1, 101]}})) == [1]
    assert docs.count_documents({"a": None}) == 0


def test_subtree_and_projection(docs):
    docs.create_index([("b.$**", ASCENDING)])
    assert plan_of(docs, {"b.c": 1})["inputStage"]["stage"] == "IXSCAN"
    assert plan_of(docs, {"a": 1})["stage"] == "COLLSCAN"
    docs.drop_indexes()
    docs.create_index([("$**", ASCENDING)], wildcardProjection={"tags": 1})
    assert plan_of(docs, {"tags": "z"})["inputStage"]["stage"] == "IXSCAN"
    assert plan_of(docs, {"a": 1})["stage"] == "COLLSCAN"
    listed = next(i for i in docs.list_indexes() if i["name"] == "$**_1")
    assert listed["wildcardProjection"] == {"tags": 1}


def test_the_index_follows_writes(docs):
    docs.create_index([("$**", ASCENDING)])
    docs.update_one({"_id": 1}, {"$set": {"b.c": 99, "new": {"deep": "v"}}})
    docs.delete_one({"_id": 2})
    assert ids(docs.find({"b.c": 99})) == [1]
    assert ids(docs.find({"new.deep": "v"})) == [1]
    assert docs.count_documents({"a": 2}) == 0


@pytest.mark.parametrize(
    ("keys", "options", "code"),
    [
        ([("$**", 1)], {"unique": True}, 67),
        ([("$**", 1)], {"sparse": True}, 67),
        ([("$**", 1)], {"expireAfterSeconds": 10}, 67),
        ([("a.$**.$**", 1)], {}, 67),
        ([("$**", "hashed")], {}, 67),
        ([("a.$**", 1)], {"wildcardProjection": {"a": 1}}, 9),
        ([("$**", 1)], {"wildcardProjection": {"a": 1, "b": 0}}, 31254),
        ([("$**", 1)], {"wildcardProjection": "a"}, 14),
        ([("a", 1)], {"wildcardProjection": {"a": 1}}, 2),
    ],
)
def test_malformed_wildcard_indexes(coll, keys, options, code):
    with pytest.raises(OperationFailure) as refused:
        coll.create_index(keys, **options)
    assert refused.value.code == code
