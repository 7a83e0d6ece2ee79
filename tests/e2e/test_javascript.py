"""Server-side JavaScript through pymongo: $where, mapReduce, $function, the shell types a
script sees and returns, and the limits that stop a runaway or greedy script."""

from __future__ import annotations

import datetime

import pytest
from bson import Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from pymongo.errors import ExecutionTimeout, OperationFailure

from basalt_server import BasaltServer


def count_where(coll, query):
    """Counts with the `count` command: pymongo's count_documents runs an aggregation,
    and MongoDB refuses `$where` inside `$match` (16395), so `$where` needs find/count."""
    return coll.database.command("count", coll.name, query=query)["n"]


def test_where_is_refused_in_an_aggregation_match(coll):
    coll.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as refused:
        coll.count_documents({"$where": "this.a == 1"})
    assert refused.value.code == 16395


def test_where_string_and_function_see_this_and_obj(coll):
    coll.insert_many([{"_id": i, "a": i, "b": 3} for i in range(6)])
    assert [d["_id"] for d in coll.find({"$where": "this.a > this.b"})] == [4, 5]
    assert [d["_id"] for d in coll.find({"$where": Code("function () { return obj.a < 2; }")})] == [
        0,
        1,
    ]
    assert count_where(coll, {"$where": "var d = this.a - this.b; return d == 0"}) == 1


def test_where_combined_with_other_conditions_runs_js_only_on_candidates(coll):
    coll.create_index("b")
    coll.insert_many([{"_id": i, "a": i % 10, "b": i} for i in range(100)])
    # The JS would throw on any document the index part did not select.
    where = "if (this.b >= 5) throw new Error('saw ' + this.b); return this.a > this.b - 1"
    assert count_where(coll, {"b": {"$lt": 5}, "$where": where}) == 5
    plan = coll.find({"b": {"$lt": 5}, "$where": "true"}).explain()
    assert "IXSCAN" in str(plan)


def test_where_scope_and_stored_functions(db, coll):
    coll.insert_many([{"_id": 1, "a": 5}, {"_id": 2, "a": 7}])
    found = coll.find({"$where": Code("this.a == wanted", {"wanted": 7})})
    assert [d["_id"] for d in found] == [2]
    db["system.js"].insert_many(
        [
            {"_id": "isBig", "value": Code("function (x) { return x > limit; }")},
            {"_id": "limit", "value": 6},
        ]
    )
    assert [d["_id"] for d in coll.find({"$where": "isBig(this.a)"})] == [2]
    # A scope variable shadows the stored global of the same name.
    shadowed = coll.find({"$where": Code("this.a > limit", {"limit": 0})})
    assert [d["_id"] for d in shadowed] == [1, 2]
    # The next command sees what system.js holds now.
    db["system.js"].update_one({"_id": "limit"}, {"$set": {"value": 1}})
    assert count_where(coll, {"$where": "isBig(this.a)"}) == 2
    db["system.js"].delete_many({})
    with pytest.raises(OperationFailure) as e:
        list(coll.find({"$where": "isBig(this.a)"}))
    assert e.value.code == 139
    assert "isBig is not defined" in str(e.value)


def test_stored_functions_that_do_not_load(db, coll):
    coll.insert_one({"_id": 1, "a": 5})
    # As in mongod, a stored value that does not compile is left out (and logged).
    db["system.js"].insert_one({"_id": "broken", "value": Code("function ( {")})
    assert count_where(coll, {"$where": "typeof broken == 'undefined'"}) == 1
    db["system.js"].insert_one({"_id": 7, "value": Code("function () {}")})
    with pytest.raises(OperationFailure) as e:
        list(coll.find({"$where": "true"}))
    assert e.value.code == 10209
    assert "name has to be a string" in str(e.value)
    db["system.js"].delete_one({"_id": 7})
    db["system.js"].insert_one({"_id": "novalue"})
    with pytest.raises(OperationFailure) as e:
        list(coll.find({"$where": "true"}))
    assert e.value.code == 10210


