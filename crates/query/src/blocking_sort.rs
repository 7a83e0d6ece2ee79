//! Blocking sorts under MongoDB's memory limit: documents are buffered and sorted in
//! memory until they exceed [`BLOCKING_SORT_MEMORY_LIMIT_BYTES`], or the server's memory
//! budget has no room for them; then, if the command allows disk use, the buffer is
//! written as a sorted run to a temporary file under the dbpath and the runs are merged
//! at the end, else the sort fails as MongoDB's does (QueryExceededMemoryLimitNoDiskUse
//! Allowed past its own limit, ExceededMemoryLimit past the budget).
//!
//! The buffer holds each document encoded, beside its sort key: a decoded document takes
//! several times its BSON size in memory, so 100 MB of buffer holds about as many
//! documents as MongoDB's does.
//!
//! A sort that only needs its first `k` results (a `limit`, plus any `skip`) keeps only
//! the best `k` documents, as MongoDB's top-k sort does, so `sort + limit` over a large
//! collection neither spills nor fails.
//!
//! [`BlockingSort`] is fed one document at a time and knows nothing of commands, so the
//! aggregation `$sort` stage can use it as `find` does: push each input document, then
//! read the merged output from [`BlockingSort::finish`]. Callers add their command's
//! context to its error ("Executor error during find command :: caused by :: ...").

use crate::SortSpec;
use basalt_error::{Error, ErrorCode, Result};
use basalt_memory::{Exceeded, StageMemory};
use basalt_value::value_memory_bytes;
use bson::{Bson, Document};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// MongoDB's internalQueryMaxBlockingSortMemoryUsageBytes: the memory a blocking sort may
/// use before it spills to disk or fails.
pub const BLOCKING_SORT_MEMORY_LIMIT_BYTES: usize = 100 * 1024 * 1024;

/// The directory under the dbpath that holds spilled sort runs (MongoDB's `_tmp`).
const SPILL_DIRECTORY: &str = "_tmp";

/// A document with the key it sorts by: encoded while it waits in the buffer, decoded
/// once read back from a run.
type Keyed = (Vec<Bson>, Held);

#[derive(Debug)]
enum Held {
    Encoded(Vec<u8>),
    Decoded(Document),
}

impl Held {
    fn into_document(self) -> Result<Document> {
        match self {
            Held::Decoded(doc) => Ok(doc),
            Held::Encoded(bytes) => Document::from_reader(&bytes[..])
                .map_err(|e| Error::internal(format!("cannot decode a sorted document: {e}"))),
        }
    }
}

/// A document waiting in the buffer: its sort key and its bytes.
type Buffered = (Vec<Bson>, Vec<u8>);

/// The memory a buffered entry holds: its key, its bytes and its place in the buffer.
fn entry_memory_bytes(key: &[Bson], bytes: &[u8]) -> usize {
    std::mem::size_of::<Buffered>()
        + key.iter().map(value_memory_bytes).sum::<usize>()
        + bytes.len()
}

/// A sort in progress.
pub struct BlockingSort {
    spec: SortSpec,
    memory: StageMemory,
    /// Where runs are spilled; `None` when the command did not allow disk use.
    spill_directory: Option<PathBuf>,
    /// How many of the first results are wanted, when not all are.
    keep: Option<usize>,
    buffered: Vec<Buffered>,
    /// Sorted runs already written, in input order (which keeps the sort stable).
    runs: Vec<File>,
}

impl BlockingSort {
    /// A sort by `spec` that may use `memory_limit_bytes`, spilling under
    /// `spill_directory` when one is given, and returning only the first `keep` results.
    pub fn new(
        spec: SortSpec,
        memory_limit_bytes: usize,
        spill_directory: Option<PathBuf>,
        keep: Option<usize>,
    ) -> BlockingSort {
        BlockingSort {
            spec,
            memory: StageMemory::new(memory_limit_bytes),
            spill_directory,
            keep,
            buffered: Vec::new(),
            runs: Vec::new(),
        }
    }

    /// The spill directory of a server whose data lives under `dbpath`.
    pub fn spill_directory_under(dbpath: &Path) -> PathBuf {
        dbpath.join(SPILL_DIRECTORY)
    }

