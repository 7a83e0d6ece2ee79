//! `validate`: reads every record of a collection and checks that each index has exactly
//! the entries the documents call for.

use super::Ctx;
use crate::request::Fields;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Bson, Document};
use std::ops::ControlFlow;

pub fn validate(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = Fields::new(body).collection()?;
    let namespace = format!("{}.{name}", ctx.db);
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("Collection '{namespace}' does not exist to validate."),
        ));
    };
    let meta = collection.meta();
    let snapshot = collection.snapshot();
    let mut records = 0i64;
    let mut errors: Vec<String> = Vec::new();
    let mut keys_per_index = vec![0i64; meta.indexes.len()];
    collection.scan(&*snapshot, None, &mut |record_id, raw| {
        records += 1;
        let doc = match Document::try_from(raw) {
            Ok(doc) => doc,
            Err(e) => {
                errors.push(format!("record {record_id} is not valid BSON: {e}"));
                return Ok(ControlFlow::Continue(()));
            }
        };
        for (i, index) in meta.indexes.iter().enumerate() {
            for key in index.keys_for(&doc)? {
                keys_per_index[i] += 1;
                if !collection
                    .lookup_index(&*snapshot, index, &key.values)?
                    .contains(&record_id)
                {
                    errors.push(format!(
                        "index {} lacks an entry for record {record_id}",
                        index.name
                    ));
                }
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    let mut per_index = Document::new();
    for (index, keys) in meta.indexes.iter().zip(&keys_per_index) {
        per_index.insert(index.name.clone(), *keys);
    }
    Ok(doc! {
        "ns": namespace,
        "nInvalidDocuments": 0_i64,
        "nNonCompliantDocuments": 0_i64,
        "nrecords": records,
        "nIndexes": meta.indexes.len() as i32,
        "keysPerIndex": per_index,
        "valid": errors.is_empty(),
        "repaired": false,
        "warnings": Vec::<Bson>::new(),
        "errors": errors,
        "extraIndexEntries": Vec::<Bson>::new(),
        "missingIndexEntries": Vec::<Bson>::new(),
        "corruptRecords": Vec::<Bson>::new(),
    })
}