def test_where_error_is_js_interpreter_failure(coll):
    coll.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as e:
        list(coll.find({"$where": "this.a.b.c > 1"}))
    assert e.value.code == 139
    assert "TypeError" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        list(coll.find({"$where": "function ( {"}))
    assert e.value.code == 139
    assert "SyntaxError" in str(e.value)


def test_where_is_refused_on_a_field(coll):
    with pytest.raises(OperationFailure) as e:
        list(coll.find({"a": {"$where": "true"}}))
    assert e.value.code == 2


def test_runaway_loop_is_stopped_and_the_server_goes_on(client, coll):
    coll.insert_one({"a": 1})
    with pytest.raises((ExecutionTimeout, OperationFailure)) as e:
        list(coll.find({"$where": "while (true) {} return true"}).max_time_ms(300))
    assert e.value.code == 50
    other = client.get_database("admin").command("ping")
    assert other["ok"] == 1
    assert count_where(coll, {"$where": "this.a == 1"}) == 1


def test_memory_bomb_is_stopped_by_the_cap(coll):
    coll.insert_one({"a": 1})
    bomb = "var a = []; while (true) { a.push(new Array(100000).fill(1)); }"
    with pytest.raises(OperationFailure) as e:
        list(coll.find({"$where": bomb}))
    assert e.value.code == 139
    assert "Out of memory" in str(e.value)
    assert count_where(coll, {"$where": "true"}) == 1


TYPED = {
    "_id": ObjectId("5f0c9a8e9b1e8b3a4c2d1e0f"),
    "long": Int64(1 << 60),
    "small_long": Int64(7),
    "int": 5,
    "double": 2.5,
    "dec": Decimal128("1.10"),
    "date": datetime.datetime(2020, 1, 2, 3, 4, 5, 678000),
    "bin": Binary(b"\x00\x01\x02", 0),
    "ts": Timestamp(1600000000, 7),
    "re": Regex("^ab", "i"),
    "min": MinKey(),
    "max": MaxKey(),
    "null": None,
    "arr": [1, "x", {"y": True}],
}


def test_shell_types_round_trip_through_function(coll):
    coll.insert_one(TYPED)
    out = coll.aggregate(
        [
            {
                "$project": {
                    "_id": 0,
                    "copy": {
                        "$function": {
                            "body": "function (d) { return d; }",
                            "args": ["$$ROOT"],
                            "lang": "js",
                        }
                    },
                    "kinds": {
                        "$function": {
                            "body": """function (d) {
                                return [d._id instanceof ObjectId, d.long instanceof NumberLong,
                                        d.dec instanceof NumberDecimal, d.date instanceof Date,
                                        d.bin instanceof BinData, d.ts instanceof Timestamp,
                                        d.re instanceof RegExp, d.min === MinKey(), typeof d.int,
                                        d.null === null, d.missing === undefined].join(',');
                            }""",
                            "args": ["$$ROOT"],
                            "lang": "js",
                        }
                    },
                }
            }
        ]
    ).next()
    copy = out["copy"]
    assert copy["_id"] == TYPED["_id"]
    assert copy["long"] == TYPED["long"] and isinstance(copy["long"], Int64)
    assert copy["small_long"] == 7 and isinstance(copy["small_long"], Int64)
    assert copy["dec"] == TYPED["dec"]
    assert copy["date"] == TYPED["date"]
    assert copy["bin"] == b"\x00\x01\x02"  # pymongo reads subtype 0 as bytes
    assert copy["ts"] == TYPED["ts"]
    assert copy["re"].pattern == "^ab" and copy["re"].flags
    assert isinstance(copy["min"], MinKey) and isinstance(copy["max"], MaxKey)
    assert copy["null"] is None
    assert copy["arr"] == [1.0, "x", {"y": True}]
    # As in mongod, a plain JS number comes back a double.
    assert isinstance(copy["int"], float)
    assert out["kinds"] == "true,true,true,true,true,true,true,true,number,true,true"


