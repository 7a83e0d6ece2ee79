"""MongoDB's own regular expressions (PCRE2) in filters and expressions, exhaust cursors
on the wire and through pymongo, and the shell's helpers in server-side JavaScript.
"""

from __future__ import annotations

import struct
import time

import pytest
from pymongo import CursorType
from pymongo.errors import OperationFailure

import wire
from helpers import raises_code

WORDS = [
    "tmpfile",
    "data",
    "Straße",
    "ärger",
    "cost $42",
    "aba",
    "a.b",
    "axb",
    "line1\nline2",
    "AB",
]

# (pattern, options, the words it matches): PCRE2 features applications use.
REGEX_TABLE = [
    (
        "^(?!tmp)",
        "",
        {"data", "Straße", "ärger", "cost $42", "aba", "a.b", "axb", "line1\nline2", "AB"},
    ),
    ("(?<=\\$)\\d+", "", {"cost $42"}),
    ("^(a)b\\1$", "", {"aba"}),
    ("^a++b", "", {"aba"}),
    ("\\Qa.b\\E", "", {"a.b"}),
    ("^\\p{Lu}", "", {"Straße", "AB"}),
    ("^\\p{Ll}\\w+$", "", {"tmpfile", "data", "ärger", "aba", "axb"}),
    ("^ab$", "i", {"AB"}),
    ("(?i)^ab$", "", {"AB"}),
    ("^line2", "m", {"line1\nline2"}),
    ("line1.line2", "s", {"line1\nline2"}),
    ("a \\. b  # a dot", "x", {"a.b"}),
    ("^.{6}$", "u", {"Straße"}),
    ("^(?<first>a)(?P=first)?b", "", {"aba"}),
    # As mongod: \w, \d, \s are ASCII unless the pattern asks for Unicode properties.
    ("^\\w+$", "", {"tmpfile", "data", "aba", "axb", "AB"}),
    ("(*UCP)^\\w+$", "", {"tmpfile", "data", "Straße", "ärger", "aba", "axb", "AB"}),
]


@pytest.mark.parametrize(
    ("pattern", "options", "expected"), REGEX_TABLE, ids=[p for p, _, _ in REGEX_TABLE]
)
def test_pcre2_patterns_match_as_in_mongodb(coll, pattern, options, expected):
    coll.insert_many([{"w": w} for w in WORDS])
    found = {d["w"] for d in coll.find({"w": {"$regex": pattern, "$options": options}})}
    assert found == expected
    # The same pattern as a BSON regex in $in, and in $regexMatch.
    import bson

    in_found = {d["w"] for d in coll.find({"w": {"$in": [bson.Regex(pattern, options)]}})}
    assert in_found == expected
    expr = {"$regexMatch": {"input": "$w", "regex": pattern, "options": options}}
    assert {d["w"] for d in coll.find({"$expr": expr})} == expected


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(", "missing closing parenthesis"),
        ("(?<=a+)b", "lookbehind assertion is not limited"),
        ("a{2,1}", "numbers out of order"),
        ("\\p{Nope}", "unknown property"),
    ],
)
def test_invalid_patterns_get_mongodbs_errors(coll, pattern, message):
    coll.insert_one({"w": "x"})
    with pytest.raises(OperationFailure) as failure:
        list(coll.find({"w": {"$regex": pattern}}))
    assert failure.value.code == 51091
    assert failure.value.details["errmsg"].startswith("Regular expression is invalid: ")
    assert message in failure.value.details["errmsg"]
    with pytest.raises(OperationFailure) as failure:
        list(
            coll.aggregate([{"$project": {"m": {"$regexFind": {"input": "$w", "regex": pattern}}}}])
        )
    assert failure.value.code == 51111
    with pytest.raises(OperationFailure) as failure:
        list(coll.find({"w": {"$regex": "x", "$options": "g"}}))
    assert failure.value.code == 51108


