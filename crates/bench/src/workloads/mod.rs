//! The workloads of DESIGN §7, each in its own file: a seeded generator, the queries in
//! MongoDB's form and in SQL for the peers, and the expected answers computed by the
//! generator itself from the values it made (never by a database).
//!
//! The analytic workloads (W1, W2, W3, W5) become a [`Dataset`]: two NDJSON files with the
//! same values, one in Extended JSON for `basalt import` and one with dates as epoch
//! milliseconds for the peers, whose JSON readers know no `$date`. W4 (key-value) drives
//! its own load from client threads, and `conns` (the connection storm) opens its own
//! connections.

pub(crate) mod conns;
pub(crate) mod tools;
pub(crate) mod w1_mot;
pub(crate) mod w2_sensor;
pub(crate) mod w3_compare;
pub(crate) mod w4_kv;
pub(crate) mod w5_weather;

use crate::answer::Answer;
use crate::io_error;
use basalt_error::Result;
use bson::Document;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The workloads, by their names in DESIGN §7, and the connection storm.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadId {
    W1,
    W2,
    W3,
    W4,
    W5,
    Conns,
    /// dump, restore and export of W1 (needs w1).
    Tools,
}

impl WorkloadId {
    pub(crate) fn name(self) -> &'static str {
        match self {
            WorkloadId::W1 => "w1",
            WorkloadId::W2 => "w2",
            WorkloadId::W3 => "w3",
            WorkloadId::W4 => "w4",
            WorkloadId::W5 => "w5",
            WorkloadId::Conns => "conns",
            WorkloadId::Tools => "tools",
        }
    }

    /// Whether the workload is generated data and queries over it (a [`Dataset`]).
    pub(crate) fn has_dataset(self) -> bool {
        !matches!(self, WorkloadId::W4 | WorkloadId::Conns | WorkloadId::Tools)
    }
}

/// Generated data of an analytic workload, with its queries and their answers.
pub(crate) struct Dataset {
    pub id: WorkloadId,
    pub title: &'static str,
    pub docs: u64,
    /// Extended JSON, for `basalt import`.
    pub import_file: PathBuf,
    /// Plain JSON with dates as epoch milliseconds, for the peers.
    pub peer_file: PathBuf,
    pub bytes: u64,
    /// FNV-1a of the import file: equal for equal seeds and sizes, in the results JSON.
    pub checksum: u64,
    /// Index keys created after loading (`createIndexes`).
    pub indexes: Vec<Document>,
    /// SQL (in the peers' template language, see [`Variant::sql`]) run after a peer loads.
    pub peer_setup: Vec<String>,
    pub queries: Vec<Query>,
    /// `create`'s `timeseries` options under which the dataset is loaded again into a
    /// time-series collection and its queries rerun there (`None`: not a time series).
    pub time_series: Option<Document>,
}

impl Dataset {
    /// The collection and peer table name.
    pub(crate) fn collection(&self) -> &'static str {
        self.id.name()
    }
}

/// One query of a workload, timed over several runs; each run takes the next variant.
#[derive(Clone)]
pub(crate) struct Query {
    pub name: &'static str,
    /// Documents a collection scan reads: the figure docs/s per core is computed from it.
    /// `None` for queries an index should answer, which are judged by latency.
    pub scanned_docs: Option<u64>,
    pub variants: Vec<Variant>,
}

/// One concrete query and its answer.
#[derive(Clone)]
pub(crate) struct Variant {
    pub mongo: MongoOp,
    /// SQL for the peers, `None` when the query has no SQL form. Templated: `$table` is
    /// the table, `$(a.b)` the value at path a.b of the document (a column for DuckDB,
    /// `json_extract(doc, '$.a.b')` for SQLite), `$doc` the whole document.
    pub sql: Option<String>,
    pub expected: Answer,
}

/// The name of the column store index the bench builds after a workload's queries.
pub(crate) const COLUMN_STORE_INDEX: &str = "columnstore";

/// A query in MongoDB's form.
#[derive(Clone, Debug)]
pub(crate) enum MongoOp {
    Aggregate(Vec<Document>),
    /// An aggregation with `hint: {$natural: 1}`: a collection scan even where an index
    /// of the dataset could serve it.
    AggregateScan(Vec<Document>),
    /// An aggregation or a find hinted to the column store index the bench builds
    /// ([`COLUMN_STORE_INDEX`]).
    ColumnStore(Box<MongoOp>),
    /// The `mapReduce` command with inline output; its `results` are the answer.
    MapReduce {
        map: String,
        reduce: String,
    },
    Find {
        filter: Document,
        projection: Option<Document>,
    },
    /// The `count` command, whose filter may use `$where` (which `$match` refuses).
    Count(Document),
}

/// How a generator writes dates into its NDJSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dates {
    /// `{"$date": "2020-01-01T00:00:00Z"}`: relaxed Extended JSON, as mongoexport writes.
    Extended,
    /// Milliseconds since the epoch, a plain number.
    EpochMillis,
}

/// A date in JSON, in the given style.
pub(crate) struct JsonDate(pub i64, pub Dates);

impl fmt::Display for JsonDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Dates::EpochMillis => write!(f, "{}", self.0),
            Dates::Extended => {
                let date = bson::DateTime::from_millis(self.0);
                match date.try_to_rfc3339_string() {
                    Ok(text) => write!(f, r#"{{"$date":"{text}"}}"#),
                    Err(_) => write!(f, r#"{{"$date":{{"$numberLong":"{}"}}}}"#, self.0),
                }
            }
        }
    }
}