def test_shell_constructors_make_typed_values(coll):
    coll.insert_one({"_id": 1})
    body = """function () {
        return {l: NumberLong("9007199254740993"), i: NumberInt(3), d: NumberDecimal("0.1"),
                o: ObjectId("5f0c9a8e9b1e8b3a4c2d1e0f"), t: ISODate("2021-05-06T00:00:00Z")};
    }"""
    out = coll.aggregate(
        [{"$project": {"v": {"$function": {"body": body, "args": [], "lang": "js"}}}}]
    ).next()["v"]
    assert out["l"] == Int64(9007199254740993) and isinstance(out["l"], Int64)
    assert out["i"] == 3 and isinstance(out["i"], int) and not isinstance(out["i"], Int64)
    assert out["d"] == Decimal128("0.1")
    assert out["o"] == ObjectId("5f0c9a8e9b1e8b3a4c2d1e0f")
    assert out["t"] == datetime.datetime(2021, 5, 6)


@pytest.mark.parametrize(
    ("function", "code", "message"),
    [
        (
            {"body": "function () { throw new Error('nope'); }", "args": [], "lang": "js"},
            139,
            "nope",
        ),
        ({"body": "function () {}", "args": [], "lang": "python"}, 31419, ""),
    ],
)
def test_function_errors(coll, function, code, message):
    coll.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$project": {"v": {"$function": function}}}]))
    assert e.value.code == code
    assert message in str(e.value)


MAP = Code("function () { emit(this.k, {count: 1, sum: this.v, min: this.v, max: this.v}); }")
REDUCE = Code(
    """function (key, values) {
        var r = {count: 0, sum: 0, min: Infinity, max: -Infinity};
        values.forEach(function (v) {
            r.count += v.count; r.sum += v.sum;
            r.min = Math.min(r.min, v.min); r.max = Math.max(r.max, v.max);
        });
        return r;
    }"""
)


def _seed(coll, n=3000):
    coll.insert_many([{"_id": i, "k": i % 3, "v": i} for i in range(n)])


def test_map_reduce_inline_with_rereduce_and_counts(db, coll):
    _seed(coll)
    reply = db.command("mapReduce", "c", map=MAP, reduce=REDUCE, out={"inline": 1})
    assert reply["ok"] == 1
    results = reply["results"]
    assert [r["_id"] for r in results] == [0.0, 1.0, 2.0]
    first = results[0]["value"]
    assert first == {
        "count": 1000.0,
        "sum": float(sum(range(0, 3000, 3))),
        "min": 0.0,
        "max": 2997.0,
    }
    assert reply["counts"]["input"] == 3000
    assert reply["counts"]["emit"] == 3000
    assert reply["counts"]["output"] == 3
    assert reply["counts"]["reduce"] >= 3
    assert "timeMillis" in reply


def test_map_reduce_query_sort_limit_scope_finalize(db, coll):
    _seed(coll, 100)
    reply = db.command(
        "mapReduce",
        "c",
        map=Code("function () { emit('all', this.v * factor); }"),
        reduce=Code("function (k, vs) { return Array.sum(vs); }"),
        finalize=Code("function (k, v) { return {total: v, tag: tag}; }"),
        query={"k": 1},
        sort={"v": -1},
        limit=2,
        scope={"factor": 10, "tag": "x"},
        jsMode=True,
        out={"inline": 1},
    )
    # The two largest v with k == 1: 97 and 94.
    assert reply["results"] == [{"_id": "all", "value": {"total": 1910.0, "tag": "x"}}]
    assert reply["counts"]["input"] == 2