    pub fn push(&mut self, doc: Document) -> Result<()> {
        if self.keep == Some(0) {
            return Ok(());
        }
        let key = self.spec.sort_key(&doc);
        let bytes = doc
            .to_vec()
            .map_err(|e| Error::internal(format!("cannot encode a document to sort: {e}")))?;
        let mut charged = self
            .memory
            .charge(entry_memory_bytes(&key, &bytes) as isize);
        self.buffered.push((key, bytes));
        if let Some(k) = self.keep {
            // Trimming at twice the size keeps the cost of re-sorting amortised.
            if self.buffered.len() >= k.saturating_mul(2).max(2) {
                self.sort_buffer();
                let dropped: usize = self.buffered[k..]
                    .iter()
                    .map(|(key, bytes)| entry_memory_bytes(key, bytes))
                    .sum();
                self.buffered.truncate(k);
                // Giving memory back cannot fail; what matters is where it leaves us.
                let _ = self.memory.charge(-(dropped as isize));
                if !self.memory.exceeded() {
                    charged = Ok(());
                }
            }
        }
        match charged {
            Ok(()) => Ok(()),
            Err(exceeded) => self.spill(exceeded),
        }
    }

    /// The documents in order (at most `keep` of them).
    pub fn finish(mut self) -> Result<SortedDocuments> {
        self.sort_buffer();
        if let Some(k) = self.keep {
            self.buffered.truncate(k);
        }
        let mut sources: Vec<Run> = Vec::with_capacity(self.runs.len() + 1);
        for mut file in self.runs.drain(..) {
            file.seek(SeekFrom::Start(0)).map_err(spill_error)?;
            sources.push(Run::File(BufReader::new(file)));
        }
        sources.push(Run::Memory(std::mem::take(&mut self.buffered).into_iter()));
        let mut heads = Vec::with_capacity(sources.len());
        for source in &mut sources {
            heads.push(source.next(&self.spec)?);
        }
        Ok(SortedDocuments {
            spec: self.spec,
            sources,
            heads,
            remaining: self.keep.unwrap_or(usize::MAX),
            _memory: self.memory,
        })
    }

    fn sort_buffer(&mut self) {
        let spec = &self.spec;
        self.buffered
            .sort_by(|(a, _), (b, _)| spec.compare_keys(a, b));
    }

    /// Writes the buffer as one sorted run, or fails when disk use is not allowed.
    fn spill(&mut self, exceeded: Exceeded) -> Result<()> {
        let Some(directory) = &self.spill_directory else {
            return Err(match exceeded {
                Exceeded::StageLimit => Error::new(
                    ErrorCode::QUERY_EXCEEDED_MEMORY_LIMIT_NO_DISK_USE_ALLOWED,
                    format!(
                        "Sort exceeded memory limit of {} bytes, but did not opt in to \
                         external sorting.",
                        self.memory.limit_bytes()
                    ),
                ),
                Exceeded::ServerBudget(exhausted) => exhausted.to_error("Sort"),
            });
        };
        std::fs::create_dir_all(directory).map_err(spill_error)?;
        // An unnamed file: the OS removes it when it is closed, even after a crash.
        let file = tempfile::tempfile_in(directory).map_err(spill_error)?;
        self.sort_buffer();
        if let Some(k) = self.keep {
            self.buffered.truncate(k);
        }
        let mut writer = BufWriter::new(file);
        for (_, bytes) in self.buffered.drain(..) {
            writer.write_all(&bytes).map_err(spill_error)?;
        }
        writer.flush().map_err(spill_error)?;
        self.runs.push(
            writer
                .into_inner()
                .map_err(|e| spill_error(e.into_error()))?,
        );
        self.memory.clear();
        Ok(())
    }
}

/// A full disk is OutOfDiskSpace, as mongod reports a sort that could not spill.
fn spill_error(e: std::io::Error) -> Error {
    Error::io(&e, "cannot spill a sort to disk")
}

/// One sorted sequence being merged.
enum Run {
    Memory(std::vec::IntoIter<Buffered>),
    File(BufReader<File>),
}

impl Run {
    fn next(&mut self, spec: &SortSpec) -> Result<Option<Keyed>> {
        match self {
            Run::Memory(docs) => Ok(docs.next().map(|(key, bytes)| (key, Held::Encoded(bytes)))),
            Run::File(reader) => {
                if reader.fill_buf().map_err(spill_error)?.is_empty() {
                    return Ok(None);
                }
                let doc = Document::from_reader(&mut *reader)
                    .map_err(|e| Error::internal(format!("cannot read a sort run: {e}")))?;
                Ok(Some((spec.sort_key(&doc), Held::Decoded(doc))))
            }
        }
    }
}

