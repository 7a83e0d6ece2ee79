"""Indexes with a collation through pymongo, with MongoDB's semantics: createIndexes takes
`collation` and listIndexes shows it in full; a query's string conditions and its sort use
such an index only under the same collation (and a binary index only without one), while
conditions on numbers use any index; a case-insensitive unique index refuses "ABC" after
"abc"; explain's IXSCAN shows the index's collation. Every indexed answer is checked
against the same query forced onto a collection scan.
"""

from __future__ import annotations

import pytest
from pymongo.errors import DuplicateKeyError, OperationFailure

from helpers import ids, raises_code

CASE_INSENSITIVE = {"locale": "en", "strength": 2}
FRENCH = {"locale": "fr"}
WORDS = ["apple", "Apple", "APPLE", "banana", "Banana", "cherry", "éclair", "Eclair", "date"]


@pytest.fixture
def words(coll):
    coll.insert_many(
        [{"_id": i, "s": w, "n": i, "tags": [w.upper(), i]} for i, w in enumerate(WORDS)]
    )
    coll.create_index("s", name="s_ci", collation=CASE_INSENSITIVE)
    return coll


def _scan(coll, filter, collation=None, sort=None):
    """The winning plan's index scan (or None) and its explain."""
    cursor = coll.find(filter, collation=collation)
    if sort:
        cursor = cursor.sort(sort)
    plan = cursor.explain()["queryPlanner"]["winningPlan"]
    stage = plan
    while stage.get("stage") not in ("IXSCAN", "COLLSCAN", None):
        stage = stage.get("inputStage", {})
    return (stage if stage.get("stage") == "IXSCAN" else None), plan


def _same_as_collection_scan(coll, filter, collation=None, sort=None):
    """The query's ids, after checking them against a forced collection scan."""
    indexed = coll.find(filter, collation=collation)
    natural = coll.find(filter, collation=collation).hint([("$natural", 1)])
    if sort:
        indexed, natural = indexed.sort(sort), natural.sort(sort)
    got = ids(indexed)
    expected = ids(natural)
    assert got == expected if sort else sorted(got) == sorted(expected)
    return got


def test_case_insensitive_find_uses_the_collated_index(words):
    scan, _ = _scan(words, {"s": "apple"}, collation=CASE_INSENSITIVE)
    assert scan is not None and scan["indexName"] == "s_ci"
    got = _same_as_collection_scan(words, {"s": "apple"}, collation=CASE_INSENSITIVE)
    assert sorted(got) == [0, 1, 2]
    ranged = {"s": {"$gte": "B", "$lt": "D"}}
    assert _scan(words, ranged, collation=CASE_INSENSITIVE)[0]["indexName"] == "s_ci"
    assert sorted(_same_as_collection_scan(words, ranged, collation=CASE_INSENSITIVE)) == [
        3,
        4,
        5,
    ]
    inset = {"s": {"$in": ["BANANA", "banana", "Cherry"]}}
    assert sorted(_same_as_collection_scan(words, inset, collation=CASE_INSENSITIVE)) == [3, 4, 5]


def test_ixscan_explain_shows_the_index_collation(words):
    scan, _ = _scan(words, {"s": "apple"}, collation=CASE_INSENSITIVE)
    collation = scan["collation"]
    assert collation["locale"] == "en"
    assert collation["strength"] == 2
    assert collation["version"] == "57.1"
    assert list(scan)[:4] == ["stage", "keyPattern", "indexName", "collation"]
    # String bounds are collation keys, as MongoDB shows them.
    assert scan["indexBounds"]["s"][0].startswith("[CollationKey(0x")


def test_binary_or_other_collation_queries_do_not_use_it_for_strings(words):
    assert _scan(words, {"s": "apple"})[0] is None
    assert _same_as_collection_scan(words, {"s": "apple"}) == [0]
    assert _scan(words, {"s": "apple"}, collation=FRENCH)[0] is None
    assert _same_as_collection_scan(words, {"s": "Apple"}, collation=FRENCH) == [1]
    # A binary index next to it serves the binary query.
    words.create_index("s", name="s_binary")
    scan, _ = _scan(words, {"s": "apple"})
    assert scan["indexName"] == "s_binary"
    assert "collation" not in scan
    assert _scan(words, {"s": "apple"}, collation=CASE_INSENSITIVE)[0]["indexName"] == "s_ci"