def test_map_reduce_output_modes(client, db, coll):
    _seed(coll, 30)
    count_map = Code("function () { emit(this.k, 1); }")
    count_reduce = Code("function (k, vs) { return Array.sum(vs); }")
    reply = db.command("mapReduce", "c", map=count_map, reduce=count_reduce, out="out")
    assert reply["result"] == "out"
    assert list(db.out.find().sort("_id")) == [{"_id": k, "value": 10.0} for k in (0.0, 1.0, 2.0)]

    db.out.insert_one({"_id": 9.0, "value": 1.0})
    db.command("mapReduce", "c", map=count_map, reduce=count_reduce, out={"merge": "out"})
    assert db.out.count_documents({}) == 4
    assert db.out.find_one({"_id": 0.0})["value"] == 10.0

    db.command("mapReduce", "c", map=count_map, reduce=count_reduce, out={"reduce": "out"})
    assert db.out.find_one({"_id": 0.0})["value"] == 20.0
    assert db.out.find_one({"_id": 9.0})["value"] == 1.0

    db.command("mapReduce", "c", map=count_map, reduce=count_reduce, out={"replace": "out"})
    assert db.out.count_documents({}) == 3

    other = db.name + "_other"
    try:
        reply = db.command(
            "mapReduce", "c", map=count_map, reduce=count_reduce, out={"replace": "x", "db": other}
        )
        assert reply["result"] == {"db": other, "collection": "x"}
        assert client[other].x.count_documents({}) == 3
    finally:
        client.drop_database(other)


def test_map_reduce_calls_stored_functions(db, coll):
    _seed(coll, 9)
    db["system.js"].insert_one({"_id": "double", "value": Code("function (x) { return 2 * x; }")})
    reply = db.command(
        "mapReduce",
        "c",
        map=Code("function () { emit(this.k, double(this.v)); }"),
        reduce=Code("function (k, vs) { return Array.sum(vs); }"),
        out={"inline": 1},
    )
    assert reply["results"][0] == {"_id": 0.0, "value": 18.0}


def test_map_reduce_stored_functions_in_reduce_and_finalize(db, coll):
    _seed(coll, 9)
    db["system.js"].insert_many(
        [
            {"_id": "total", "value": Code("function (vs) { return Array.sum(vs); }")},
            {"_id": "label", "value": Code("function (k, v) { return 'k' + k + '=' + v; }")},
        ]
    )
    reply = db.command(
        "mapReduce",
        "c",
        map=Code("function () { emit(this.k, this.v); }"),
        reduce=Code("function (k, vs) { return total(vs); }"),
        finalize=Code("function (k, v) { return label(k, v); }"),
        out={"inline": 1},
    )
    assert [r["value"] for r in reply["results"]] == ["k0=9", "k1=12", "k2=15"]


def test_map_reduce_keys_of_every_type_group_as_bson_compares_them(db, coll):
    coll.insert_many(
        [{"_id": i, "k": i % 3, "d": datetime.datetime(2020, 1, 1 + i % 2)} for i in range(300)]
    )
    reply = db.command(
        "mapReduce",
        "c",
        # 1 and NumberLong(1) are one key, as in BSON; objects and dates are keys too.
        map=Code(
            "function () { emit(this.k, 1); emit(NumberLong(this.k), 1); "
            "emit({k: this.k}, 1); emit(this.d, 1); }"
        ),
        reduce=Code("function (k, vs) { return Array.sum(vs); }"),
        out={"inline": 1},
    )
    results = reply["results"]
    assert [r["value"] for r in results] == [200.0] * 3 + [100.0] * 3 + [150.0] * 2
    assert [r["_id"] for r in results[3:6]] == [{"k": 0.0}, {"k": 1.0}, {"k": 2.0}]
    assert results[6]["_id"] == datetime.datetime(2020, 1, 1)
    assert reply["counts"]["emit"] == 1200


