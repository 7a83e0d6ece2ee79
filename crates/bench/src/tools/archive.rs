//! mongodump's archive format (`--archive`): one stream holding every collection's
//! metadata, then their documents in segments that may interleave, each namespace
//! closed by an EOF header with the CRC-64 (ECMA, as Go's `hash/crc64`) of its
//! documents. The format is the Database Tools' own (`mongo-tools/common/archive/
//! spec.md`), so archives pass between `basalt dump`/`restore` and
//! `mongodump`/`mongorestore`.

use crate::raw_wire::as_i64;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Document, RawDocumentBuf};
use std::collections::HashMap;
use std::io::{Read, Write};

const MAGIC: u32 = 0x8199_e26d;
const TERMINATOR: u32 = 0xffff_ffff;
/// The archive format's one version.
const FORMAT_VERSION: &str = "0.1";

/// Go's `crc64.MakeTable(crc64.ECMA)` with its `Checksum`: CRC-64/XZ.
const CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_XZ);

/// A collection's entry in the archive's prelude.
#[derive(Clone, Debug, PartialEq)]
pub struct CollectionEntry {
    pub db: String,
    pub collection: String,
    /// The collection's `metadata.json` text (canonical Extended JSON).
    pub metadata: String,
    /// Its documents' bytes.
    pub size: i64,
    /// "collection", "view" or "timeseries" (mongodump's), "" for the oplog.
    pub kind: String,
}

pub struct ArchiveWriter<W: Write> {
    out: W,
    digests: HashMap<(String, String), crc::Digest<'static, u64>>,
}

fn write_error(e: std::io::Error) -> Error {
    crate::io_error("cannot write the archive", e)
}

impl<W: Write> ArchiveWriter<W> {
    /// Starts an archive: its header and every collection's metadata.
    pub fn new(
        mut out: W,
        server_version: &str,
        parallel: i32,
        entries: &[CollectionEntry],
    ) -> Result<ArchiveWriter<W>> {
        out.write_all(&MAGIC.to_le_bytes()).map_err(write_error)?;
        let header = doc! {
            "concurrent_collections": parallel,
            "version": FORMAT_VERSION,
            "server_version": server_version,
            "tool_version": format!("basalt {}", env!("CARGO_PKG_VERSION")),
        };
        let mut writer = ArchiveWriter {
            out,
            digests: HashMap::new(),
        };
        writer.document(&header)?;
        for entry in entries {
            writer.document(&doc! {
                "db": &entry.db,
                "collection": &entry.collection,
                "metadata": &entry.metadata,
                "size": i32::try_from(entry.size).unwrap_or(i32::MAX),
                "type": &entry.kind,
            })?;
        }
        writer.terminator()?;
        Ok(writer)
    }

    fn document(&mut self, document: &Document) -> Result<()> {
        let raw = RawDocumentBuf::try_from(document)?;
        self.out.write_all(raw.as_bytes()).map_err(write_error)
    }

    fn terminator(&mut self) -> Result<()> {
        self.out
            .write_all(&TERMINATOR.to_le_bytes())
            .map_err(write_error)
    }

    /// A segment of `db.collection`'s documents (`data`: whole BSON documents, one
    /// after another).
    pub fn segment(&mut self, db: &str, collection: &str, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.document(&doc! { "db": db, "collection": collection, "EOF": false, "CRC": 0_i64 })?;
        self.out.write_all(data).map_err(write_error)?;
        self.terminator()?;
        self.digests
            .entry((db.to_string(), collection.to_string()))
            .or_insert_with(|| CRC.digest())
            .update(data);
        Ok(())
    }

    /// Closes `db.collection`: no segment of it follows.
    pub fn end(&mut self, db: &str, collection: &str) -> Result<()> {
        let crc = self
            .digests
            .remove(&(db.to_string(), collection.to_string()))
            .map_or(0, |digest| digest.finalize());
        self.document(
            &doc! { "db": db, "collection": collection, "EOF": true, "CRC": crc as i64 },
        )?;
        self.terminator()
    }

    pub fn finish(mut self) -> Result<W> {
        self.out.flush().map_err(write_error)?;
        Ok(self.out)
    }
}

/// What reading an archive yields after its prelude.
#[derive(Debug)]
pub enum Event {
    /// Documents of a namespace, in order.
    Documents {
        db: String,
        collection: String,
        documents: Vec<RawDocumentBuf>,
    },
    /// The namespace is complete (its CRC checked).
    End { db: String, collection: String },
}

pub struct ArchiveReader<R: Read> {
    input: R,
    digests: HashMap<(String, String), crc::Digest<'static, u64>>,
}

fn corrupt(message: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::FAILED_TO_PARSE,
        format!("not a valid archive: {message}"),
    )
}

impl<R: Read> ArchiveReader<R> {
    /// Reads the prelude: the header and every collection's entry.
    pub fn open(mut input: R) -> Result<(ArchiveReader<R>, Document, Vec<CollectionEntry>)> {
        let mut magic = [0u8; 4];
        input
            .read_exact(&mut magic)
            .map_err(|e| corrupt(format!("no magic number ({e})")))?;
        if u32::from_le_bytes(magic) != MAGIC {
            return Err(corrupt("wrong magic number"));
        }
        let mut reader = ArchiveReader {
            input,
            digests: HashMap::new(),
        };
        let header = reader
            .next_document()?
            .ok_or_else(|| corrupt("no header"))?;
        let header = Document::try_from(header.as_ref())?;
        let mut entries = Vec::new();
        while let Some(entry) = reader.next_document()? {
            let entry = Document::try_from(entry.as_ref())?;
            let text = |field: &str| entry.get_str(field).unwrap_or_default().to_string();
            entries.push(CollectionEntry {
                db: text("db"),
                collection: text("collection"),
                metadata: text("metadata"),
                size: entry.get("size").and_then(as_i64).unwrap_or(0),
                kind: text("type"),
            });
        }
        Ok((reader, header, entries))
    }

