//! Initial sync: a copy of a member's data as of one log entry (Raft's snapshot), written
//! to a file, sent to a member that needs entries the log no longer holds (a new member,
//! or one that was away longer than the oplog reaches back), and loaded there in place of
//! its data.
//!
//! A copy holds every key of the catalog, records and indexes spaces and the replicated
//! part of the replication space (what has been applied, the config, the membership and
//! the table of retryable writes), read from one engine snapshot, so it is consistent
//! with the applied entry it names. It is streamed to and from disk, never held in
//! memory. A member that has no data yet loads it by ingestion (sorted tables written
//! directly, as `basalt import` does); one that has data deletes it and writes the copy
//! in batches. A marker makes a load that a crash interrupted start over from nothing.

use crate::log_store::{read_error, write_error};
use basalt_storage::{Durability, Engine, ScanStart, Snapshot, Space, WriteBatch};
use openraft::StorageError;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// The first bytes of a copy, with the format's version.
const MAGIC: &[u8; 8] = b"BSLTSYN1";
/// Marks the end of the records; the count of records follows.
const END: u8 = 0xFF;
/// Bytes of records loaded per batch (each ingested batch is a table of its own).
const LOAD_BATCH_BYTES: usize = 128 << 20;
/// Keys deleted per batch when a member's old data is cleared.
const CLEAR_BATCH_KEYS: usize = 10_000;

/// The spaces copied whole.
const DATA_SPACES: [Space; 3] = [Space::Catalog, Space::Records, Space::Indexes];

/// Keys of the replication space that are replicated state (the rest — the log, the
/// vote, the member's identity — belong to the member).
pub(crate) const REPLICATED_KEYS: [&[u8]; 3] = [b"applied", b"membership", b"config"];
/// The prefix of the replicated keys of the table of retryable writes.
pub(crate) const SESSION_PREFIX: &[u8] = b"session/";

/// Where a member keeps its copies: `replication-snapshots` in its data directory.
pub(crate) fn directory(dbpath: &Path) -> PathBuf {
    dbpath.join("replication-snapshots")
}

/// A file name no other copy has: `prefix-<nanoseconds>`.
pub(crate) fn new_file(directory: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(directory)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Ok(directory.join(format!("{prefix}-{nanos}")))
}

/// The name of a copy written or received whole begins with this; the others are
/// being written (or were, when a crash stopped them).
pub(crate) const COPY_PREFIX: &str = "snapshot-";

/// Deletes the files of `directory` that `doomed` picks.
fn remove_files(directory: &Path, doomed: impl Fn(&Path, &str) -> bool) {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if doomed(&path, &name.to_string_lossy()) {
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!("cannot remove {}: {e}", path.display());
            }
        }
    }
}

/// Deletes the copies `keep` supersedes (one being sent stays readable through its open
/// file).
pub(crate) fn remove_superseded(directory: &Path, keep: &Path) {
    remove_files(directory, |path, name| {
        name.starts_with(COPY_PREFIX) && path != keep
    });
}

/// Deletes what a crash left half written or received (at start, before Raft runs).
pub(crate) fn remove_unfinished(directory: &Path) {
    remove_files(directory, |_, name| !name.starts_with(COPY_PREFIX));
}

/// Called with each record of a copy: its space, key and value.
type RecordVisitor<'a> = dyn FnMut(Space, &[u8], &[u8]) -> std::io::Result<()> + 'a;

/// Visits every key and value of the copy: the data spaces whole, then the replicated
/// keys of the replication space.
fn visit_copied(
    snapshot: &dyn Snapshot,
    visit: &mut RecordVisitor<'_>,
) -> Result<(), StorageError<u64>> {
    let mut failure = None;
    let mut scan = |space: Space, prefix: &[u8]| {
        snapshot
            .scan_prefix(
                space,
                prefix,
                ScanStart::Beginning,
                &mut |key, value| match visit(space, key, value) {
                    Ok(()) => Ok(ControlFlow::Continue(())),
                    Err(e) => {
                        failure = Some(e);
                        Ok(ControlFlow::Break(()))
                    }
                },
            )
            .map_err(read_error)
    };
    for space in DATA_SPACES {
        scan(space, b"")?;
    }
    scan(Space::Replication, SESSION_PREFIX)?;
    for key in REPLICATED_KEYS {
        if let Some(value) = snapshot.get(Space::Replication, key).map_err(read_error)? {
            visit(Space::Replication, key, &value).map_err(write_error)?;
        }
    }
    failure.map_or(Ok(()), |e| Err(write_error(e)))
}