@pytest.mark.parametrize(
    "out, code, message",
    [
        (5, 2, "'out' must be either a string or an object"),
        ({"inline": 1, "db": "x"}, 72, "'inline' must be specified alone"),
        ({"inline": 2}, 2, "'inline' takes only numeric '1'"),
        ({}, 2, "'out' requires 'replace', 'merge' or 'reduce'"),
        ({"db": "x"}, 2, "'out' requires 'replace', 'merge' or 'reduce'"),
        ({"merge": 5}, 2, "'merge' supports only string consisting of output collection name"),
        ({"replace": "o", "db": 5}, 2, "db field value must be string"),
        ({"replace": "o", "db": "admin"}, 115, "cannot target internal database as output"),
        ({"replace": "o", "sharded": 1}, 2, "sharded field value must be boolean"),
        ({"replace": "o", "nonAtomic": False}, 2, "nonAtomic field value must be true"),
        ({"replace": "o", "other": 1}, 2, "'out' supports only output type with collection name"),
    ],
)
def test_map_reduce_out_errors(db, coll, out, code, message):
    _seed(coll, 3)
    with pytest.raises(OperationFailure) as e:
        db.command("mapReduce", "c", map=MAP, reduce=REDUCE, out=out)
    assert e.value.code == code
    assert message in str(e.value)


def test_map_reduce_accepts_the_deprecated_out_flags(db, coll):
    _seed(coll, 3)
    out = {"replace": "o", "sharded": True, "nonAtomic": True}
    assert db.command("mapReduce", "c", map=MAP, reduce=REDUCE, out=out)["result"] == "o"
    assert db.o.count_documents({}) == 3


@pytest.mark.parametrize(
    "fields, code, message",
    [
        ({"map": 5}, 2, "'scope' must be a string, code or 'code with scope'"),
        ({"reduce": {"f": 1}}, 2, "'scope' must be a string, code or 'code with scope'"),
        ({"map": Code("function () { emit(this.k, ; }")}, 139, "SyntaxError"),
        (
            {
                "map": Code("function () { emit(1, this.v); }"),
                "reduce": Code("function (k, vs) { return vs[0].nope.x; }"),
            },
            139,
            "TypeError",
        ),
        ({"finalize": Code("function (k, v) { throw 'no ' + k; }")}, 139, "no 0"),
        ({"map": Code("function () { emit(1); }")}, 139, "emit takes 2 args"),
        (
            {
                "map": Code(
                    "function () { var a = []; while (true) a.push(new Array(1e5).fill(1)); }"
                )
            },
            139,
            "Out of memory",
        ),
    ],
)
def test_map_reduce_script_errors(db, coll, fields, code, message):
    _seed(coll, 3)
    command = {"map": MAP, "reduce": REDUCE, "out": {"inline": 1}, **fields}
    with pytest.raises(OperationFailure) as e:
        db.command("mapReduce", "c", **command)
    assert e.value.code == code
    assert message in str(e.value)


def test_map_reduce_errors(db, coll):
    _seed(coll, 3)
    with pytest.raises(OperationFailure) as e:
        db.command(
            "mapReduce",
            "c",
            map=Code("function () { emit(this.k, undefinedThing); }"),
            reduce=REDUCE,
            out={"inline": 1},
        )
    assert e.value.code == 139
    assert "undefinedThing" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        db.command("mapReduce", "c", map=MAP, reduce=REDUCE)
    assert e.value.code == 40414
    with pytest.raises(OperationFailure) as e:
        db.command(
            "mapReduce",
            "c",
            map=Code("function () { while (true) {} }"),
            reduce=REDUCE,
            out={"inline": 1},
            maxTimeMS=200,
        )
    assert e.value.code == 50


