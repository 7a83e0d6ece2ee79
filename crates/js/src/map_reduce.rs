//! The JavaScript half of `mapReduce`: calls `map` on each document with an `emit` that
//! collects key/value pairs, groups values by key, calls `reduce` on a key's values (again
//! on its earlier results, which is why MongoDB requires reduce to be re-reducible), and
//! `finalize` on each result. Reading the input and writing the output is the server's.
//!
//! Documents are mapped in batches, one visit to the sandbox each. Values under a
//! primitive key stay in the sandbox, grouped and reduced there, so the common job (a
//! few keys, many values) converts values to BSON once per key rather than once per
//! emit; the sandbox holds a bounded number of them, and hands the rest over as BSON, so
//! a job with many keys is bounded by the server's memory budget (which its groups are
//! charged to) rather than one runtime's cap.
//! Other keys (objects, dates, `NumberLong`s) are grouped here by their BSON order.

use crate::bson_conversion::engine_error;
use crate::sandbox::{check_scripting_enabled, js_failure, with_session, Script, Session};
use basalt_error::{Error, Result};
use basalt_memory::Reservation;
use basalt_value::{key_string, value_memory_bytes};
use bson::{Bson, Document};
use rquickjs::{Array, Value};
use std::collections::HashMap;

/// A key's values are reduced as soon as this many are pending.
const REDUCE_BATCH_VALUES: usize = 1000;
/// Documents mapped in one visit to the sandbox.
const MAP_BATCH_DOCS: usize = 256;
/// Values the sandbox holds, grouped by key, before it hands them over as BSON.
const JS_PENDING_VALUES_MAX: usize = 20_000;

/// What a run counted, as the reply's `counts` reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapReduceCounts {
    pub input: i64,
    pub emit: i64,
    pub reduce: i64,
    pub output: i64,
}

/// The parsed functions of one `mapReduce` command.
#[derive(Debug)]
pub struct MapReduce {
    map: Script,
    reduce: Script,
    finalize: Option<Script>,
}

struct Group {
    key: Bson,
    values: Vec<Bson>,
}

/// One `mapReduce` in progress: the values emitted so far, grouped by key. Values emitted
/// under a primitive key (a number, a string) are grouped and reduced in the sandbox and
/// reach BSON once per key; the others are grouped here.
pub struct MapReduceRun<'a> {
    job: &'a MapReduce,
    /// Documents not mapped yet: they are mapped [`MAP_BATCH_DOCS`] at a time.
    waiting: Vec<Document>,
    /// A key's group, by the key's order-preserving encoding (so 1 and 1.0 are one key).
    slots: HashMap<Vec<u8>, usize>,
    groups: Vec<Group>,
    counts: MapReduceCounts,
    encoded: Vec<u8>,
    /// The groups' share of the server's memory budget.
    memory: Reservation,
}

