//! The blocking sort of `find`: [`basalt_query::BlockingSort`] under MongoDB's memory
//! limit, spilling under the dbpath unless the command sets `allowDiskUse: false`
//! (`allowDiskUseByDefault` is on since MongoDB 6.0), with find's wording of its errors.

use basalt_error::{Error, Result};
use basalt_query::{BlockingSort, SortSpec, BLOCKING_SORT_MEMORY_LIMIT_BYTES};
use bson::Document;
use std::path::Path;

/// Sorts the documents of a `find`, keeping the first `keep` (skip + limit) when given.
pub fn sort_for_find(
    spec: &SortSpec,
    docs: impl IntoIterator<Item = Document>,
    keep: Option<usize>,
    allow_disk_use: bool,
    dbpath: &Path,
) -> Result<Vec<Document>> {
    let spill_directory = allow_disk_use.then(|| BlockingSort::spill_directory_under(dbpath));
    let mut sort = BlockingSort::new(
        spec.clone(),
        BLOCKING_SORT_MEMORY_LIMIT_BYTES,
        spill_directory,
        keep,
    );
    let sorted = docs
        .into_iter()
        .try_for_each(|doc| sort.push(doc))
        .and_then(|()| sort.finish()?.collect::<Result<Vec<_>>>());
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
        let error = sort_for_find(&spec, docs.clone(), None, false, dir.path()).unwrap_err();
        assert_eq!(
            error.code.name(),
            "QueryExceededMemoryLimitNoDiskUseAllowed"
        );
        assert_eq!(
            error.message,
            "Executor error during find command :: caused by :: Sort exceeded memory limit of \
             104857600 bytes, but did not opt in to external sorting."
        );
        let sorted = sort_for_find(&spec, docs, None, true, dir.path()).unwrap();
        assert_eq!(sorted.len(), 101);
        assert_eq!(sorted[0].get_i32("_id").unwrap(), 100);
        assert!(BlockingSort::spill_directory_under(dir.path()).is_dir());
    }
}