def test_accumulator_in_group(coll):
    coll.insert_many([{"g": i % 2, "v": i} for i in range(10)])
    spec = {
        "$accumulator": {
            "init": "function () { return {count: 0, sum: 0}; }",
            "accumulate": "function (s, v) { return {count: s.count + 1, sum: s.sum + v}; }",
            "accumulateArgs": ["$v"],
            "merge": "function (a, b) { return {count: a.count + b.count, sum: a.sum + b.sum}; }",
            "finalize": "function (s) { return s.sum / s.count; }",
            "lang": "js",
        }
    }
    out = list(coll.aggregate([{"$group": {"_id": "$g", "avg": spec}}, {"$sort": {"_id": 1}}]))
    assert out == [{"_id": 0, "avg": 4.0}, {"_id": 1, "avg": 5.0}]
    spec["$accumulator"]["finalize"] = "function (s) { throw new Error('bad state'); }"
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$group": {"_id": "$g", "avg": spec}}]))
    assert e.value.code == 139
    assert "bad state" in str(e.value)


def test_scripts_run_in_sloppy_mode_and_leave_nothing_for_the_next_client(client, coll):
    coll.insert_many([{"a": 1}, {"a": 2}])
    # Old map functions assign undeclared variables; mongod allows it.
    assert (
        count_where(coll, {"$where": "seen = this.a; Array.prototype.evil = 1; return seen > 1"})
        == 1
    )
    assert count_where(coll, {"$where": "typeof seen == 'undefined' && [].evil === undefined"}) == 2


def test_noscripting_refuses_every_form_of_javascript(basalt_binary, tmp_path):
    srv = BasaltServer(
        basalt_binary, tmp_path / "data", tmp_path / "basalt.log", extra_args=["--noscripting"]
    ).start()
    try:
        db = srv.client()["t"]
        db.c.insert_one({"a": 1})
        with pytest.raises(OperationFailure) as e:
            list(db.c.find({"$where": "true"}))
        assert e.value.code == 2
        assert "no globalScriptEngine" in str(e.value)
        with pytest.raises(OperationFailure) as e:
            db.command("mapReduce", "c", map=MAP, reduce=REDUCE, out={"inline": 1})
        assert e.value.code == 31264
        function = {"$function": {"body": "function () { return 1; }", "args": [], "lang": "js"}}
        with pytest.raises(OperationFailure) as e:
            list(db.c.aggregate([{"$project": {"v": function}}]))
        assert e.value.code == 31264
        accumulator = {
            "$accumulator": {
                "init": "function () { return 0; }",
                "accumulate": "function (s) { return s + 1; }",
                "accumulateArgs": [],
                "merge": "function (a, b) { return a + b; }",
                "lang": "js",
            }
        }
        with pytest.raises(OperationFailure) as e:
            list(db.c.aggregate([{"$group": {"_id": None, "n": accumulator}}]))
        assert e.value.code == 31264
        # Everything without JavaScript still works.
        assert db.c.count_documents({"a": 1}) == 1
        assert not srv.panics()
    finally:
        srv.kill()


def test_scripts_on_scan_workers_keep_stored_functions_and_deadline(basalt_binary, tmp_path):
    """A `$where` count over a big collection runs on several scan workers; each must see
    the database's stored functions and stop at the command's maxTimeMS."""
    srv = BasaltServer(
        basalt_binary,
        tmp_path / "data",
        tmp_path / "basalt.log",
        extra_args=["--setParameter", "scanWorkers=2"],
    ).start()
    try:
        db = srv.client()["t"]
        # Enough records for several scan ranges (at least 16 384 each).
        db.c.insert_many([{"_id": i, "a": i % 10} for i in range(50_000)])
        db["system.js"].insert_one(
            {"_id": "isNine", "value": Code("function (x) { return x == 9; }")}
        )
        assert count_where(db.c, {"$where": "isNine(this.a)"}) == 5_000
        with pytest.raises(OperationFailure) as e:
            db.command("count", "c", query={"$where": "while (true) {}"}, maxTimeMS=300)
        assert e.value.code == 50
        assert not srv.panics()
    finally:
        srv.kill()
