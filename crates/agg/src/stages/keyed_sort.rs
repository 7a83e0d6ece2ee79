//! Documents sorted by a key computed for each (a `$group` key, a `$setWindowFields`
//! partition), in a sort that holds 100 MB and spills sorted runs to disk beyond that
//! (`basalt_query::BlockingSort`), or fails with 292 when the command refuses disk use.
//!
//! Each document travels as `{k: {v: key}, d: document}`: wrapped in a document, keys
//! compare as whole values (an array key as an array, not by its smallest element as a
//! sort field would), in the order `$group` and partitions use. The sort is stable, so
//! documents with equal keys come out in input order.

use basalt_error::{Error, Result};
use basalt_query::{BlockingSort, SortSpec, SortedDocuments, BLOCKING_SORT_MEMORY_LIMIT_BYTES};
use basalt_value::Collation;
use bson::{doc, Bson, Document};
use std::iter::Peekable;
use std::path::PathBuf;

pub(crate) struct KeyedSort(BlockingSort);

impl KeyedSort {
    /// A sort spilling under `spill_directory`, or failing at the limit without one;
    /// string keys compare under `collation`.
    pub(crate) fn new(
        spill_directory: Option<PathBuf>,
        collation: Option<&Collation>,
    ) -> Result<KeyedSort> {
        Ok(KeyedSort(BlockingSort::new(
            SortSpec::new(&doc! {"k": 1})?.with_collation(collation),
            BLOCKING_SORT_MEMORY_LIMIT_BYTES,
            spill_directory,
            None,
        )))
    }

    pub(crate) fn push(&mut self, key: Bson, doc: Document) -> Result<()> {
        self.0.push(doc! {"k": {"v": key}, "d": doc})
    }

    pub(crate) fn finish(self) -> Result<KeyedDocuments> {
        Ok(KeyedDocuments(self.0.finish()?.peekable()))
    }
}

/// The sorted `(key, document)` pairs.
pub(crate) struct KeyedDocuments(Peekable<SortedDocuments>);

impl KeyedDocuments {
    /// The key of the next document, if any.
    pub(crate) fn peek_key(&mut self) -> Result<Option<Bson>> {
        match self.0.peek() {
            None => Ok(None),
            Some(Err(_)) => Err(self
                .0
                .next()
                .and_then(Result::err)
                .expect("peeked an error")),
            Some(Ok(wrapped)) => wrapped
                .get_document("k")
                .ok()
                .and_then(|k| k.get("v"))
                .cloned()
                .map(Some)
                .ok_or_else(|| Error::internal("a sorted document lost its key")),
        }
    }

    /// The next document (its key was peeked).
    pub(crate) fn next_document(&mut self) -> Result<Option<Document>> {
        let Some(mut wrapped) = self.0.next().transpose()? else {
            return Ok(None);
        };
        match wrapped.remove("d") {
            Some(Bson::Document(doc)) => Ok(Some(doc)),
            _ => Err(Error::internal("a sorted document lost its body")),
        }
    }
}
