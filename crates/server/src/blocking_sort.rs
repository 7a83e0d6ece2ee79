//! The blocking sort of `find`: [`basalt_query::BlockingSort`] under MongoDB's memory
//! limit, spilling under the dbpath unless the command sets `allowDiskUse: false`
//! (`allowDiskUseByDefault` is on since MongoDB 6.0), with find's wording of its errors.

use basalt_error::{Error, Result};
use basalt_query::{BlockingSort, SortSpec, SortedDocuments, BLOCKING_SORT_MEMORY_LIMIT_BYTES};
use bson::Document;
use std::path::Path;

/// Sorts the documents of a `find`, keeping the first `keep` (skip + limit) when given.
/// Documents stream in (at most the memory limit is held, the rest spilled) and the
/// sorted result streams out, merged from the spilled runs as the cursor is read.
pub fn sort_for_find(
    spec: &SortSpec,
    docs: impl IntoIterator<Item = Result<Document>>,
    keep: Option<usize>,
    allow_disk_use: bool,
    dbpath: &Path,
) -> Result<SortedDocuments> {
    let spill_directory = allow_disk_use.then(|| BlockingSort::spill_directory_under(dbpath));
    let mut sort = BlockingSort::new(
        spec.clone(),
        BLOCKING_SORT_MEMORY_LIMIT_BYTES,
        spill_directory,
        keep,
    );
    let sorted = docs
        .into_iter()
        .try_for_each(|doc| sort.push(doc?))
        .and_then(|()| sort.finish());
    sorted.map_err(|e| Error {
        message: format!(
            "Executor error during find command :: caused by :: {}",
            e.message
        ),
        ..e
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn find_words_the_error_as_mongodb() {
        let big = "x".repeat(1024 * 1024);
        let docs: Vec<Document> = (0..101).map(|i| doc! {"_id": i, "big": &big}).collect();
        let spec = SortSpec::new(&doc! {"_id": -1}).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let stream = |docs: &Vec<Document>| docs.clone().into_iter().map(Ok);
        let Err(error) = sort_for_find(&spec, stream(&docs), None, false, dir.path()) else {
            panic!("a sort over the limit without allowDiskUse must fail");
        };
        assert_eq!(
            error.code.name(),
            "QueryExceededMemoryLimitNoDiskUseAllowed"
        );
        assert_eq!(
            error.message,
            "Executor error during find command :: caused by :: Sort exceeded memory limit of \
             104857600 bytes, but did not opt in to external sorting."
        );
        let sorted: Vec<Document> = sort_for_find(&spec, stream(&docs), None, true, dir.path())
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(sorted.len(), 101);
        assert_eq!(sorted[0].get_i32("_id").unwrap(), 100);
        assert!(BlockingSort::spill_directory_under(dir.path()).is_dir());
    }
}
