//! Stages that emit many documents from one, or gather many into one, take time linear in
//! what they handle: `$unwind` of long arrays, `$lookup` with many matches, `$facet`,
//! `$setWindowFields` with `$push` over a sliding window, `$group` with `$push`,
//! `$graphLookup` down a long chain; and the array update operators on large arrays
//! (`$push` with `$each`/`$position`, `$addToSet` with `$each`, `$pullAll`), which share
//! this harness. Each is timed at a size and at four times that size;
//! linear work gives a ratio near 4 and quadratic work 16, so the ratio is checked, not a
//! wall-clock bound, and a slow or busy machine does not fail it.

use crate::pipeline::{Collections, NoCollections, Pipeline};
use crate::testing::MemoryCollections;
use bson::{doc, Bson, Document};
use std::time::{Duration, Instant};

/// Growth of the input between the two timed runs.
const GROWTH: usize = 4;
/// The most the time may grow by: linear is 4, quadratic 16.
const RATIO_MAX: f64 = 9.0;

/// The best of three timings of `work(n)`, which must return how many documents it made
/// (so the work cannot be optimised away and its size is checked).
fn best_time(n: usize, work: &dyn Fn(usize) -> usize) -> Duration {
    (0..3)
        .map(|_| {
            let start = Instant::now();
            let made = work(n);
            let took = start.elapsed();
            assert!(made > 0, "the work at size {n} made nothing");
            took
        })
        .min()
        .expect("three runs")
}

/// The timed runs take turns, so tests running in parallel do not time each other.
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn assert_linear(what: &str, n: usize, work: impl Fn(usize) -> usize) {
    let _turn = TIMING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let small = best_time(n, &work);
    let large = best_time(n * GROWTH, &work);
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
    assert!(
        ratio < RATIO_MAX,
        "{what}: {small:?} at {n}, {large:?} at {}: time grew {ratio:.1}x for {GROWTH}x the input",
        n * GROWTH
    );
}

fn run(stages: Vec<Document>, input: Vec<Document>, collections: &dyn Collections) -> usize {
    let pipeline = Pipeline::parse(&stages, None).expect("a valid pipeline");
    pipeline
        .stream(Box::new(input.into_iter().map(Ok)), collections)
        .collect::<basalt_error::Result<Vec<_>>>()
        .expect("the pipeline runs")
        .len()
}

#[test]
fn unwind_of_a_long_array() {
    assert_linear("$unwind", 20_000, |n| {
        let input = vec![doc! {
            "_id": 1, "pad": "x".repeat(200),
            "arr": (0..n as i32).map(Bson::Int32).collect::<Vec<_>>(),
        }];
        let made = run(vec![doc! {"$unwind": "$arr"}], input, &NoCollections);
        assert_eq!(made, n);
        made
    });
}

#[test]
fn lookup_with_many_matches() {
    assert_linear("$lookup", 5_000, |n| {
        let collections = MemoryCollections::new("db");
        let foreign = (0..n as i32).map(|i| doc! {"_id": i, "k": 1}).collect();
        collections.put("db", "foreign", foreign);
        let input = (0..4).map(|i| doc! {"_id": i, "k": 1}).collect();
        let stages = vec![
            doc! {"$lookup": {"from": "foreign", "localField": "k", "foreignField": "k", "as": "m"}},
            doc! {"$unwind": "$m"},
        ];
        let made = run(stages, input, &collections);
        assert_eq!(made, 4 * n);
        made
    });
}

#[test]
fn facet_over_many_documents() {
    assert_linear("$facet", 5_000, |n| {
        let input = (0..n as i32).map(|i| doc! {"_id": i, "k": i % 7}).collect();
        let stages = vec![
            doc! {"$facet": {
                "all": [{"$project": {"k": 1}}],
                "counts": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}],
            }},
            doc! {"$unwind": "$all"},
        ];
        let made = run(stages, input, &NoCollections);
        assert_eq!(made, n);
        made
    });
}

#[test]
fn push_over_a_sliding_window() {
    assert_linear("$setWindowFields $push", 4_000, |n| {
        let input = (0..n as i32).map(|i| doc! {"_id": i, "v": i}).collect();
        let stages = vec![doc! {"$setWindowFields": {
            "sortBy": {"_id": 1},
            "output": {
                "near": {"$push": "$v", "window": {"documents": [-20, 20]}},
                "set": {"$addToSet": {"$mod": ["$v", 3]}, "window": {"documents": ["unbounded", "current"]}},
                "sum": {"$sum": "$v", "window": {"documents": [-20, 20]}},
            },
        }}];
        run(stages, input, &NoCollections)
    });
}

#[test]
fn group_pushing_every_value() {
    assert_linear("$group $push", 20_000, |n| {
        let input = (0..n as i32).map(|i| doc! {"_id": i, "k": i % 3}).collect();
        let stages = vec![
            doc! {"$group": {"_id": "$k", "all": {"$push": "$_id"}, "set": {"$addToSet": "$_id"}}},
            doc! {"$project": {"all": 1, "distinct": {"$size": "$set"}}},
            doc! {"$unwind": "$all"},
        ];
        run(stages, input, &NoCollections)
    });
}

#[test]
fn graph_lookup_down_a_long_chain() {
    assert_linear("$graphLookup", 2_000, |n| {
        let collections = MemoryCollections::new("db");
        let chain = (0..n as i32)
            .map(|i| doc! {"_id": i, "next": i + 1})
            .collect();
        collections.put("db", "chain", chain);
        let stages = vec![
            doc! {"$graphLookup": {
                "from": "chain", "startWith": 0, "connectFromField": "next",
                "connectToField": "_id", "as": "reached",
            }},
            doc! {"$unwind": "$reached"},
        ];
        let made = run(stages, vec![doc! {"_id": "start"}], &collections);
        assert_eq!(made, n);
        made
    });
}

/// Applies `update` to a document whose `arr` holds `n` numbers; returns its new length.
fn update_array(n: usize, update: Document) -> usize {
    let mut doc = doc! {"_id": 1, "arr": (0..n as i32).map(Bson::Int32).collect::<Vec<_>>()};
    let spec = basalt_query::UpdateSpec::parse(&update, None).expect("a valid update");
    spec.apply(&mut doc, &basalt_query::UpdateContext::new())
        .expect("the update applies");
    doc.get_array("arr").expect("still an array").len()
}

#[test]
fn array_update_operators_on_large_arrays() {
    let evens = |n: usize| {
        (0..n as i32)
            .map(|i| Bson::Int32(i * 2))
            .collect::<Vec<_>>()
    };
    assert_linear("$push $each $position", 20_000, |n| {
        update_array(
            n,
            doc! {"$push": {"arr": {"$each": evens(n), "$position": 1}}},
        )
    });
    assert_linear("$addToSet $each", 20_000, |n| {
        update_array(n, doc! {"$addToSet": {"arr": {"$each": evens(n)}}})
    });
    assert_linear("$pullAll", 20_000, |n| {
        update_array(n, doc! {"$pullAll": {"arr": evens(n)}})
    });
}