def test_conditions_without_strings_use_any_index(coll):
    coll.insert_many([{"_id": i, "n": i % 5, "s": "x"} for i in range(40)])
    coll.create_index("n", collation=FRENCH)
    scan, _ = _scan(coll, {"n": {"$gte": 3}})
    assert scan is not None and scan["indexName"] == "n_1"
    assert scan["indexBounds"]["n"] == ["[3, inf.0]"]
    assert len(_same_as_collection_scan(coll, {"n": {"$gte": 3}})) == 16
    scan, _ = _scan(coll, {"n": 2}, collation=CASE_INSENSITIVE)
    assert scan is not None
    # A string condition on it under another collation cannot narrow its bounds.
    assert _scan(coll, {"n": "2"})[0] is None


def test_compound_prefix_without_strings_bounds_under_another_collation(coll):
    coll.insert_many([{"_id": i, "n": i % 4, "s": "Ab" if i % 2 else "ab"} for i in range(40)])
    coll.create_index([("n", 1), ("s", 1)], collation=CASE_INSENSITIVE)
    scan, _ = _scan(coll, {"n": 1, "s": "ab"})
    assert scan["indexBounds"] == {"n": ["[1, 1]"], "s": ["[MinKey, MaxKey]"]}
    assert _same_as_collection_scan(coll, {"n": 1, "s": "ab"}) == []
    assert len(_same_as_collection_scan(coll, {"n": 1, "s": "Ab"})) == 10
    collated = _same_as_collection_scan(coll, {"n": 1, "s": "AB"}, collation=CASE_INSENSITIVE)
    assert len(collated) == 10


def test_arrays_and_embedded_documents_are_keyed_by_the_collation(coll):
    coll.insert_many(
        [
            {"_id": 1, "t": ["Red", "green"]},
            {"_id": 2, "t": ["RED"]},
            {"_id": 3, "t": {"c": "Blue"}},
            {"_id": 4, "t": {"c": "blue"}},
            {"_id": 5, "t": "red"},
        ]
    )
    coll.create_index("t", collation=CASE_INSENSITIVE)
    assert _scan(coll, {"t": "red"}, collation=CASE_INSENSITIVE)[0] is not None
    assert sorted(_same_as_collection_scan(coll, {"t": "red"}, collation=CASE_INSENSITIVE)) == [
        1,
        2,
        5,
    ]
    blue = {"t": {"c": "BLUE"}}
    assert _scan(coll, blue, collation=CASE_INSENSITIVE)[0] is not None
    assert sorted(_same_as_collection_scan(coll, blue, collation=CASE_INSENSITIVE)) == [3, 4]


def test_unique_case_insensitive_index(coll):
    coll.create_index("email", unique=True, collation=CASE_INSENSITIVE)
    coll.insert_one({"_id": 1, "email": "abc@example.com"})
    with pytest.raises(DuplicateKeyError) as info:
        coll.insert_one({"_id": 2, "email": "ABC@Example.com"})
    assert info.value.code == 11000
    assert info.value.details["keyValue"] == {"email": "ABC@Example.com"}
    coll.insert_one({"_id": 3, "email": "abd@example.com"})
    with raises_code("DuplicateKey"):
        coll.update_one({"_id": 3}, {"$set": {"email": "ABC@EXAMPLE.COM"}})
    assert coll.count_documents({}) == 2


def test_unique_case_insensitive_index_build_refuses_existing_duplicates(coll):
    coll.insert_many([{"_id": 1, "k": "Key"}, {"_id": 2, "k": "KEY"}])
    with raises_code("DuplicateKey"):
        coll.create_index("k", unique=True, collation=CASE_INSENSITIVE)
    coll.create_index("k", unique=True)
    assert [i["name"] for i in coll.list_indexes()] == ["_id_", "k_1"]


def test_sort_is_provided_only_by_an_index_with_the_query_collation(words):
    sort = [("s", 1)]
    scan, plan = _scan(words, {}, collation=CASE_INSENSITIVE, sort=sort)
    assert plan["stage"] != "SORT" and scan["indexName"] == "s_ci"
    got = _same_as_collection_scan(
        words, {}, collation=CASE_INSENSITIVE, sort=[("s", 1), ("_id", 1)]
    )
    assert [WORDS[i].lower() for i in got] == sorted(w.lower() for w in WORDS)
    # Descending reads the index backward.
    scan, plan = _scan(words, {}, collation=CASE_INSENSITIVE, sort=[("s", -1)])
    assert scan["direction"] == "backward"
    ordered = ids(words.find({}, collation=CASE_INSENSITIVE).sort("s", -1))
    firsts = [WORDS[i].lower() for i in ordered]
    assert firsts == sorted(firsts, reverse=True)
    # A binary sort cannot take the case-insensitive order.
    _, plan = _scan(words, {}, sort=sort)
    assert plan["stage"] == "SORT"
    assert [WORDS[i] for i in ids(words.find().sort("s", 1))] == sorted(WORDS)


