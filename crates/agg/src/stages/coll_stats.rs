//! `$collStats`: one document about the collection the pipeline aggregates, with the
//! sections asked for: `latencyStats`, `storageStats` (the `collStats` command's figures,
//! with its `scale`), `count`, `queryExecStats`. It must be the first stage.
//!
//! `latencyStats` are the collection's (see `basalt_catalog::LatencyStats`); a
//! collection that does not exist has none to report, so its figures are zeros.

use crate::pipeline::ExecContext;
use basalt_error::{Error, ErrorCode, Result};
use basalt_value::display::type_name;
use bson::{doc, Bson, DateTime, Document};

#[derive(Debug, Default)]
pub(crate) struct CollStats {
    /// `Some(histograms)` when latency statistics are asked for.
    latency: Option<bool>,
    /// `Some(scale)` when storage statistics are asked for.
    storage: Option<i64>,
    count: bool,
    query_exec: bool,
}

impl CollStats {
    pub(crate) fn parse(spec: &Bson) -> Result<CollStats> {
        let Bson::Document(spec) = spec else {
            return Err(Error::location(
                5447000,
                format!(
                    "$collStats must take a nested object but found: {}",
                    type_name(spec)
                ),
            ));
        };
        let mut stats = CollStats::default();
        for (name, value) in spec {
            // A null option is one not asked for.
            if *value == Bson::Null {
                continue;
            }
            let Bson::Document(options) = value else {
                return Err(Error::new(
                    ErrorCode::TYPE_MISMATCH,
                    format!(
                        "BSON field '$collStats.{name}' is the wrong type '{}', expected type 'object'",
                        type_name(value)
                    ),
                ));
            };
            match name.as_str() {
                "latencyStats" => {
                    stats.latency = Some(match options.get("histograms") {
                        None => false,
                        Some(Bson::Boolean(b)) => *b,
                        Some(other) => {
                            return Err(wrong_type("latencyStats.histograms", other, "bool"))
                        }
                    })
                }
                "storageStats" => {
                    stats.storage = Some(match options.get("scale") {
                        None => 1,
                        Some(v) => i64::from(basalt_value::number::scale_factor(v)?),
                    })
                }
                "count" => stats.count = true,
                "queryExecStats" => stats.query_exec = true,
                _ => {
                    return Err(Error::location(
                        40415,
                        format!("BSON field '$collStats.{name}' is an unknown field."),
                    ))
                }
            }
        }
        Ok(stats)
    }

    pub(crate) fn run(&self, ctx: ExecContext<'_>) -> Result<Vec<Document>> {
        let histograms = self.latency == Some(true);
        let info = ctx
            .collections
            .collection_stats(self.storage.unwrap_or(1), histograms)?;
        let ns = info.get_str("ns").unwrap_or_default().to_string();
        let storage = || {
            info.get_document("storageStats").map_err(|_| {
                Error::new(
                    ErrorCode::NAMESPACE_NOT_FOUND,
                    format!("Unable to retrieve storageStats in $collStats stage :: caused by :: Collection [{ns}] not found."),
                )
            })
        };
        let mut out = doc! {
            "ns": &ns,
            "host": info.get("host").cloned().unwrap_or(Bson::Null),
            "localTime": DateTime::now(),
        };
        if self.latency.is_some() {
            let latency = match info.get_document("latencyStats") {
                Ok(kept) => kept.clone(),
                Err(_) => {
                    let mut none = doc! {"latency": 0_i64, "ops": 0_i64};
                    if histograms {
                        none.insert("histogram", Bson::Array(Vec::new()));
                    }
                    let classes = ["reads", "writes", "commands", "transactions"];
                    classes
                        .iter()
                        .map(|c| (c.to_string(), Bson::Document(none.clone())))
                        .collect()
                }
            };
            out.insert("latencyStats", latency);
        }
        if self.storage.is_some() {
            let mut stats = storage()?.clone();
            stats.remove("ns");
            out.insert("storageStats", stats);
        }
        if self.count {
            let count = storage()?.get("count").cloned().unwrap_or(Bson::Int64(0));
            out.insert("count", count);
        }
        if self.query_exec {
            out.insert(
                "queryExecStats",
                doc! {"collectionScans": {"total": 0_i64, "nonTailable": 0_i64}},
            );
        }
        Ok(vec![out])
    }
}

fn wrong_type(field: &str, value: &Bson, expected: &str) -> Error {
    Error::new(
        ErrorCode::TYPE_MISMATCH,
        format!(
            "BSON field '$collStats.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(value)
        ),
    )
}

#[cfg(test)]
mod tests {
    use crate::pipeline::Pipeline;
    use crate::testing::MemoryCollections;
    use bson::{bson, doc, Bson, Document};

    fn run(stages: Vec<Document>) -> basalt_error::Result<Vec<Document>> {
        let server = MemoryCollections::new("db");
        server.put("db", "c", vec![doc! {"a": 1}, doc! {"a": 2}]);
        let pipeline = Pipeline::parse_aggregate(&stages, None, false, None)?;
        server.set_aggregated("c");
        pipeline
            .stream(Box::new(std::iter::empty()), &server)
            .collect()
    }

    #[test]
    fn reports_the_sections_asked_for() {
        let out = run(vec![
            doc! {"$collStats": {"storageStats": {"scale": 2}, "count": {}, "latencyStats": {}}},
        ])
        .unwrap();
        assert_eq!(out.len(), 1);
        let stats = &out[0];
        assert_eq!(stats.get_str("ns").unwrap(), "db.c");
        assert_eq!(stats.get("count"), Some(&bson!(2_i64)));
        assert_eq!(
            stats
                .get_document("storageStats")
                .unwrap()
                .get("scaleFactor"),
            Some(&Bson::Int64(2))
        );
        assert_eq!(
            stats.get_document("latencyStats").unwrap().get("reads"),
            Some(&bson!({"latency": 5_i64, "ops": 1_i64}))
        );
        let out = run(vec![doc! {"$collStats": {}}]).unwrap();
        assert!(!out[0].contains_key("storageStats"));
        // A null section is one not asked for.
        let out = run(vec![
            doc! {"$collStats": {"count": null, "storageStats": null}},
        ])
        .unwrap();
        assert!(!out[0].contains_key("count") && !out[0].contains_key("storageStats"));
    }

    #[test]
    fn coll_stats_errors() {
        let code = |stages: Vec<Document>| run(stages).unwrap_err().code.0;
        assert_eq!(code(vec![doc! {"$collStats": 1}]), 5447000);
        assert_eq!(code(vec![doc! {"$collStats": {"bogus": {}}}]), 40415);
        assert_eq!(code(vec![doc! {"$collStats": {"count": 1}}]), 14);
        assert_eq!(
            code(vec![doc! {"$collStats": {"storageStats": {"scale": 0}}}]),
            2
        );
        assert_eq!(
            code(vec![doc! {"$match": {}}, doc! {"$collStats": {}}]),
            40602
        );
        assert_eq!(
            Pipeline::parse_aggregate(&[doc! {"$collStats": {}}], None, true, None)
                .unwrap_err()
                .code
                .0,
            73
        );
    }
}
