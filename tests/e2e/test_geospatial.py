"""Geospatial queries and indexes, with MongoDB's semantics and errors.

GeoJSON geometries live on the sphere (edges are great-circle arcs), legacy pairs on a
plane; `$geoWithin`, `$geoIntersects`, `$near`/`$nearSphere` and the `$geoNear` stage
answer as MongoDB's do (distances in meters for GeoJSON, radians for legacy pairs on
the sphere). `2dsphere` and `2d` indexes refuse documents they cannot hold, are what
`$near` needs, and serve `$geoWithin`/`$geoIntersects` through their cells.
"""

from __future__ import annotations

import math

import pytest
from pymongo import GEO2D, GEOSPHERE

from helpers import ids, raises_code

EARTH_RADIUS_METERS = 6378100

PLACES = [
    {"_id": 1, "name": "paris", "loc": {"type": "Point", "coordinates": [2.35, 48.85]}},
    {"_id": 2, "name": "lyon", "loc": {"type": "Point", "coordinates": [4.84, 45.76]}},
    {"_id": 3, "name": "berlin", "loc": {"type": "Point", "coordinates": [13.40, 52.52]}},
    {"_id": 4, "name": "legacy pair in paris", "loc": [2.30, 48.86]},
    {"_id": 5, "name": "no location"},
    {
        "_id": 6,
        "name": "seine segment",
        "loc": {"type": "LineString", "coordinates": [[2.20, 48.80], [2.50, 48.90]]},
    },
]

FRANCE = {
    "type": "Polygon",
    "coordinates": [[[-5, 42], [8, 42], [8, 51], [-5, 51], [-5, 42]]],
}


@pytest.fixture
def places(coll):
    coll.create_index([("loc", GEOSPHERE)])
    coll.insert_many(PLACES)
    return coll


def index_accesses(coll, name):
    stats = coll.aggregate([{"$indexStats": {}}])
    return next(s["accesses"]["ops"] for s in stats if s["name"] == name)


def test_geo_within_a_polygon_holds_whole_geometries(places):
    found = places.find({"loc": {"$geoWithin": {"$geometry": FRANCE}}}).sort("_id", 1)
    assert ids(found) == [1, 2, 4, 6]


def test_queries_read_the_geo_index(places):
    before = index_accesses(places, "loc_2dsphere")
    assert places.count_documents({"loc": {"$geoWithin": {"$geometry": FRANCE}}}) == 4
    assert index_accesses(places, "loc_2dsphere") == before + 1
    # The same answer from a collection scan.
    scanned = places.find({"loc": {"$geoWithin": {"$geometry": FRANCE}}}).hint({"$natural": 1})
    assert sorted(ids(scanned)) == [1, 2, 4, 6]


def test_edges_are_great_circles(coll):
    # The edge at latitude 60 from longitude -80 to 80 passes near latitude 70 at the
    # meridian: a point at latitude 61 is inside the spherical polygon, although it is
    # outside the rectangle a map draws.
    coll.insert_one({"_id": 1, "loc": {"type": "Point", "coordinates": [0, 61]}})
    wide = {
        "type": "Polygon",
        "coordinates": [[[-80, 0], [80, 0], [80, 60], [-80, 60], [-80, 0]]],
    }
    assert ids(coll.find({"loc": {"$geoWithin": {"$geometry": wide}}})) == [1]


def test_geo_intersects_lines_and_polygons(places):
    line = {"type": "LineString", "coordinates": [[2.25, 48.0], [2.25, 49.5]]}
    assert ids(places.find({"loc": {"$geoIntersects": {"$geometry": line}}})) == [6]
    found = places.find({"loc": {"$geoIntersects": {"$geometry": FRANCE}}}).sort("_id", 1)
    assert ids(found) == [1, 2, 4, 6]


def test_legacy_shapes_are_planar(coll):
    coll.insert_many(
        [
            {"_id": 1, "p": [0, 0]},
            {"_id": 2, "p": [5, 5]},
            {"_id": 3, "p": {"x": 9, "y": 9}},
            {"_id": 4, "p": {"type": "Point", "coordinates": [1, 1]}},
        ]
    )
    box = coll.find({"p": {"$geoWithin": {"$box": [[0, 0], [5, 5]]}}}).sort("_id", 1)
    assert ids(box) == [1, 2, 4]
    circle = coll.find({"p": {"$geoWithin": {"$center": [[0, 0], math.sqrt(2)]}}})
    assert sorted(ids(circle)) == [1, 4]
    polygon = {"$polygon": [[0, 0], [10, 0], [10, 10], [0, 10]]}
    assert sorted(ids(coll.find({"p": {"$geoWithin": polygon}}))) == [1, 2, 3, 4]


def test_near_orders_by_distance_within_bounds(places):
    paris = {"type": "Point", "coordinates": [2.35, 48.85]}
    nearest = places.find({"loc": {"$near": {"$geometry": paris}}})
    assert ids(nearest) == [1, 6, 4, 2, 3]
    within = places.find({"loc": {"$near": {"$geometry": paris, "$maxDistance": 400_000}}})
    assert ids(within) == [1, 6, 4, 2]
    beyond = places.find({"loc": {"$near": {"$geometry": paris, "$minDistance": 10_000}}})
    assert ids(beyond) == [2, 3]