/// The two NDJSON files of a dataset being written.
pub(crate) struct Files {
    import: BufWriter<File>,
    import_path: PathBuf,
    /// `None` when the data has no dates: then the peers read the import file.
    peer: Option<(BufWriter<File>, PathBuf)>,
    line: Vec<u8>,
    bytes: u64,
    checksum: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

impl Files {
    pub(crate) fn create(dir: &Path, name: &str, has_dates: bool) -> Result<Files> {
        let open = |path: &Path| {
            File::create(path)
                .map(|f| BufWriter::with_capacity(1 << 20, f))
                .map_err(|e| io_error(format!("cannot create {}", path.display()), e))
        };
        let import_path = dir.join(format!("{name}.json"));
        let peer = if has_dates {
            let path = dir.join(format!("{name}.peer.json"));
            Some((open(&path)?, path))
        } else {
            None
        };
        Ok(Files {
            import: open(&import_path)?,
            import_path,
            peer,
            line: Vec::with_capacity(4096),
            bytes: 0,
            checksum: FNV_OFFSET,
        })
    }

    /// Writes one document: `write` renders it (without the newline) in a date style.
    pub(crate) fn record(
        &mut self,
        mut write: impl FnMut(&mut Vec<u8>, Dates) -> std::io::Result<()>,
    ) -> Result<()> {
        let failed = |e| io_error("cannot write the generated data", e);
        self.line.clear();
        write(&mut self.line, Dates::Extended).map_err(failed)?;
        self.line.push(b'\n');
        for &b in &self.line {
            self.checksum = (self.checksum ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
        self.bytes += self.line.len() as u64;
        self.import.write_all(&self.line).map_err(failed)?;
        if let Some((peer, _)) = &mut self.peer {
            self.line.clear();
            write(&mut self.line, Dates::EpochMillis).map_err(failed)?;
            self.line.push(b'\n');
            peer.write_all(&self.line).map_err(failed)?;
        }
        Ok(())
    }

    /// Flushes the files and syncs them to the disk, so that the kernel writing a
    /// gigabyte of generated data back does not fall into the timed loads:
    /// `(import file, peer file, import bytes, checksum)`.
    pub(crate) fn finish(mut self) -> Result<(PathBuf, PathBuf, u64, u64)> {
        let failed = |e| io_error("cannot write the generated data", e);
        self.import.flush().map_err(failed)?;
        self.import.get_ref().sync_all().map_err(failed)?;
        let peer_path = match self.peer {
            Some((mut peer, path)) => {
                peer.flush().map_err(failed)?;
                peer.get_ref().sync_all().map_err(failed)?;
                path
            }
            None => self.import_path.clone(),
        };
        Ok((self.import_path, peer_path, self.bytes, self.checksum))
    }
}

/// A generator for one purpose of one workload: the same seed always gives the same
/// stream, and streams of different purposes are independent.
pub(crate) fn rng(seed: u64, workload: WorkloadId, purpose: u64) -> Xoshiro256PlusPlus {
    let stream = (workload as u64 + 1) << 32 | purpose;
    Xoshiro256PlusPlus::seed_from_u64(seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Picks from `(item, weight)` pairs.
pub(crate) fn weighted<'a, T>(rng: &mut Xoshiro256PlusPlus, items: &'a [(T, u32)]) -> &'a T {
    let total: u32 = items.iter().map(|(_, w)| w).sum();
    let mut pick = rng.random_range(0..total);
    for (item, weight) in items {
        if pick < *weight {
            return item;
        }
        pick -= weight;
    }
    &items[items.len() - 1].0
}

/// Rounds to one decimal, as weather feeds report.
pub(crate) fn tenths(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Milliseconds of 2020-01-01T00:00:00Z, where generated time starts.
pub(crate) const EPOCH_2020_MS: i64 = 1_577_836_800_000;
pub(crate) const DAY_MS: i64 = 86_400_000;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Generates a dataset twice with `seed` and once with another seed: equal seeds must
    /// give byte-equal files and equal answers, another seed other data.
    pub(crate) fn assert_deterministic(generate: impl Fn(&Path, u64) -> Result<Dataset>) {
        let dirs: Vec<tempfile::TempDir> =
            (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
        let a = generate(dirs[0].path(), 7).expect("generate");
        let b = generate(dirs[1].path(), 7).expect("generate");
        let c = generate(dirs[2].path(), 8).expect("generate");
        assert_eq!(a.checksum, b.checksum);
        assert_ne!(a.checksum, c.checksum);
        assert_eq!(
            std::fs::read(&a.import_file).expect("read"),
            std::fs::read(&b.import_file).expect("read")
        );
        assert_eq!(
            std::fs::read(&a.peer_file).expect("read"),
            std::fs::read(&b.peer_file).expect("read")
        );
        let answers = |d: &Dataset| -> Vec<String> {
            d.queries
                .iter()
                .flat_map(|q| q.variants.iter().map(|v| v.expected.to_string()))
                .collect()
        };
        assert_eq!(answers(&a), answers(&b));
        let lines = std::fs::read_to_string(&a.import_file)
            .expect("read")
            .lines()
            .count();
        assert_eq!(lines as u64, a.docs);
    }

    /// Every line of the import file parses as the importer parses it.
    pub(crate) fn assert_importable(dataset: &Dataset) -> Vec<Document> {
        std::fs::read(&dataset.import_file)
            .expect("read")
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|line| {
                let raw = crate::import::parse_json_line(line).expect("importable line");
                Document::try_from(raw.as_ref()).expect("valid BSON")
            })
            .collect()
    }

    #[test]
    fn extended_dates_are_relaxed_extended_json() {
        assert_eq!(
            JsonDate(EPOCH_2020_MS, Dates::Extended).to_string(),
            r#"{"$date":"2020-01-01T00:00:00Z"}"#
        );
        assert_eq!(JsonDate(5, Dates::EpochMillis).to_string(), "5");
    }
}