def test_list_indexes_shows_the_full_collation(words):
    spec = [i for i in words.list_indexes() if i["name"] == "s_ci"][0]
    assert spec["key"] == {"s": 1}
    assert spec["collation"] == {
        "locale": "en",
        "caseLevel": False,
        "caseFirst": "off",
        "strength": 2,
        "numericOrdering": False,
        "alternate": "non-ignorable",
        "maxVariable": "punct",
        "normalization": False,
        "backwards": False,
        "version": "57.1",
    }
    words.create_index("n", collation={"locale": "simple"})
    plain = [i for i in words.list_indexes() if i["name"] == "n_1"][0]
    assert "collation" not in plain


def test_collated_index_survives_a_restart(own_server):
    coll = own_server.client().db.c
    coll.create_index("s", unique=True, collation=CASE_INSENSITIVE)
    coll.insert_one({"s": "abc"})
    own_server.restart()
    coll = own_server.client().db.c
    with raises_code("DuplicateKey"):
        coll.insert_one({"s": "ABC"})
    spec = [i for i in coll.list_indexes() if i["name"] == "s_1"][0]
    assert spec["collation"]["strength"] == 2


def test_same_keys_under_another_collation_need_another_name(words):
    # Same keys, same collation, same name: already there.
    reply = words.database.command(
        "createIndexes",
        words.name,
        indexes=[{"key": {"s": 1}, "name": "s_ci", "collation": CASE_INSENSITIVE}],
    )
    assert reply["note"] == "all indexes already exist"
    # Same keys, other collation: another index, if it has another name.
    words.create_index("s", name="s_fr", collation=FRENCH)
    with raises_code("IndexOptionsConflict"):
        words.create_index("s", name="s_ci", collation=FRENCH)
    # Same keys and collation under another name.
    with raises_code("IndexOptionsConflict"):
        words.create_index("s", name="s_other", collation=CASE_INSENSITIVE)
    # Same name, other keys.
    with pytest.raises(OperationFailure) as info:
        words.create_index("n", name="s_ci", collation=CASE_INSENSITIVE)
    assert (info.value.code, info.value.details["codeName"]) == (86, "IndexKeySpecsConflict")
    assert [i["name"] for i in words.list_indexes()] == ["_id_", "s_ci", "s_fr"]
    # Dropping by a key pattern that names both is ambiguous; by name is not.
    drop_by_key = {"dropIndexes": words.name, "index": {"s": 1}}
    with pytest.raises(OperationFailure) as info:
        words.database.command(drop_by_key)
    assert (info.value.code, info.value.details["codeName"]) == (181, "AmbiguousIndexKeyPattern")
    words.drop_index("s_fr")
    words.database.command(drop_by_key)
    assert [i["name"] for i in words.list_indexes()] == ["_id_"]


@pytest.mark.parametrize(
    ("collation", "code"),
    [
        ("en", 14),  # TypeMismatch
        ({"strength": 2}, 40414),  # locale missing
        ({"locale": "xx_nowhere"}, 2),  # BadValue
        ({"locale": "en", "strength": 9}, 2),
        ({"locale": "en", "bogus": 1}, 40415),  # unknown field
    ],
)
def test_invalid_collations_are_refused(coll, collation, code):
    coll.insert_one({"s": "x"})
    spec = {"key": {"s": 1}, "name": "s_1", "collation": collation}
    with pytest.raises(OperationFailure) as info:
        coll.database.command("createIndexes", coll.name, indexes=[spec])
    assert info.value.code == code, info.value.details
    assert [i["name"] for i in coll.list_indexes()] == ["_id_"]


def test_indexes_take_the_collection_default_collation(db):
    coll = db.create_collection("c", collation=CASE_INSENSITIVE)
    coll.create_index("s", unique=True)
    coll.create_index("t", collation={"locale": "simple"})
    specs = {i["name"]: i for i in coll.list_indexes()}
    assert specs["s_1"]["collation"]["strength"] == 2
    assert "collation" not in specs["t_1"]
    coll.insert_one({"s": "abc", "t": "x"})
    with raises_code("DuplicateKey"):
        coll.insert_one({"s": "ABC"})
    # Basalt's _id index stays binary: another _id index is refused either way.
    with raises_code("IndexOptionsConflict"):
        coll.create_index("_id", name="id_again")
    with raises_code("BadValue"):
        coll.create_index("_id", name="id_ci", collation=CASE_INSENSITIVE)


def test_id_index_cannot_take_a_collation(coll):
    with raises_code("BadValue"):
        coll.create_index("_id", name="id_ci", collation=CASE_INSENSITIVE)