def test_geo_near_stage_reports_distances(places):
    results = list(
        places.aggregate(
            [
                {
                    "$geoNear": {
                        "near": {"type": "Point", "coordinates": [0, 0]},
                        "distanceField": "dist.m",
                        "includeLocs": "at",
                        "query": {"name": {"$in": ["paris", "lyon"]}},
                    }
                },
                {"$addFields": {"again": {"$meta": "geoNearDistance"}}},
            ]
        )
    )
    assert ids(results) == [2, 1]
    lyon = results[0]
    assert lyon["at"] == PLACES[1]["loc"]
    assert lyon["dist"]["m"] == lyon["again"]
    # MongoDB's Earth: a sphere of 6,378,100 m.
    lng, lat = (math.radians(v) for v in (4.84, 45.76))
    expected = EARTH_RADIUS_METERS * math.acos(math.cos(lat) * math.cos(lng))
    assert lyon["dist"]["m"] == pytest.approx(expected, rel=1e-9)


def test_geo_near_decodes_only_what_later_stages_read(places):
    # The scan under the stage decodes the key, the query's fields and what the stages
    # after it read; the answers are those of whole documents.
    paris = {"type": "Point", "coordinates": [2.35, 48.85]}
    results = list(
        places.aggregate(
            [
                {
                    "$geoNear": {
                        "near": paris,
                        "key": "loc",
                        "query": {"_id": {"$ne": 3}},
                        "distanceField": "d",
                    }
                },
                {"$limit": 3},
                {"$project": {"_id": 0, "name": 1, "d": 1}},
            ]
        )
    )
    assert [r["name"] for r in results] == ["paris", "seine segment", "legacy pair in paris"]
    assert all(sorted(r) == ["d", "name"] for r in results)
    assert results[0]["d"] == 0
    grouped = list(
        places.aggregate(
            [
                {"$geoNear": {"near": paris, "key": "loc", "distanceField": "d"}},
                {"$group": {"_id": None, "names": {"$push": "$name"}, "far": {"$max": "$d"}}},
            ]
        )
    )
    assert grouped[0]["names"] == [
        "paris",
        "seine segment",
        "legacy pair in paris",
        "lyon",
        "berlin",
    ]
    assert grouped[0]["far"] > 800_000


def test_legacy_near_sphere_measures_radians_and_2d_the_plane(coll):
    coll.create_index([("p", GEO2D)])
    coll.insert_many([{"_id": 1, "p": [3, 4]}, {"_id": 2, "p": [1, 0]}])
    flat = list(coll.aggregate([{"$geoNear": {"near": [0, 0], "distanceField": "d"}}]))
    assert [(d["_id"], d["d"]) for d in flat] == [(2, 1.0), (1, 5.0)]
    sphere = list(
        coll.aggregate([{"$geoNear": {"near": [0, 0], "distanceField": "d", "spherical": True}}])
    )
    assert sphere[0]["d"] == pytest.approx(math.radians(1), rel=1e-12)


def test_indexes_refuse_what_they_cannot_hold(coll, db):
    coll.create_index([("loc", GEOSPHERE)])
    with raises_code("Location16755"):
        coll.insert_one({"loc": {"type": "Point", "coordinates": [181, 0]}})
    with raises_code("Location16755"):
        coll.insert_one({"loc": "somewhere"})
    bowtie = {"type": "Polygon", "coordinates": [[[0, 0], [2, 2], [2, 0], [0, 2], [0, 0]]]}
    with raises_code("Location16755"):
        coll.insert_one({"loc": bowtie})
    coll.insert_one({"_id": "no location"})
    flat = db["flat"]
    flat.create_index([("p", GEO2D)], min=-10, max=10)
    with raises_code("Location13027"):
        flat.insert_one({"p": [20, 0]})
    db["bad"].insert_one({"loc": "nowhere"})
    with raises_code("Location16755"):
        db["bad"].create_index([("loc", GEOSPHERE)])


def test_index_options_are_checked(coll):
    with raises_code("CannotCreateIndex"):
        coll.create_index([("loc", GEOSPHERE)], **{"2dsphereIndexVersion": 4})
    with raises_code("InvalidOptions"):
        coll.create_index([("loc", GEO2D)], bits=0)
    coll.create_index([("loc", GEOSPHERE)])
    spec = next(i for i in coll.list_indexes() if i["name"] == "loc_2dsphere")
    assert spec["2dsphereIndexVersion"] == 3


def test_distance_queries_need_a_fitting_index(coll):
    coll.insert_one({"loc": [0, 0]})
    point = {"$geometry": {"type": "Point", "coordinates": [0, 0]}}
    with raises_code("NoQueryExecutionPlans"):
        coll.find_one({"loc": {"$near": point}})
    with raises_code("IndexNotFound"):
        list(coll.aggregate([{"$geoNear": {"near": [0, 0], "distanceField": "d"}}]))
    coll.create_index([("loc", GEO2D)])
    # A GeoJSON point needs a 2dsphere index.
    with raises_code("NoQueryExecutionPlans"):
        coll.find_one({"loc": {"$near": point}})


def test_malformed_geo_queries_get_mongodb_errors(places):
    unclosed = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]}
    with raises_code("BadValue"):
        places.find_one({"loc": {"$geoWithin": {"$geometry": unclosed}}})
    with raises_code("BadValue"):
        places.find_one(
            {"loc": {"$geoWithin": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}}}
        )
    with raises_code("BadValue"):
        places.find_one({"$or": [{"loc": {"$near": [0, 0]}}, {"name": "x"}]})
    with raises_code("Location5626500"):
        list(places.aggregate([{"$match": {"loc": {"$near": [0, 0]}}}]))
    with raises_code("Location40603"):
        list(places.aggregate([{"$match": {}}, {"$geoNear": {"near": [0, 0]}}]))
    with raises_code("Location16895"):
        places.find_one({"loc": {"$near": [0, 0], "$maxDistance": "far"}})
    # The server and the collection are still there.
    assert places.count_documents({}) == len(PLACES)
