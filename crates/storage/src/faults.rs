//! What the disk engine does when the machine fails it: a full disk, a data directory
//! that turned read-only, a table whose blocks no longer match their checksums. Each
//! becomes the MongoDB error that names it, and the server goes on serving reads.
//!
//! fjall (3.1) poisons its database when a journal write or fsync fails, and when a
//! background flush or compaction fails (that worker thread then exits): every later
//! write is refused with a bare `Poisoned`, and only reopening the database clears it.
//! So once a write could not be finished, [`Faults`] refuses every write with the error
//! that named the cause. A `Poisoned` whose cause this process did not see (a background
//! worker's, which fjall only logs) is diagnosed by writing a probe file where the data
//! lives. An ingestion (tables a bulk insert writes directly) that fails does not poison
//! fjall; the tables it left behind are deleted when the database next opens.
//!
//! Reads check every block against its xxh3 checksum (lsm-tree verifies the 128-bit
//! checksum of each data, index and filter block and a 32-bit one of each block header
//! as it loads it), so a flipped byte is found on the first read of its block, not
//! returned as data.

use crate::Space;
use basalt_error::{Error, ErrorCode};
use fjall::LsmError;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The probe written to tell why fjall stopped taking writes: large enough that a disk
/// with no room for a table cannot take it either.
const PROBE_FILE_NAME: &str = "basalt-write-probe";
const PROBE_SIZE_BYTES: usize = 1 << 20;

/// What the engine was doing when fjall failed, for the error's message.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Activity {
    Opening,
    Journal,
    Ingestion,
    Sync,
    Background,
    Reading(Space),
}

impl Activity {
    fn describe(self) -> &'static str {
        match self {
            Activity::Opening => "opening the data directory",
            Activity::Journal => "writing the journal",
            Activity::Ingestion => "writing the tables of a bulk insert",
            Activity::Sync => "syncing the data to disk",
            Activity::Background => "a background flush or compaction",
            Activity::Reading(Space::Catalog) => "reading the catalog",
            Activity::Reading(Space::Records) => "reading documents",
            Activity::Reading(Space::Indexes) => "reading index entries",
            Activity::Reading(Space::Replication) => "reading the replication log",
        }
    }
}

/// The engine's data directory and whether it has stopped taking writes.
pub(crate) struct Faults {
    dbpath: PathBuf,
    refusal: OnceLock<Error>,
}

impl Faults {
    pub(crate) fn new(dbpath: &Path) -> Faults {
        Faults {
            dbpath: dbpath.to_path_buf(),
            refusal: OnceLock::new(),
        }
    }

    /// Errs with the first failure's error once writes are refused.
    pub(crate) fn check_writable(&self) -> Result<(), Error> {
        match self.refusal.get() {
            Some(refusal) => Err(refusal.clone()),
            None => Ok(()),
        }
    }

    pub(crate) fn is_refusing(&self) -> bool {
        self.refusal.get().is_some()
    }

    /// The error of a failure that poisoned fjall (a journal write or sync, or a
    /// `Poisoned` from an earlier failure): from now on every write is refused with it.
    /// Logged once, when writes stop.
    pub(crate) fn refuse(&self, e: fjall::Error, activity: Activity) -> Error {
        if let Some(refusal) = self.refusal.get() {
            return refusal.clone();
        }
        let cause = match e {
            fjall::Error::Poisoned => self.diagnose(),
            other => self.describe(&other, activity),
        };
        self.refusal
            .get_or_init(|| {
                let refusal = Error::new(
                    cause.code,
                    format!(
                        "{}; writes are refused until the server is restarted (reads go on)",
                        cause.message
                    ),
                );
                tracing::error!("storage engine stopped taking writes: {}", refusal.message);
                refusal
            })
            .clone()
    }

