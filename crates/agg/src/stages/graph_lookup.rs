//! `$graphLookup`: a recursive `$lookup`. Starting from the values of `startWith`, it
//! finds the documents of `from` whose `connectToField` equals one of them, then follows
//! their `connectFromField` values the same way, breadth first, to `maxDepth`. Each
//! document is reached once (by `_id`), at its smallest depth, which `depthField` records.
//!
//! The search runs on the same hash join as `$lookup` (`crate::join`): the foreign
//! collection is read once per execution, restricted by `restrictSearchWithMatch`, and
//! every level of the search is a set of hash probes. A document whose `connectToField`
//! is missing is never found, as in MongoDB.

use crate::field_path;
use crate::join::{self, Join, Key};
use crate::pipeline::{DocumentStream, ExecContext};
use crate::stages::map_documents;
use basalt_error::{Error, ErrorCode, Result};
use basalt_expr::{type_name, Expression, ParseContext, Variables};
use basalt_memory::Reservation;
use basalt_query::Matcher;
use basalt_value::FieldPath;
use bson::{Bson, Document};
use std::collections::HashSet;

/// MongoDB's `$graphLookup` maxMemoryUsageBytes: what one search may hold (the documents
/// found and the keys looked for), counted in BSON bytes as MongoDB does.
const GRAPH_LOOKUP_MEMORY_BYTES_MAX: usize = 100 * 1024 * 1024;

#[derive(Debug)]
pub(crate) struct GraphLookup {
    from: String,
    as_path: Vec<String>,
    start_with: Expression,
    connect_from: FieldPath,
    connect_to: FieldPath,
    depth_field: Option<Vec<String>>,
    max_depth: Option<i64>,
    restrict: Option<Matcher>,
}

impl GraphLookup {
    pub(crate) fn parse(spec: &Bson, ctx: &ParseContext) -> Result<GraphLookup> {
        let Bson::Document(spec) = spec else {
            return Err(Error::failed_to_parse(format!(
                "the $graphLookup stage specification must be an object, but found {}",
                type_name(Some(spec))
            )));
        };
        let (mut from, mut as_field, mut start_with, mut connect_from, mut connect_to) =
            (None, None, None, None, None);
        let (mut depth_field, mut max_depth, mut restrict) = (None, None, None);
        for (name, value) in spec {
            match name.as_str() {
                "startWith" => start_with = Some(Expression::parse(value, ctx)?),
                "maxDepth" => max_depth = Some(parse_max_depth(value)?),
                "restrictSearchWithMatch" => match value {
                    Bson::Document(filter) => restrict = Some(Matcher::new(filter)?),
                    other => {
                        return Err(Error::location(
                            40185,
                            format!(
                                "restrictSearchWithMatch must be an object, found {}",
                                type_name(Some(other))
                            ),
                        ))
                    }
                },
                "from" | "as" | "connectFromField" | "connectToField" | "depthField" => {
                    let text = match value {
                        Bson::String(s) => s.as_str(),
                        Bson::Document(ns) if name == "from" => {
                            return Err(Error::failed_to_parse(format!(
                                "$graphLookup with syntax {{from: {{db:<>, coll:<>}},..}} is not supported for db: {} and coll: {}",
                                ns.get_str("db").unwrap_or(""),
                                ns.get_str("coll").unwrap_or("")
                            )))
                        }
                        other => {
                            return Err(Error::location(
                                40103,
                                format!(
                                    "expected string as argument for {name}, found: {}",
                                    type_name(Some(other))
                                ),
                            ))
                        }
                    };
                    match name.as_str() {
                        "from" => from = Some(text.to_string()),
                        "as" => as_field = Some(field_path::split(text)?),
                        "connectFromField" => connect_from = Some(checked_path(text)?),
                        "connectToField" => connect_to = Some(checked_path(text)?),
                        _ => depth_field = Some(field_path::split(text)?),
                    }
                }
                _ => {
                    return Err(Error::location(
                        40104,
                        format!("Unknown argument to $graphLookup: {name}"),
                    ))
                }
            }
        }
        let (Some(from), Some(as_path), Some(start_with), Some(connect_from), Some(connect_to)) =
            (from, as_field, start_with, connect_from, connect_to)
        else {
            return Err(Error::location(
                40105,
                "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', and 'connectToField' to be specified.",
            ));
        };
        if from.is_empty() {
            return Err(Error::new(
                ErrorCode::INVALID_NAMESPACE,
                "invalid $graphLookup namespace: the collection name is empty",
            ));
        }
        Ok(GraphLookup {
            from,
            as_path,
            start_with,
            connect_from,
            connect_to,
            depth_field,
            max_depth,
            restrict,
        })
    }

