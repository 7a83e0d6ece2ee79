//! A bench run's results, and the three forms they are shown in: the table printed at the
//! end (`table`), the JSON kept for comparison (`results_json`) and the SVG plot (`svg`).

mod results_json;
mod svg;
mod table;

pub(crate) use results_json::to_json;
pub(crate) use svg::to_svg;
pub(crate) use table::to_table;

use crate::machine::Machine;
use crate::measure::Samples;
use crate::peers::Peers;
use crate::workloads::conns::StormResult;
use crate::workloads::tools::ToolsResult;
use crate::workloads::w4_kv::KvResult;
use crate::workloads::WorkloadId;
use std::time::Duration;

/// How a query did, beside its timings.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Status {
    /// Every variant's answer matched the expected one.
    Correct,
    /// An answer differed: what was expected and what came.
    Wrong(String),
    /// The engine refused the query (an operator it does not have yet): its message.
    Unsupported(String),
}

#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    pub samples: Samples,
    pub status: Status,
}

impl Outcome {
    pub(crate) fn failed(status: Status) -> Outcome {
        Outcome {
            samples: Samples::default(),
            status,
        }
    }

    /// The best time, when the query ran and answered right.
    pub(crate) fn best(&self) -> Option<Duration> {
        (self.status == Status::Correct && self.samples.len() > 0).then(|| self.samples.best())
    }
}

pub(crate) struct Report {
    pub machine: Machine,
    /// Threads Basalt's server used for one collection scan.
    pub scan_workers: usize,
    pub size: u64,
    pub seed: u64,
    pub runs: usize,
    pub generate: Duration,
    pub total: Duration,
    pub datasets: Vec<DatasetReport>,
    pub kv: Option<KvResult>,
    pub storm: Option<StormResult>,
    pub tools: Option<ToolsResult>,
    pub peers: Peers,
}

pub(crate) struct DatasetReport {
    pub id: WorkloadId,
    pub title: &'static str,
    pub docs: u64,
    pub bytes: u64,
    pub checksum: u64,
    pub load: Duration,
    /// Lines the importer could not load (should be none: a bug if any).
    pub load_failures: usize,
    /// Index keys and the time to build them after loading.
    pub indexes: Vec<(String, Duration)>,
    /// The collection's `collStats` after the load and its indexes.
    pub storage: StorageFigures,
    /// The load again, into a collection with a column store index (when the dataset's
    /// scans ran on one).
    pub column_store_load: Option<ColumnStoreLoad>,
    /// The load into a time-series collection (when the dataset is one).
    pub time_series_load: Option<TimeSeriesLoad>,
    pub queries: Vec<QueryReport>,
}

/// The dataset loaded into a time-series collection: the import's time and what
/// `collStats` says its buckets take on disk.
#[derive(Clone, Debug)]
pub(crate) struct TimeSeriesLoad {
    pub load: Duration,
    pub storage_bytes: u64,
    pub index_bytes: u64,
    /// The dataset's indexes the server refused to make on the time-series collection.
    pub refused_indexes: Vec<String>,
}

/// A load into a collection with a column store index: the import's time, and how long
/// after it the background merge had made every row group current (`None`: not within
/// the wait).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ColumnStoreLoad {
    pub load: Duration,
    pub current_after: Option<Duration>,
}

/// What `collStats` says a loaded collection takes: its documents' BSON bytes, and on
/// disk its records' tables and its indexes'.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StorageFigures {
    pub bson_bytes: u64,
    pub storage_bytes: u64,
    pub index_bytes: u64,
    /// The column store index's, when one was built.
    pub column_store_bytes: Option<u64>,
}

/// What a query ran over: the loaded collection's documents, the column store index
/// built on it, or the time-series collection the dataset was loaded into again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    Documents,
    ColumnStore,
    TimeSeries,
}

impl Layout {
    /// Its name in labels and the results JSON.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Layout::Documents => "documents",
            Layout::ColumnStore => "columnstore",
            Layout::TimeSeries => "timeseries",
        }
    }
}