    /// The error of a failure that leaves fjall working: a read, an ingestion, opening.
    pub(crate) fn describe(&self, e: &fjall::Error, activity: Activity) -> Error {
        let what = format!("{} in {}", activity.describe(), self.dbpath.display());
        if let Some(io) = io_error(e) {
            return Error::io(io, what);
        }
        if is_corruption(e) {
            return Error::new(
                ErrorCode::DATA_CORRUPTION_DETECTED,
                format!("{what}: the stored data is corrupt ({e})"),
            );
        }
        if matches!(e, fjall::Error::Locked) {
            return Error::new(
                ErrorCode::DB_PATH_IN_USE,
                format!(
                    "Unable to lock the data directory {}: another server is already using it",
                    self.dbpath.display()
                ),
            );
        }
        Error::internal(format!("{what}: storage engine error ({e})"))
    }

    /// Why fjall refuses writes when this process did not see the failure: a background
    /// flush or compaction failed, and fjall only logged why. Writing a probe file where
    /// the data lives tells a full or read-only disk from anything else.
    fn diagnose(&self) -> Error {
        let probe = self.dbpath.join(PROBE_FILE_NAME);
        let written = write_probe(&probe);
        // Nothing to remove when it could not be created.
        let _ = std::fs::remove_file(&probe);
        let what = format!(
            "{} in {}",
            Activity::Background.describe(),
            self.dbpath.display()
        );
        match written {
            Err(e) => Error::io(&e, what),
            Ok(()) => Error::internal(format!("{what} failed (the server log has its error)")),
        }
    }
}

fn write_probe(path: &Path) -> std::io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    file.write_all(&vec![0; PROBE_SIZE_BYTES])?;
    file.sync_all()
}

fn io_error(e: &fjall::Error) -> Option<&std::io::Error> {
    match e {
        fjall::Error::Io(io) | fjall::Error::Storage(LsmError::Io(io)) => Some(io),
        _ => None,
    }
}

