//! The JavaScript half of `mapReduce`: calls `map` on each document with an `emit` that
//! collects key/value pairs, groups values by key, calls `reduce` on a key's values (again
//! on its earlier results, which is why MongoDB requires reduce to be re-reducible), and
//! `finalize` on each result. Reading the input and writing the output is the server's.
//!
//! Pending values are held as BSON, not in the JS heap, so a job with many keys is
//! bounded by the server's memory rather than one runtime's cap; a key's values are
//! reduced whenever [`REDUCE_BATCH_VALUES`] are pending.

use crate::sandbox::{check_scripting_enabled, js_failure, with_session, Script, Session};
use basalt_error::{Error, Result};
use basalt_value::key_string;
use bson::{Bson, Document};
use rquickjs::{Array, Value};
use std::collections::HashMap;

/// A key's values are reduced as soon as this many are pending.
const REDUCE_BATCH_VALUES: usize = 1000;

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

/// One `mapReduce` in progress: the values emitted so far, grouped by key.
pub struct MapReduceRun<'a> {
    job: &'a MapReduce,
    /// A key's group, by the key's order-preserving encoding (so 1 and 1.0 are one key).
    slots: HashMap<Vec<u8>, usize>,
    groups: Vec<Group>,
    counts: MapReduceCounts,
    encoded: Vec<u8>,
}

impl MapReduceRun<'_> {
    /// Calls `map` on one document and files what it emitted.
    pub fn map(&mut self, doc: &Document) -> Result<()> {
        let MapReduceRun {
            job,
            slots,
            groups,
            counts,
            encoded,
        } = self;
        counts.input += 1;
        with_session(|session| {
            let map = session.compile(&job.map)?;
            let this = job.map.document_to_js(session, doc)?.into_value();
            session.call(&map, this, Vec::new())?;
            let emitted: Array = map.drain_emits.call(()).map_err(|e| session.failure(e))?;
            let mut pairs = emitted.iter::<Value>();
            while let (Some(key), Some(value)) = (pairs.next(), pairs.next()) {
                let key = session
                    .shell
                    .to_bson(key.map_err(|e| session.failure(e))?)?;
                let value = session
                    .shell
                    .to_bson(value.map_err(|e| session.failure(e))?)?;
                counts.emit += 1;
                encoded.clear();
                key_string::encode_value(encoded, &key, false);
                let slot = match slots.get(encoded.as_slice()) {
                    Some(slot) => *slot,
                    None => {
                        slots.insert(encoded.clone(), groups.len());
                        groups.push(Group {
                            key,
                            values: Vec::new(),
                        });
                        groups.len() - 1
                    }
                };
                let group = &mut groups[slot];
                group.values.push(value);
                if group.values.len() >= REDUCE_BATCH_VALUES {
                    let reduced = job.reduce_in(session, &group.key, &group.values)?;
                    counts.reduce += 1;
                    group.values = vec![reduced];
                }
            }
            Ok(())
        })
    }

    /// Reduces what is left: one `(key, value)` per distinct key, in key order, reduced
    /// but not finalized (see [`MapReduce::finalize`]).
    pub fn finish(self) -> Result<(Vec<(Bson, Bson)>, MapReduceCounts)> {
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
        let compile = |field: &str, code: &Bson| match code {
            Bson::String(code) | Bson::JavaScriptCode(code) => Script::new(code, scope),
            Bson::JavaScriptCodeWithScope(code) => {
                let mut merged = scope.clone();
                merged.extend(code.scope.clone());
                Script::new(&code.code, &merged)
            }
            _ => Err(Error::new(
                basalt_error::ErrorCode::TYPE_MISMATCH,
                format!(
                    "BSON field 'mapReduce.{field}' is the wrong type, expected type 'javascript'"
                ),
            )),
        };
        Ok(MapReduce {
            map: compile("map", map)?,
            reduce: compile("reduce", reduce)?,
            finalize: finalize.map(|f| compile("finalize", f)).transpose()?,
        })
    }

    /// Starts a run: documents are then mapped one at a time as the scan finds them.
    pub fn start(&self) -> MapReduceRun<'_> {
        MapReduceRun {
            job: self,
            slots: HashMap::new(),
            groups: Vec::new(),
            counts: MapReduceCounts::default(),
            encoded: Vec::new(),
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
        docs.iter().try_for_each(|d| run.map(d)).unwrap();
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
        docs.iter().try_for_each(|d| run.map(d)).unwrap();
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