    pub(crate) fn apply<'a>(
        &'a self,
        input: DocumentStream<'a>,
        ctx: ExecContext<'a>,
    ) -> DocumentStream<'a> {
        let mut opened = None;
        map_documents(input, move |mut doc| {
            let join = match &mut opened {
                Some(join) => join,
                None => opened.insert(Join::open(
                    self.connect_to.clone(),
                    false,
                    self.restrict.as_ref(),
                    ctx.vars.collation(),
                    Box::new(move || ctx.collections.scan(ctx.collections.database(), &self.from)),
                )?),
            };
            let found = self.search(&doc, join, ctx.vars)?;
            let found = found.into_iter().map(Bson::Document).collect();
            field_path::set(&mut doc, &self.as_path, Bson::Array(found));
            Ok(Some(doc))
        })
    }

    /// The documents reachable from `doc`, breadth first, each once.
    fn search(&self, doc: &Document, join: &Join<'_>, vars: &Variables) -> Result<Vec<Document>> {
        let mut frontier = match self.start_with.evaluate(doc, vars)? {
            None => Vec::new(),
            Some(Bson::Array(items)) => items,
            Some(value) => vec![value],
        };
        // A value already looked for can only lead to documents already found.
        let mut queried: HashSet<Key> = HashSet::new();
        let mut visited: HashSet<Key> = HashSet::new();
        let mut found = Vec::new();
        let mut memory_bytes = 0usize;
        // What the search holds, also taken from the server's budget while it runs.
        let mut reserved = Reservation::default();
        let mut depth = 0i64;
        loop {
            let mut keys = HashSet::new();
            for value in &frontier {
                let key = join::key(value, vars.collation());
                memory_bytes += key.len();
                if queried.insert(key.clone()) {
                    keys.insert(key);
                }
            }
            if keys.is_empty() {
                break;
            }
            let mut next = Vec::new();
            for reached in join.matching(keys)? {
                let mut reached = reached?;
                // `_id`s are told apart byte for byte: distinct documents stay distinct.
                let id = join::key(reached.get("_id").unwrap_or(&Bson::Null), None);
                memory_bytes += id.len();
                if !visited.insert(id) {
                    continue;
                }
                memory_bytes += basalt_value::document_size_bytes(&reached);
                reserved.reserve_for(
                    basalt_value::document_memory_bytes(&reached),
                    "$graphLookup",
                )?;
                if memory_bytes > GRAPH_LOOKUP_MEMORY_BYTES_MAX {
                    return Err(Error::location(
                        40099,
                        "$graphLookup reached maximum memory consumption",
                    ));
                }
                next.extend(join::sought_values(&reached, &self.connect_from));
                if let Some(path) = &self.depth_field {
                    field_path::set(&mut reached, path, Bson::Int64(depth));
                }
                found.push(reached);
            }
            frontier = next;
            depth += 1;
            if self.max_depth.is_some_and(|max| depth > max) {
                break;
            }
        }
        Ok(found)
    }
}

fn checked_path(path: &str) -> Result<FieldPath> {
    field_path::split(path)?;
    Ok(FieldPath::parse(path))
}