/// Whether fjall found stored bytes that do not decode: a block or journal batch whose
/// checksum does not match, a block that does not decompress, a header, trailer or tag
/// that makes no sense, or files it cannot put together.
fn is_corruption(e: &fjall::Error) -> bool {
    match e {
        fjall::Error::Storage(inner) => !matches!(inner, LsmError::Io(_)),
        fjall::Error::JournalRecovery(_)
        | fjall::Error::InvalidVersion(_)
        | fjall::Error::Decompress(_)
        | fjall::Error::InvalidTrailer
        | fjall::Error::InvalidTag(_)
        | fjall::Error::Unrecoverable => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_become_mongodb_errors() {
        let dir = tempfile::tempdir().unwrap();
        let faults = Faults::new(dir.path());
        let full = fjall::Error::Io(std::io::Error::from_raw_os_error(28));
        let described = faults.describe(&full, Activity::Ingestion);
        assert_eq!(described.code, ErrorCode::OUT_OF_DISK_SPACE);
        assert!(described.message.contains("the disk is full"));
        assert!(!faults.is_refusing(), "describing refuses nothing");

        let undecodable = fjall::Error::Storage(LsmError::InvalidTrailer);
        let corrupt = faults.describe(&undecodable, Activity::Reading(Space::Records));
        assert_eq!(corrupt.code, ErrorCode::DATA_CORRUPTION_DETECTED);
        assert!(corrupt.message.starts_with("reading documents in "));
        assert_eq!(
            faults
                .describe(&fjall::Error::Locked, Activity::Opening)
                .code,
            ErrorCode::DB_PATH_IN_USE
        );

        let read_only = fjall::Error::Io(std::io::Error::from_raw_os_error(30));
        let refusal = faults.refuse(read_only, Activity::Journal);
        assert_eq!(refusal.code, ErrorCode::ILLEGAL_OPERATION);
        assert!(refusal.message.contains("writes are refused"));
        // A later failure, whatever it is, gets the first one's error.
        let later = faults.refuse(fjall::Error::Poisoned, Activity::Journal);
        assert_eq!(later, refusal);
        assert_eq!(faults.check_writable(), Err(refusal));
    }

    #[test]
    fn an_unexplained_poisoning_is_diagnosed_with_a_probe() {
        let dir = tempfile::tempdir().unwrap();
        let faults = Faults::new(dir.path());
        // The disk takes the probe: the cause is only in fjall's log.
        let refusal = faults.refuse(fjall::Error::Poisoned, Activity::Journal);
        assert_eq!(refusal.code, ErrorCode::INTERNAL_ERROR);
        assert!(refusal.message.contains("background flush or compaction"));
        assert!(!dir.path().join(PROBE_FILE_NAME).exists());
        // A directory that is gone cannot take it: the probe's error names the cause.
        let gone = Faults::new(&dir.path().join("missing"));
        let refusal = gone.refuse(fjall::Error::Poisoned, Activity::Journal);
        assert!(
            refusal.message.contains("No such file"),
            "{}",
            refusal.message
        );
    }

    /// Flips bytes in the middle of the largest table: a scan that reaches the block gets
    /// DataCorruptionDetected, never the bytes; what lies elsewhere is still read.
    #[test]
    fn a_corrupt_block_is_reported_not_returned() {
        use crate::{Durability, Engine, FjallEngine, ScanStart, WriteBatch};
        use std::ops::ControlFlow;
        let dir = tempfile::tempdir().unwrap();
        let key = |i: u64| i.to_be_bytes().to_vec();
        {
            let engine = FjallEngine::open_with_cache(dir.path(), 1 << 20).unwrap();
            let mut batch = WriteBatch::default();
            for i in 0..20_000 {
                batch.put(Space::Records, key(i), format!("{i:0>300}").into_bytes());
            }
            engine.ingest(batch).unwrap();
            let mut catalog = WriteBatch::default();
            catalog.put(Space::Catalog, b"c".to_vec(), b"kept".to_vec());
            engine.write(catalog, Durability::Disk).unwrap();
        }
        let tables = dir.path().join("keyspaces");
        let largest = files_under(&tables)
            .into_iter()
            .filter(|path| path.parent().is_some_and(|p| p.ends_with("tables")))
            .max_by_key(|path| std::fs::metadata(path).unwrap().len())
            .unwrap();
        let mut bytes = std::fs::read(&largest).unwrap();
        let middle = bytes.len() / 2;
        for byte in &mut bytes[middle..middle + 16] {
            *byte ^= 0xFF;
        }
        std::fs::write(&largest, bytes).unwrap();

        let engine = FjallEngine::open_with_cache(dir.path(), 1 << 20).unwrap();
        let snapshot = engine.snapshot();
        let mut seen = 0u64;
        let scanned = snapshot.scan_prefix(
            Space::Records,
            b"",
            ScanStart::Beginning,
            &mut |_, value| {
                assert_eq!(value.len(), 300, "no altered value is returned");
                seen += 1;
                Ok(ControlFlow::Continue(()))
            },
        );
        let error = scanned.unwrap_err();
        assert_eq!(error.code, ErrorCode::DATA_CORRUPTION_DETECTED, "{error}");
        assert!(seen > 0 && seen < 20_000, "{seen}");
        assert_eq!(
            snapshot
                .get(Space::Records, &key(0))
                .unwrap()
                .unwrap()
                .len(),
            300
        );
        assert_eq!(
            snapshot.get(Space::Catalog, b"c").unwrap(),
            Some(b"kept".to_vec())
        );
        let mut unreadable = 0;
        for i in 0..20_000 {
            match snapshot.get(Space::Records, &key(i)) {
                Ok(value) => assert_eq!(value.map(|v| v.len()), Some(300)),
                Err(e) => {
                    assert_eq!(e.code, ErrorCode::DATA_CORRUPTION_DETECTED);
                    unreadable += 1;
                }
            }
        }
        assert!(
            unreadable > 0 && unreadable < 1000,
            "one block's records: {unreadable}"
        );
        let mut batch = WriteBatch::default();
        batch.put(Space::Records, key(20_000), b"new".to_vec());
        engine.write(batch, Durability::Process).unwrap();
    }

    fn files_under(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files.extend(files_under(&path));
            } else {
                files.push(path);
            }
        }
        files
    }
}