def test_a_catastrophic_pattern_is_stopped_by_pcre2s_match_limit(coll):
    coll.insert_one({"w": "a" * 40 + "b"})
    started = time.monotonic()
    with pytest.raises(OperationFailure) as failure:
        list(coll.find({"w": {"$regex": "^(a|aa)+$"}}))
    assert failure.value.code == 51156
    with pytest.raises(OperationFailure) as failure:
        list(
            coll.aggregate(
                [{"$match": {"$expr": {"$regexMatch": {"input": "$w", "regex": "^(a|aa)+$"}}}}]
            )
        )
    assert failure.value.code == 51156
    assert time.monotonic() - started < 10
    assert coll.count_documents({}) == 1


def test_regex_find_all_reports_groups_and_code_point_positions(coll):
    coll.insert_one({"s": "é1 b22 c"})
    result = coll.aggregate(
        [{"$project": {"_id": 0, "m": {"$regexFindAll": {"input": "$s", "regex": "(\\d)(\\d)?"}}}}]
    ).next()
    assert result["m"] == [
        {"match": "1", "idx": 1, "captures": ["1", None]},
        {"match": "22", "idx": 4, "captures": ["2", "2"]},
    ]
    empty = coll.aggregate(
        [{"$project": {"_id": 0, "m": {"$regexFindAll": {"input": "ab", "regex": ""}}}}]
    ).next()
    # An empty pattern matches at each code point, not past the end, as in mongod.
    assert [m["idx"] for m in empty["m"]] == [0, 1]


def _read_batch(conn) -> tuple[int, int, int, dict]:
    header = conn._read_exact(wire.HEADER.size)
    length, request_id, response_to, _opcode = wire.HEADER.unpack(header)
    payload = conn._read_exact(length - wire.HEADER.size)
    import bson

    flags = struct.unpack_from("<I", payload)[0]
    return request_id, response_to, flags, bson.decode(payload[5:])


def test_an_exhaust_get_more_streams_every_batch(server, coll):
    """getMore with exhaustAllowed: mongod answers with moreToCome and sends each next
    batch on its own, each answering the last, until the cursor is exhausted."""
    coll.insert_many([{"_id": i} for i in range(25)])
    exhaust_allowed, more_to_come = 1 << 16, 1 << 1
    db = coll.database.name
    with wire.RawConnection(server.port) as conn:
        first = conn.command({"find": "c", "batchSize": 5, "$db": db}).doc
        cursor_id = first["cursor"]["id"]
        message = wire.op_msg(
            {"getMore": cursor_id, "collection": "c", "batchSize": 5, "$db": db},
            flags=exhaust_allowed,
        )
        answering = wire.HEADER.unpack_from(message)[1]
        conn.send(message)
        seen = [d["_id"] for d in first["cursor"]["firstBatch"]]
        replies = 0
        while True:
            request_id, response_to, flags, reply = _read_batch(conn)
            replies += 1
            assert response_to == answering, "each reply answers the one before"
            answering = request_id
            seen += [d["_id"] for d in reply["cursor"]["nextBatch"]]
            if reply["cursor"]["id"] == 0:
                assert not flags & more_to_come, "the last batch ends the stream"
                break
            assert flags & more_to_come
        assert replies == 4
        assert seen == list(range(25))
        # The connection serves the next request as usual.
        assert conn.command({"ping": 1, "$db": "admin"}).doc["ok"] == 1.0


def test_pymongo_exhaust_cursors_read_everything(coll):
    coll.insert_many([{"_id": i, "x": "y" * 100} for i in range(1000)])
    cursor = coll.find({}, cursor_type=CursorType.EXHAUST, batch_size=64).sort("_id", 1)
    assert [d["_id"] for d in cursor] == list(range(1000))
    raw = coll.find_raw_batches({}, cursor_type=CursorType.EXHAUST, batch_size=100)
    assert sum(1 for _ in raw) >= 10


def where(coll, code, **kwargs):
    return [d["_id"] for d in coll.find({"$where": code}, **kwargs)]