fn parse_max_depth(value: &Bson) -> Result<i64> {
    let Some(depth) = basalt_value::as_f64(value) else {
        return Err(Error::location(
            40100,
            format!(
                "maxDepth must be numeric, found type: {}",
                type_name(Some(value))
            ),
        ));
    };
    if depth < 0.0 {
        return Err(Error::location(
            40101,
            format!("maxDepth requires a nonnegative argument, found: {depth}"),
        ));
    }
    if depth.fract() != 0.0 || depth >= i64::MAX as f64 {
        return Err(Error::location(
            40102,
            format!("maxDepth could not be represented as a long long: {depth}"),
        ));
    }
    Ok(depth as i64)
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use basalt_error::Result;
    use bson::{doc, Bson, Document};

    /// Eliot ← Ron ← Andrew; Dev and Asya report to Ron; Dan reports to Andrew.
    fn server() -> MemoryCollections {
        let server = MemoryCollections::new("test");
        server.put(
            "test",
            "employees",
            vec![
                doc! {"_id": 1, "name": "Dev"},
                doc! {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
                doc! {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
                doc! {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
                doc! {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
                doc! {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
            ],
        );
        server
    }

    fn run(spec: Document, input: Vec<Document>) -> Result<Vec<Document>> {
        let server = server();
        let p = Pipeline::parse(&[doc! {"$graphLookup": spec}], None)?;
        let out = p
            .stream(Box::new(input.into_iter().map(Ok)), &server)
            .collect();
        out
    }

    fn names_and_depths(doc: &Document) -> Vec<(String, i64)> {
        let mut out: Vec<(String, i64)> = doc
            .get_array("chain")
            .unwrap()
            .iter()
            .map(|d| {
                let d = d.as_document().unwrap();
                (
                    d.get_str("name").unwrap().to_string(),
                    d.get_i64("depth").unwrap_or(-1),
                )
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn follows_the_chain_breadth_first() {
        let spec = doc! {
            "from": "employees", "startWith": "$reportsTo", "connectFromField": "reportsTo",
            "connectToField": "name", "as": "chain", "depthField": "depth",
        };
        let out = run(
            spec.clone(),
            vec![doc! {"name": "Asya", "reportsTo": "Ron"}],
        )
        .unwrap();
        assert_eq!(
            names_and_depths(&out[0]),
            vec![("Dev".into(), 2), ("Eliot".into(), 1), ("Ron".into(), 0)]
        );
        let mut limited = spec.clone();
        limited.insert("maxDepth", 1);
        let out = run(limited, vec![doc! {"reportsTo": "Ron"}]).unwrap();
        assert_eq!(
            names_and_depths(&out[0]),
            vec![("Eliot".into(), 1), ("Ron".into(), 0)]
        );
        let out = run(spec, vec![doc! {"x": 1}]).unwrap();
        assert!(out[0].get_array("chain").unwrap().is_empty());
    }

    #[test]
    fn restricted_search_and_array_starts() {
        let out = run(
            doc! {
                "from": "employees", "startWith": ["Ron", "Andrew"], "connectFromField": "name",
                "connectToField": "reportsTo", "as": "chain",
                "restrictSearchWithMatch": {"name": {"$ne": "Dan"}},
            },
            vec![doc! {}],
        )
        .unwrap();
        assert_eq!(names_and_depths(&out[0]), vec![("Asya".into(), -1)]);
    }

    #[test]
    fn graph_lookup_errors() {
        let base = doc! {
            "from": "employees", "startWith": "$a", "connectFromField": "a",
            "connectToField": "b", "as": "c",
        };
        let code = |extra: Document| {
            let mut spec = base.clone();
            spec.extend(extra);
            run(spec, vec![doc! {}]).unwrap_err().code.0
        };
        assert_eq!(code(doc! {"maxDepth": "x"}), 40100);
        assert_eq!(code(doc! {"maxDepth": -1}), 40101);
        assert_eq!(code(doc! {"maxDepth": 1.5}), 40102);
        assert_eq!(code(doc! {"as": 1}), 40103);
        assert_eq!(code(doc! {"bogus": 1}), 40104);
        assert_eq!(code(doc! {"restrictSearchWithMatch": 1}), 40185);
        assert_eq!(code(doc! {"from": {"db": "a", "coll": "b"}}), 9);
        let mut missing = base.clone();
        missing.remove("as");
        assert_eq!(run(missing, vec![]).unwrap_err().code.0, 40105);
        assert_eq!(
            Pipeline::parse(&[doc! {"$graphLookup": Bson::Int32(1)}], None)
                .unwrap_err()
                .code
                .0,
            9
        );
    }
}