/// Writes the copy of `snapshot` to `path`, synced; returns the number of records.
pub(crate) fn write(snapshot: &dyn Snapshot, path: &Path) -> Result<u64, StorageError<u64>> {
    let file = File::create(path).map_err(write_error)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    out.write_all(MAGIC).map_err(write_error)?;
    let mut count = 0u64;
    visit_copied(snapshot, &mut |space, key, value| {
        out.write_all(&[space.position() as u8])?;
        write_bytes(&mut out, key)?;
        write_bytes(&mut out, value)?;
        count += 1;
        Ok(())
    })?;
    out.write_all(&[END]).map_err(write_error)?;
    out.write_all(&count.to_le_bytes()).map_err(write_error)?;
    let file = out.into_inner().map_err(write_error)?;
    file.sync_all().map_err(write_error)?;
    Ok(count)
}

fn write_bytes(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    let length = u32::try_from(bytes.len()).map_err(std::io::Error::other)?;
    out.write_all(&length.to_le_bytes())?;
    out.write_all(bytes)
}

fn read_bytes(input: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut length = [0u8; 4];
    input.read_exact(&mut length)?;
    let mut bytes = vec![0u8; u32::from_le_bytes(length) as usize];
    input.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Whether the member holds no data at all (a new member): then the copy is ingested.
fn holds_no_data(engine: &dyn Engine) -> Result<bool, StorageError<u64>> {
    let snapshot = engine.snapshot();
    for space in DATA_SPACES {
        let mut any = false;
        snapshot
            .scan_prefix(space, b"", ScanStart::Beginning, &mut |_, _| {
                any = true;
                Ok(ControlFlow::Break(()))
            })
            .map_err(read_error)?;
        if any {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Deletes the member's data and replicated state (what a copy replaces).
pub(crate) fn clear(engine: &dyn Engine) -> Result<(), StorageError<u64>> {
    let mut batch = WriteBatch::default();
    let flush = |batch: &mut WriteBatch| {
        engine
            .write(std::mem::take(batch), Durability::Process)
            .map_err(write_error)
    };
    let snapshot = engine.snapshot();
    visit_copied(&*snapshot, &mut |space, key, _| {
        batch.delete(space, key.to_vec());
        if batch.ops.len() >= CLEAR_BATCH_KEYS {
            flush(&mut batch).map_err(std::io::Error::other)?;
        }
        Ok(())
    })?;
    flush(&mut batch)
}

/// Loads the copy at `path` in place of the member's data. The replication space's
/// records are written last, with `last` (the marker's removal), so the member counts
/// the copy as applied only once all of it is stored. Returns the number of records.
pub(crate) fn load(
    engine: &dyn Engine,
    path: &Path,
    last: WriteBatch,
) -> Result<u64, StorageError<u64>> {
    let fresh = holds_no_data(engine)?;
    if !fresh {
        clear(engine)?;
    }
    let mut input = BufReader::with_capacity(1 << 20, File::open(path).map_err(read_error)?);
    let mut magic = [0u8; 8];
    input.read_exact(&mut magic).map_err(read_error)?;
    if &magic != MAGIC {
        return Err(read_error("not a replica set copy (bad magic bytes)"));
    }
    let mut data = WriteBatch::default();
    let mut data_bytes = 0usize;
    let mut replicated = last;
    let mut count = 0u64;
    let store = |batch: WriteBatch| {
        if fresh {
            engine.ingest(batch).map_err(write_error)
        } else {
            engine
                .write(batch, Durability::Process)
                .map_err(write_error)
        }
    };
    loop {
        let mut tag = [0u8; 1];
        input.read_exact(&mut tag).map_err(read_error)?;
        if tag[0] == END {
            break;
        }
        let space = Space::ALL
            .get(usize::from(tag[0]))
            .copied()
            .ok_or_else(|| read_error(format!("a copy's record in space {}", tag[0])))?;
        let key = read_bytes(&mut input).map_err(read_error)?;
        let value = read_bytes(&mut input).map_err(read_error)?;
        count += 1;
        if space == Space::Replication {
            replicated.put(space, key, value);
            continue;
        }
        data_bytes += key.len() + value.len();
        data.put(space, key, value);
        if data_bytes >= LOAD_BATCH_BYTES {
            store(std::mem::take(&mut data))?;
            data_bytes = 0;
        }
    }
    let mut expected = [0u8; 8];
    input.read_exact(&mut expected).map_err(read_error)?;
    if u64::from_le_bytes(expected) != count {
        return Err(read_error("a replica set copy that is cut short"));
    }
    if !data.is_empty() {
        store(data)?;
    }
    engine
        .write(replicated, Durability::Disk)
        .map_err(write_error)?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_storage::MemoryEngine;

    fn engine_with(records: &[(Space, &[u8], &[u8])]) -> MemoryEngine {
        let engine = MemoryEngine::default();
        let mut batch = WriteBatch::default();
        for (space, key, value) in records {
            batch.put(*space, key.to_vec(), value.to_vec());
        }
        engine.write(batch, Durability::Process).unwrap();
        engine
    }

    fn all(engine: &dyn Engine, space: Space) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        engine
            .snapshot()
            .scan_prefix(space, b"", ScanStart::Beginning, &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
        out
    }

    #[test]
    fn a_copy_replaces_data_and_replicated_state_but_not_the_members_own() {
        let source = engine_with(&[
            (Space::Catalog, b"c1", b"meta"),
            (Space::Records, b"r1", b"doc1"),
            (Space::Records, b"r2", b"doc2"),
            (Space::Indexes, b"i1", b""),
            (Space::Replication, b"applied", b"A"),
            (Space::Replication, b"session/x", b"S"),
            (Space::Replication, b"log/1", b"entry"),
            (Space::Replication, b"vote", b"V"),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("copy");
        assert_eq!(write(&*source.snapshot(), &path).unwrap(), 6);

        // A member with data of its own: the copy replaces it.
        let target = engine_with(&[
            (Space::Records, b"r0", b"old"),
            (Space::Records, b"r1", b"stale"),
            (Space::Replication, b"session/y", b"T"),
            (Space::Replication, b"vote", b"mine"),
            (Space::Replication, b"installing", b""),
        ]);
        let mut last = WriteBatch::default();
        last.delete(Space::Replication, b"installing".to_vec());
        assert_eq!(load(&target, &path, last).unwrap(), 6);
        assert_eq!(all(&target, Space::Records), all(&source, Space::Records));
        assert_eq!(all(&target, Space::Catalog), all(&source, Space::Catalog));
        assert_eq!(all(&target, Space::Indexes), all(&source, Space::Indexes));
        let replication: Vec<Vec<u8>> = all(&target, Space::Replication)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            replication,
            vec![b"applied".to_vec(), b"session/x".to_vec(), b"vote".to_vec()]
        );

        // A new member ingests it.
        let empty = MemoryEngine::default();
        load(&empty, &path, WriteBatch::default()).unwrap();
        assert_eq!(all(&empty, Space::Records), all(&source, Space::Records));
    }

    #[test]
    fn a_truncated_copy_is_refused() {
        let source = engine_with(&[(Space::Records, b"r1", b"doc1")]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("copy");
        write(&*source.snapshot(), &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert!(load(&MemoryEngine::default(), &path, WriteBatch::default()).is_err());
        std::fs::write(&path, b"garbage!garbage").unwrap();
        assert!(load(&MemoryEngine::default(), &path, WriteBatch::default()).is_err());
    }
}