impl MapReduceRun<'_> {
    /// Maps one document (soon: it waits for a batch to fill).
    pub fn map(&mut self, doc: Document) -> Result<()> {
        self.counts.input += 1;
        self.waiting.push(doc);
        if self.waiting.len() >= MAP_BATCH_DOCS {
            self.map_waiting(false)?;
        }
        Ok(())
    }

    /// Calls `map` on the waiting documents and files what the sandbox hands over: the
    /// emits under other than primitive keys, and with `all` (or when it holds too many)
    /// the values of its groups.
    fn map_waiting(&mut self, all: bool) -> Result<()> {
        let MapReduceRun {
            job,
            waiting,
            slots,
            groups,
            counts,
            encoded,
            memory,
        } = self;
        with_session(|session| {
            let map = session.compile(&job.map)?;
            let emits = session.emits(&job.map)?;
            let reduce = session.compile(&job.reduce)?;
            emits
                .group
                .call::<_, ()>((reduce.function, REDUCE_BATCH_VALUES, JS_PENDING_VALUES_MAX))
                .map_err(|e| session.failure(e))?;
            for doc in waiting.drain(..) {
                let this = job.map.document_to_js(session, &doc)?.into_value();
                session.call(&map, this, Vec::new())?;
            }
            let drained: Array = emits.drain.call((all,)).map_err(|e| session.failure(e))?;
            let emitted: Array = drained.get(0).map_err(engine_error)?;
            counts.reduce += drained.get::<i64>(1).map_err(engine_error)?;
            counts.emit += drained.get::<i64>(2).map_err(engine_error)?;
            let mut pairs = emitted.iter::<Value>();
            while let (Some(key), Some(value)) = (pairs.next(), pairs.next()) {
                let key = session
                    .shell
                    .to_bson(key.map_err(|e| session.failure(e))?)?;
                let value = session
                    .shell
                    .to_bson(value.map_err(|e| session.failure(e))?)?;
                encoded.clear();
                key_string::encode_value(encoded, &key, false);
                let mut held = value_memory_bytes(&value);
                let slot = match slots.get(encoded.as_slice()) {
                    Some(slot) => *slot,
                    None => {
                        held += encoded.len() + value_memory_bytes(&key);
                        slots.insert(encoded.clone(), groups.len());
                        groups.push(Group {
                            key,
                            values: Vec::new(),
                        });
                        groups.len() - 1
                    }
                };
                memory
                    .record(held)
                    .map_err(|exhausted| exhausted.to_error("mapReduce"))?;
                let group = &mut groups[slot];
                group.values.push(value);
                if group.values.len() >= REDUCE_BATCH_VALUES {
                    let reduced = job.reduce_in(session, &group.key, &group.values)?;
                    counts.reduce += 1;
                    let before: usize = group.values.iter().map(value_memory_bytes).sum();
                    memory.shrink(before.saturating_sub(value_memory_bytes(&reduced)));
                    group.values = vec![reduced];
                }
            }
            Ok(())
        })
    }

    /// Maps what is waiting and reduces what is left: one `(key, value)` per distinct
    /// key, in key order, reduced but not finalized (see [`MapReduce::finalize`]).
    pub fn finish(mut self) -> Result<(Vec<(Bson, Bson)>, MapReduceCounts)> {
        self.map_waiting(true)?;
        let MapReduceRun {
            job,
            mut groups,
            mut counts,
            ..
        } = self;
        with_session(|session| {
            for group in &mut groups {
                if group.values.len() > 1 {
                    let reduced = job.reduce_in(session, &group.key, &group.values)?;
                    counts.reduce += 1;
                    group.values = vec![reduced];
                }
            }
            Ok(())
        })?;
        let mut results: Vec<(Bson, Bson)> = groups
            .into_iter()
            .map(|mut g| (g.key, g.values.pop().unwrap_or(Bson::Null)))
            .collect();
        results.sort_by(|a, b| basalt_value::compare_values(&a.0, &b.0));
        counts.output = results.len() as i64;
        Ok((results, counts))
    }
}

impl MapReduce {
    /// Compiles `map`, `reduce` and `finalize` (code or strings), whose free variables
    /// may name the fields of `scope`.
    pub fn new(
        map: &Bson,
        reduce: &Bson,
        finalize: Option<&Bson>,
        scope: &Document,
    ) -> Result<MapReduce> {
        check_scripting_enabled()?;
        let compile = |code: &Bson| match code {
            Bson::String(code) | Bson::JavaScriptCode(code) => Script::new(code, scope),
            Bson::JavaScriptCodeWithScope(code) => {
                let mut merged = scope.clone();
                merged.extend(code.scope.clone());
                Script::new(&code.code, &merged)
            }
            // mongod's message, which names `scope` whichever function is wrong.
            _ => Err(Error::bad_value(
                "'scope' must be a string, code or 'code with scope'",
            )),
        };
        Ok(MapReduce {
            map: compile(map)?,
            reduce: compile(reduce)?,
            finalize: finalize.map(compile).transpose()?,
        })
    }

    /// The top-level fields `map` reads, when it names them all (`this.a`): a document
    /// holding only those maps as the whole one does.
    pub fn map_fields_read(&self) -> Option<&[String]> {
        self.map.fields_read()
    }