    /// The next document, or `None` at a terminator.
    fn next_document(&mut self) -> Result<Option<RawDocumentBuf>> {
        match read_next(&mut self.input)? {
            Next::Document(document) => Ok(Some(document)),
            Next::Terminator => Ok(None),
            Next::End => Err(corrupt("cut short")),
        }
    }

    /// The next segment or end of a namespace; `None` at the end of the archive.
    pub fn next_event(&mut self) -> Result<Option<Event>> {
        let header = match read_next(&mut self.input)? {
            Next::End => return Ok(None),
            Next::Terminator => return Err(corrupt("a terminator where a namespace belongs")),
            Next::Document(header) => header,
        };
        let header = Document::try_from(header.as_ref())?;
        let db = header.get_str("db").unwrap_or_default().to_string();
        let collection = header.get_str("collection").unwrap_or_default().to_string();
        let key = (db.clone(), collection.clone());
        if header.get_bool("EOF").unwrap_or(false) {
            if self.next_document()?.is_some() {
                return Err(corrupt("no terminator after an EOF header"));
            }
            let expected = header.get("CRC").and_then(as_i64).unwrap_or(0) as u64;
            let crc = self
                .digests
                .remove(&key)
                .map_or(0, |digest| digest.finalize());
            if crc != expected {
                return Err(corrupt(format!(
                    "CRC mismatch for {db}.{collection}: {crc} != {expected}"
                )));
            }
            return Ok(Some(Event::End { db, collection }));
        }
        let mut documents = Vec::new();
        while let Some(document) = self.next_document()? {
            self.digests
                .entry(key.clone())
                .or_insert_with(|| CRC.digest())
                .update(document.as_bytes());
            documents.push(document);
        }
        Ok(Some(Event::Documents {
            db,
            collection,
            documents,
        }))
    }
}

/// What comes next in a stream of length-prefixed BSON documents (an archive, a dump's
/// `.bson` file).
pub(crate) enum Next {
    Document(RawDocumentBuf),
    /// mongodump's 0xffffffff, which ends a prelude or a segment.
    Terminator,
    /// The stream ended cleanly, between documents.
    End,
}

/// Reads the next document (or terminator) of a BSON stream; a stream that ends inside
/// a document, or a length no document has, is damaged.
pub(crate) fn read_next<R: Read + ?Sized>(input: &mut R) -> Result<Next> {
    let damaged = |detail: String| {
        Error::new(
            ErrorCode::FAILED_TO_PARSE,
            format!("damaged BSON: {detail}"),
        )
    };
    let mut length = [0u8; 4];
    let mut got = 0;
    while got < length.len() {
        match input.read(&mut length[got..]) {
            Ok(0) if got == 0 => return Ok(Next::End),
            Ok(0) => return Err(damaged("cut short".into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(damaged(e.to_string())),
        }
    }
    let n = u32::from_le_bytes(length);
    if n == TERMINATOR {
        return Ok(Next::Terminator);
    }
    if !(5..=48 << 20).contains(&n) {
        return Err(damaged(format!("a document of {n} bytes")));
    }
    let mut bytes = length.to_vec();
    bytes.resize(n as usize, 0);
    input
        .read_exact(&mut bytes[4..])
        .map_err(|e| damaged(format!("cut short ({e})")))?;
    Ok(Next::Document(RawDocumentBuf::from_bytes(bytes)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_read_back_with_interleaved_segments_and_checked_crcs() {
        let entry = |c: &str| CollectionEntry {
            db: "d".into(),
            collection: c.into(),
            metadata: "{}".into(),
            size: 10,
            kind: String::new(),
        };
        let doc_bytes = |n: i32| {
            RawDocumentBuf::try_from(&doc! {"n": n})
                .unwrap()
                .into_bytes()
        };
        let mut writer =
            ArchiveWriter::new(Vec::new(), "7.0.0", 2, &[entry("a"), entry("b")]).unwrap();
        writer.segment("d", "a", &doc_bytes(1)).unwrap();
        writer.segment("d", "b", &doc_bytes(2)).unwrap();
        writer
            .segment("d", "a", &[doc_bytes(3), doc_bytes(4)].concat())
            .unwrap();
        writer.end("d", "a").unwrap();
        writer.end("d", "b").unwrap();
        let bytes = writer.finish().unwrap();

        let (mut reader, header, entries) = ArchiveReader::open(&bytes[..]).unwrap();
        assert_eq!(header.get_str("version").unwrap(), "0.1");
        assert_eq!(entries, vec![entry("a"), entry("b")]);
        let mut seen = Vec::new();
        while let Some(event) = reader.next_event().unwrap() {
            seen.push(match event {
                Event::Documents {
                    collection,
                    documents,
                    ..
                } => format!("{collection}{}", documents.len()),
                Event::End { collection, .. } => format!("{collection}."),
            });
        }
        assert_eq!(seen, ["a1", "b1", "a2", "a.", "b."]);

        // A flipped byte in a document fails its namespace's CRC.
        let mut damaged = bytes.clone();
        let at = damaged.len() - 60;
        damaged[at] ^= 1;
        let (mut reader, _, _) = ArchiveReader::open(&damaged[..]).unwrap();
        let outcome = std::iter::from_fn(|| reader.next_event().transpose()).find(|e| e.is_err());
        assert!(outcome.is_some());
    }
}