pub(crate) struct QueryReport {
    pub name: &'static str,
    pub layout: Layout,
    pub scanned_docs: Option<u64>,
    pub basalt: Outcome,
}

impl QueryReport {
    /// The query's name in tables and charts: workload, query, and the layout it read
    /// when that is not the documents.
    pub(crate) fn label(&self, workload: WorkloadId) -> String {
        match self.layout {
            Layout::Documents => format!("{} {}", workload.name(), self.name),
            layout => format!("{} {} [{}]", workload.name(), self.name, layout.name()),
        }
    }
}

impl Report {
    /// A peer's outcome for a query, if that peer ran it.
    pub(crate) fn peer_outcome(
        &self,
        engine: &str,
        dataset: WorkloadId,
        query: &str,
    ) -> Option<&Outcome> {
        self.peers
            .runs
            .iter()
            .find(|r| r.engine == engine)?
            .queries
            .get(&(dataset.name().to_string(), query.to_string()))
    }

    /// Whether every answer, Basalt's and the peers', was right (unsupported is not wrong).
    pub(crate) fn all_correct(&self) -> bool {
        let basalt = self
            .datasets
            .iter()
            .flat_map(|d| &d.queries)
            .all(|q| !matches!(q.basalt.status, Status::Wrong(_)));
        let peers = self
            .peers
            .runs
            .iter()
            .flat_map(|r| r.queries.values())
            .all(|o| !matches!(o.status, Status::Wrong(_)));
        let storm = self
            .storm
            .as_ref()
            .is_none_or(|s| !matches!(s.status, Status::Wrong(_)));
        let tools = self
            .tools
            .as_ref()
            .is_none_or(|t| !matches!(t.status, Status::Wrong(_)));
        basalt && peers && storm && tools && self.datasets.iter().all(|d| d.load_failures == 0)
    }
}

/// Documents (or operations) per second of `count` in `elapsed`.
pub(crate) fn rate(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// `1.23 ms`, `812 ms`, `4.56 s`.
pub(crate) fn format_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1.0 {
        format!("{ms:.3} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else if ms < 10_000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1} s", ms / 1e3)
    }
}

/// Basalt's ratio to a peer: `3.1x` (Basalt 3.1 times faster) or `1/13` (13 times
/// slower), two significant digits.
pub(crate) fn format_ratio(x: f64) -> String {
    if !x.is_finite() || x <= 0.0 {
        return "-".to_string();
    }
    let digits = |v: f64| {
        if v >= 10.0 {
            format_rate(v).replace(' ', "")
        } else {
            format!("{v:.1}")
        }
    };
    if x >= 1.0 {
        format!("{}x", digits(x))
    } else {
        format!("1/{}", digits(1.0 / x))
    }
}

/// `950`, `12.3 k`, `4.56 M`.
pub(crate) fn format_rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.0} k", x / 1e3)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else if x >= 10.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_well() {
        assert_eq!(format_duration(Duration::from_micros(123)), "0.123 ms");
        assert_eq!(format_duration(Duration::from_micros(12_345)), "12.3 ms");
        assert_eq!(format_duration(Duration::from_millis(812)), "812 ms");
        assert_eq!(format_duration(Duration::from_millis(45_600)), "45.6 s");
        assert_eq!(format_ratio(0.5), "1/2.0");
        assert_eq!(format_ratio(1.0 / 760.0), "1/760");
        assert_eq!(format_ratio(1e-6), "1/1.00M");
        assert_eq!(format_ratio(3.04), "3.0x");
        assert_eq!(format_ratio(42.4), "42x");
        assert_eq!(format_rate(0.043), "0.043");
        assert_eq!(format_rate(2.5), "2.5");
        assert_eq!(format_rate(950.0), "950");
        assert_eq!(format_rate(1234.0), "1.2 k");
        assert_eq!(format_rate(616_000.0), "616 k");
        assert_eq!(format_rate(4_560_000.0), "4.56 M");
    }
}
