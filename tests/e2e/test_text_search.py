"""Text search: text indexes and `$text`, as MongoDB's text search version 3.

Words are folded to lower case and stripped of diacritics, English stop words dropped,
the rest stemmed (Snowball); a search matches any of its words, all of its "phrases"
and none of its -negations; documents get MongoDB's score, which
`{$meta: "textScore"}` projects and sorts by. The text index is listed as MongoDB lists
it, one per collection; `$text` without one is IndexNotFound.
"""

from __future__ import annotations

import pytest
from pymongo import TEXT
from pymongo.errors import OperationFailure

from helpers import ids, raises_code

REVIEWS = [
    {"_id": 1, "title": "Great coffee", "body": "The coffee was strong and the café friendly"},
    {"_id": 2, "title": "Tea time", "body": "Lovely teas, no coffee at all"},
    {"_id": 3, "title": "Runner's cafe", "body": "Runners running to the coffee shop"},
    {"_id": 4, "title": "Nothing", "body": "quiet evening"},
    {"_id": 5, "other": "not indexed coffee"},
]


@pytest.fixture
def reviews(coll):
    coll.insert_many(REVIEWS)
    coll.create_index([("title", TEXT), ("body", TEXT)], weights={"title": 10})
    return coll


def search(coll, text, **options):
    return ids(coll.find({"$text": {"$search": text, **options}}).sort("_id", 1))


def test_words_match_by_stem_case_and_diacritics(reviews):
    assert search(reviews, "coffee") == [1, 2, 3]
    assert search(reviews, "RUN") == [3]
    assert search(reviews, "cafe") == [1, 3]
    assert search(reviews, "the") == []
    assert search(reviews, "tea evening") == [2, 4]
    assert search(reviews, "Coffee", **{"$caseSensitive": True}) == []


def test_phrases_and_negations(reviews):
    assert search(reviews, '"coffee shop"') == [3]
    assert search(reviews, "coffee -tea") == [1, 3]
    assert search(reviews, 'coffee -"coffee shop"') == [1, 2]
    assert search(reviews, "-coffee") == []


def test_scores_project_and_sort(reviews):
    found = list(
        reviews.find(
            {"$text": {"$search": "coffee"}},
            {"score": {"$meta": "textScore"}, "title": 1},
        ).sort([("score", {"$meta": "textScore"})])
    )
    # The title weighs ten times the body.
    assert [d["_id"] for d in found][0] == 1
    assert all("score" in d for d in found)
    assert found[0]["score"] > found[-1]["score"] > 0
    assert not any("$__textScore" in d for d in found)
    pipeline = [
        {"$match": {"$text": {"$search": "coffee"}}},
        {"$project": {"s": {"$meta": "textScore"}}},
        {"$sort": {"s": -1}},
        {"$limit": 1},
    ]
    assert [d["_id"] for d in reviews.aggregate(pipeline)] == [1]
    assert reviews.count_documents({"$text": {"$search": "coffee"}}) == 3


def test_the_index_as_mongodb_lists_it(reviews):
    index = next(i for i in reviews.list_indexes() if i["name"] == "title_text_body_text")
    assert dict(index["key"]) == {"_fts": "text", "_ftsx": 1}
    assert index["weights"] == {"title": 10, "body": 1}
    assert (index["default_language"], index["language_override"], index["textIndexVersion"]) == (
        "english",
        "language",
        3,
    )
    with raises_code("IndexOptionsConflict"):
        reviews.create_index([("other", TEXT)])
    reviews.drop_index("title_text_body_text")
    with raises_code("IndexNotFound"):
        list(reviews.find({"$text": {"$search": "coffee"}}))


def test_language_of_the_index_and_of_a_document(db):
    db.fr.insert_many(
        [
            {"_id": 1, "t": "les chevaux courent"},
            {"_id": 2, "t": "running horses", "language": "english"},
        ]
    )
    db.fr.create_index([("t", TEXT)], default_language="french")
    assert search(db.fr, "cheval") == [1]
    assert search(db.fr, "run", **{"$language": "english"}) == [2]


@pytest.mark.parametrize(
    ("filter_", "code"),
    [
        ({"$text": {}}, 4),
        ({"$text": {"$search": "a", "$bad": 1}}, 2),
        ({"$text": {"$search": "a", "$language": "klingon"}}, 2),
        ({"$or": [{"$text": {"$search": "a"}}, {"x": 1}]}, 2),
        ({"x": {"$elemMatch": {"$text": {"$search": "a"}}}}, 2),
    ],
)
def test_malformed_searches(reviews, filter_, code):
    with pytest.raises(OperationFailure) as failure:
        list(reviews.find(filter_))
    assert failure.value.code == code


def test_text_must_lead_an_aggregation(reviews):
    with pytest.raises(OperationFailure) as failure:
        list(reviews.aggregate([{"$match": {"x": 1}}, {"$match": {"$text": {"$search": "a"}}}]))
    assert failure.value.code == 17313