@pytest.mark.parametrize(
    "code",
    [
        "return hex_md5('abc') === '900150983cd24fb0d6963f7d28e17f72'",
        "return bsonsize({}) === 5 && Object.bsonsize({a: 1}) === 16 && bsonsize(this) > 5",
        "return tojson({a: [1, 'x'], d: new Date(0)}) === "
        '\'{ "a" : [ 1, "x" ], "d" : ISODate("1970-01-01T00:00:00.000Z") }\'',
        "return tojson(NumberLong(5)) === 'NumberLong(5)' && tojson(ObjectId('000000000000000000000000'))"
        " === 'ObjectId(\"000000000000000000000000\")'",
        "var u = UUID('0123456789abcdef0123456789abcdef'); return u.type === 4 && u.base64() === 'ASNFZ4mrze8BI0VniavN7w=='",
        "return HexData(0, 'ff00').base64() === '/wA=' && DBRef('c', 1).$ref === 'c'",
        "return ISODate('2020-01-01').getTime() === 1577836800000 && NumberDecimal('1.5').toString()"
        " === 'NumberDecimal(\"1.5\")' && Timestamp(1, 2).getInc() === 2",
        "return MinKey().tojson() === 'MinKey' && MaxKey().tojson() === 'MaxKey' && BinData(0, 'AA==').subtype() === 0",
        "return Array.sum([1, 2, 3]) === 6 && Array.avg([2, 4]) === 3",
        "print('from where', this._id); printjson({a: 1}); return true",
    ],
)
def test_shell_helpers_in_where(coll, code):
    coll.insert_one({"_id": 1})
    assert where(coll, code) == [1]


def test_print_goes_to_the_log(start_server):
    # Not --quiet: print logs at mongod's default verbosity.
    server = start_server(quiet=False)
    coll = server.client().test.c
    coll.insert_one({"_id": 1})
    assert where(coll, "print('a line from JavaScript', 42); return true") == [1]
    assert "a line from JavaScript 42" in server.log_text()


def test_sleep_waits_and_counts_against_max_time_ms(coll):
    coll.insert_many([{"_id": i} for i in range(3)])
    started = time.monotonic()
    assert where(coll, "sleep(100); return this._id === 0") == [0]
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    with raises_code("MaxTimeMSExpired"):
        where(coll, "sleep(5000); return true", max_time_ms=300)
    assert time.monotonic() - started < 3
    # mapReduce's functions have the helpers too.
    reply = coll.database.command(
        "mapReduce",
        "c",
        map="function () { sleep(1); emit(this._id % 2, NumberInt(1)); }",
        reduce="function (key, values) { return Array.sum(values); }",
        out={"inline": 1},
    )
    assert sorted((r["_id"], r["value"]) for r in reply["results"]) == [(0, 2), (1, 1)]


def test_list_indexes_echoes_the_options_an_index_was_created_with(coll):
    coll.create_index("a", name="a_bg", background=True)
    coll.create_index("b", storageEngine={"wiredTiger": {"configString": ""}})
    coll.create_index("c", v=1)
    coll.create_index("d", dropDups=True)
    coll.create_index("e", hidden=True)
    listed = {ix["name"]: dict(ix) for ix in coll.list_indexes()}
    assert listed["a_bg"]["background"] is True
    assert listed["b_1"]["storageEngine"] == {"wiredTiger": {"configString": ""}}
    assert listed["c_1"]["v"] == 1 and listed["a_bg"]["v"] == 2
    assert "dropDups" not in listed["d_1"]
    assert listed["e_1"]["hidden"] is True
    with pytest.raises(OperationFailure):
        coll.create_index("f", v=3)


def test_a_hidden_index_is_maintained_but_not_planned(coll):
    coll.insert_many([{"_id": i, "e": i % 10} for i in range(100)])
    coll.create_index("e", hidden=True)

    def winning_stage():
        plan = coll.find({"e": 3}).explain()["queryPlanner"]["winningPlan"]
        return plan.get("inputStage", plan)["stage"]

    assert winning_stage() == "COLLSCAN"
    reply = coll.database.command("collMod", "c", index={"name": "e_1", "hidden": False})
    assert (reply["hidden_old"], reply["hidden_new"]) == (True, False)
    assert winning_stage() == "IXSCAN"
    assert coll.count_documents({"e": 3}) == 10
    coll.database.command("collMod", "c", index={"keyPattern": {"e": 1}, "hidden": True})
    assert winning_stage() == "COLLSCAN"
    with raises_code("BadValue"):
        coll.database.command("collMod", "c", index={"name": "_id_", "hidden": True})