    /// Starts a run: documents are then mapped one at a time as the scan finds them.
    pub fn start(&self) -> MapReduceRun<'_> {
        MapReduceRun {
            job: self,
            waiting: Vec::with_capacity(MAP_BATCH_DOCS),
            slots: HashMap::new(),
            groups: Vec::new(),
            counts: MapReduceCounts::default(),
            encoded: Vec::new(),
            memory: Reservation::default(),
        }
    }

    /// `reduce(key, values)`: also how `out: {reduce}` combines a result with the value
    /// already in the output collection.
    pub fn reduce(&self, key: &Bson, values: &[Bson]) -> Result<Bson> {
        with_session(|session| self.reduce_in(session, key, values))
    }

    /// The value to output for a reduced one: `finalize(key, value)`, or the value.
    pub fn finalize(&self, key: &Bson, value: Bson) -> Result<Bson> {
        match &self.finalize {
            Some(finalize) => finalize.call(None, &[key.clone(), value]),
            None => Ok(value),
        }
    }

    fn reduce_in(
        &self,
        session: &mut Session<'_, '_>,
        key: &Bson,
        values: &[Bson],
    ) -> Result<Bson> {
        let reduce = session.compile(&self.reduce)?;
        let key = session.shell.to_js(key)?;
        let list = Array::new(session.ctx.clone()).map_err(|e| session.failure(e))?;
        for (k, value) in values.iter().enumerate() {
            list.set(k, session.shell.to_js(value)?)
                .map_err(|e| session.failure(e))?;
        }
        let this = Value::new_undefined(session.ctx.clone());
        let result = session.call(&reduce, this, vec![key, list.into_value()])?;
        match session.shell.to_bson(result)? {
            Bson::Array(_) => Err(js_failure("reduce -> multiple not supported yet")),
            value => Ok(value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn code(text: &str) -> Bson {
        Bson::JavaScriptCode(text.into())
    }

    #[test]
    fn maps_groups_reduces_and_rereduces() {
        let job = MapReduce::new(
            &code("function () { emit(this.k, {n: 1, sum: this.v}); }"),
            &code("function (key, values) { var r = {n: 0, sum: 0}; values.forEach(function (v) { r.n += v.n; r.sum += v.sum; }); return r; }"),
            Some(&code("function (key, value) { value.avg = value.sum / value.n; return value; }")),
            &Document::new(),
        )
        .unwrap();
        let docs: Vec<Document> = (0..2500).map(|i| doc! {"k": i % 2, "v": i}).collect();
        let mut run = job.start();
        docs.into_iter().try_for_each(|d| run.map(d)).unwrap();
        let (results, counts) = run.finish().unwrap();
        assert_eq!(counts.input, 2500);
        assert_eq!(counts.emit, 2500);
        assert_eq!(counts.output, 2);
        // 1250 values per key: one reduce at 1000 pending, one for the rest.
        assert_eq!(counts.reduce, 4);
        let (key, value) = &results[1];
        assert_eq!(key, &Bson::Double(1.0));
        let value = job.finalize(key, value.clone()).unwrap();
        let value = value.as_document().unwrap();
        assert_eq!(value.get_f64("n").unwrap(), 1250.0);
        assert_eq!(value.get_f64("avg").unwrap(), 1250.0);
    }

    fn sum_by_key(map: &str, docs: Vec<Document>) -> (Vec<(Bson, Bson)>, MapReduceCounts) {
        let job = MapReduce::new(
            &code(map),
            &code("function (k, vs) { return Array.sum(vs); }"),
            None,
            &Document::new(),
        )
        .unwrap();
        let mut run = job.start();
        docs.into_iter().try_for_each(|d| run.map(d)).unwrap();
        run.finish().unwrap()
    }

    #[test]
    fn keys_equal_in_bson_are_one_key_wherever_they_are_grouped() {
        // A number is grouped in the sandbox, a NumberLong here: 1 and NumberLong(1) meet.
        let docs = (0..3000)
            .map(|i| doc! {"k": i % 3, "long": i % 2 == 0})
            .collect();
        let (results, counts) = sum_by_key(
            "function () { emit(this.long ? NumberLong(this.k) : this.k, 1); }",
            docs,
        );
        assert_eq!(counts.emit, 3000);
        let sums: Vec<&Bson> = results.iter().map(|(_, v)| v).collect();
        assert_eq!(sums, [&Bson::Double(1000.0); 3]);
    }

    #[test]
    fn many_keys_are_handed_over_before_the_sandbox_fills() {
        let docs = (0..JS_PENDING_VALUES_MAX as i32 + 5000)
            .map(|i| doc! {"k": i})
            .collect();
        let (results, counts) = sum_by_key("function () { emit(this.k, 1); emit(0, 1); }", docs);
        assert_eq!(counts.output as usize, JS_PENDING_VALUES_MAX + 5000);
        assert_eq!(
            results[0],
            (
                Bson::Double(0.0),
                Bson::Double(JS_PENDING_VALUES_MAX as f64 + 5001.0)
            )
        );
    }

    #[test]
    fn a_key_with_one_value_is_not_reduced() {
        let job = MapReduce::new(
            &code("function () { emit(this._id, this.x); }"),
            &code("function () { throw 'not called'; }"),
            None,
            &Document::new(),
        )
        .unwrap();
        let docs = [doc! {"_id": 1, "x": bson::DateTime::from_millis(5)}];
        let mut run = job.start();
        docs.into_iter().try_for_each(|d| run.map(d)).unwrap();
        let (results, counts) = run.finish().unwrap();
        assert_eq!(counts.reduce, 0);
        assert_eq!(
            results,
            vec![(
                Bson::Double(1.0),
                Bson::DateTime(bson::DateTime::from_millis(5))
            )]
        );
    }
}