/// The merged output of a [`BlockingSort`].
pub struct SortedDocuments {
    spec: SortSpec,
    sources: Vec<Run>,
    /// The next document of each source.
    heads: Vec<Option<Keyed>>,
    remaining: usize,
    /// The buffer's share of the server's memory, given back when the output is dropped.
    _memory: StageMemory,
}

impl Iterator for SortedDocuments {
    type Item = Result<Document>;

    fn next(&mut self) -> Option<Result<Document>> {
        if self.remaining == 0 {
            return None;
        }
        // Runs are few (one per memory limit's worth of data), so a linear pick is cheap;
        // on ties the earlier run wins, which keeps the merge stable.
        let mut best: Option<usize> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some((key, _)) = head else { continue };
            let better = best.is_none_or(|b| {
                let (best_key, _) = self.heads[b].as_ref().expect("best has a head");
                self.spec.compare_keys(key, best_key) == std::cmp::Ordering::Less
            });
            if better {
                best = Some(i);
            }
        }
        let i = best?;
        let (_, doc) = self.heads[i].take()?;
        match self.sources[i].next(&self.spec) {
            Ok(head) => self.heads[i] = head,
            Err(e) => return Some(Err(e)),
        }
        self.remaining -= 1;
        Some(doc.into_document())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn ids(docs: impl IntoIterator<Item = Result<Document>>) -> Vec<i32> {
        docs.into_iter()
            .map(|d| d.unwrap().get_i32("_id").unwrap())
            .collect()
    }

    /// Documents whose `k` values repeat, so that a stable sort is visible.
    fn input() -> Vec<Document> {
        (0..50)
            .map(|i| doc! {"_id": i, "k": (i * 7) % 10, "pad": "x".repeat(100)})
            .collect()
    }

    fn expected(keep: Option<usize>) -> Vec<i32> {
        let spec = SortSpec::new(&doc! {"k": -1}).unwrap();
        let mut docs = input();
        spec.sort_by_document(&mut docs, |d| d);
        let all: Vec<i32> = docs.iter().map(|d| d.get_i32("_id").unwrap()).collect();
        all.into_iter().take(keep.unwrap_or(usize::MAX)).collect()
    }

    fn sort(limit_bytes: usize, keep: Option<usize>, dir: &Path) -> (Vec<i32>, usize) {
        let spec = SortSpec::new(&doc! {"k": -1}).unwrap();
        let mut sort = BlockingSort::new(spec, limit_bytes, Some(dir.to_path_buf()), keep);
        for doc in input() {
            sort.push(doc).unwrap();
        }
        let runs = sort.runs.len();
        (ids(sort.finish().unwrap()), runs)
    }

    #[test]
    fn spills_runs_and_merges_them_stably() {
        let dir = tempfile::tempdir().unwrap();
        let (in_memory, runs) = sort(BLOCKING_SORT_MEMORY_LIMIT_BYTES, None, dir.path());
        assert_eq!(runs, 0);
        assert_eq!(in_memory, expected(None));
        // About 140 bytes per document: a run every seven documents or so.
        let (spilled, runs) = sort(1000, None, dir.path());
        assert!(runs >= 5, "{runs} runs");
        assert_eq!(spilled, expected(None));
    }

    #[test]
    fn keeps_only_the_first_results() {
        let dir = tempfile::tempdir().unwrap();
        let (top, runs) = sort(BLOCKING_SORT_MEMORY_LIMIT_BYTES, Some(5), dir.path());
        assert_eq!(runs, 0);
        assert_eq!(top, expected(Some(5)));
        let (spilled_top, _) = sort(1000, Some(12), dir.path());
        assert_eq!(spilled_top, expected(Some(12)));
        assert!(sort(1000, Some(0), dir.path()).0.is_empty());
        // Ten entries of ~370 bytes (a ~140-byte document, its key, its slot) fit in
        // 5000 bytes: top-k never needs the disk.
        assert_eq!(sort(5000, Some(5), dir.path()).1, 0);
    }

    #[test]
    fn fails_without_disk_use() {
        let spec = SortSpec::new(&doc! {"k": 1}).unwrap();
        let mut sort = BlockingSort::new(spec, 1000, None, None);
        let error = input()
            .into_iter()
            .try_for_each(|doc| sort.push(doc))
            .unwrap_err();
        assert_eq!(error.code.0, 292);
        assert_eq!(
            error.message,
            "Sort exceeded memory limit of 1000 bytes, but did not opt in to external sorting."
        );
    }
}
