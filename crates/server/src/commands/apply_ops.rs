//! `applyOps`: document operations in MongoDB's oplog form (`op` `i`/`u`/`d`/`n`,
//! `ns`, `o`, `o2`), applied all together or not at all. A committed transaction
//! reaches the log as one (`transactions.rs`).
//!
//! The operations run through the collections' ordinary write path inside a write
//! scope (`basalt_storage::Buffered`), so each sees the ones before it, and what they
//! wrote is stored as one batch at the end; on a replica set member the batch carries
//! the entry's id (`basalt_repl::StampedEngine`), so a crash leaves all of it or none.
//! A delete or replacement may carry `preImageHash`, the hash of the version of the
//! document it was computed from (Basalt's own field, used by transactions): when the
//! stored document is no longer that version, nothing is applied and the command fails
//! with WriteConflict.
//!
//! An update is a whole-document replacement (`o` the new document, `o2` its `_id`) or,
//! as in MongoDB 5+'s oplog, `o: {$v: 2, diff}` (`basalt_catalog::oplog::apply_diff`):
//! so the entries of Basalt's `local.oplog.rs` replay here, as `mongorestore
//! --oplogReplay` replays them. Older update forms (`$set`/`$unset`) are refused rather
//! than half supported.
//!
//! Catalog entries (`op: "c"`, `ns: "<db>.$cmd"`) may create collections (`o: {create:
//! <name>, <options>}`) and their indexes (`o: {createIndexes: <name>, <index spec>}`,
//! mongod's form), as a transaction that created them commits. They join the same
//! atomic batch: the collections (and those an insert creates) stay uncommitted
//! (`basalt_catalog::Uncommitted`) until the batch is stored, so a failed `applyOps`
//! leaves no collection behind. An index goes only on a collection the same `applyOps`
//! created, before its first document; a collection that exists already is
//! NamespaceExists.
//!
//! The commit entry of a transaction too large for one entry says `stagedChunks: n`:
//! the first operations wait in `config.system.transactionChunks` (`transactions.rs`),
//! and are applied first, then deleted, all in the same batch.

use super::Ctx;
use basalt_catalog::{with_uncommitted, Uncommitted};
use basalt_error::{Error, ErrorCode, Result};
use basalt_storage::{with_write_scope, Buffered, Durability};
use bson::{doc, Bson, Document};
use std::sync::Arc;

/// One operation.
enum Operation {
    Insert(Document),
    Replace {
        id: Bson,
        document: Document,
        pre_image_hash: Option<i64>,
    },
    /// `{$v: 2, diff}`.
    Update {
        id: Bson,
        diff: Document,
    },
    Delete {
        id: Bson,
        pre_image_hash: Option<i64>,
    },
    /// `create` or `createIndexes`, as the command body to run.
    Catalog(Document),
    Noop,
}

struct Op {
    db: String,
    collection: String,
    operation: Operation,
}

fn parse(entry: &Bson) -> Result<Op> {
    let Bson::Document(entry) = entry else {
        return Err(Error::failed_to_parse("applyOps entries must be objects"));
    };
    let kind = entry
        .get_str("op")
        .map_err(|_| Error::failed_to_parse("applyOps entry needs a string field 'op'"))?;
    let ns = entry.get_str("ns").unwrap_or("");
    let (db, collection) = ns.split_once('.').unwrap_or((ns, ""));
    let object = || {
        entry
            .get_document("o")
            .cloned()
            .map_err(|_| Error::failed_to_parse("applyOps entry needs an object field 'o'"))
    };
    let pre_image_hash = match entry.get("preImageHash") {
        None => None,
        Some(Bson::Int64(hash)) => Some(*hash),
        Some(_) => return Err(Error::type_mismatch("preImageHash must be a long")),
    };
    let id_of = |document: &Document| {
        document
            .get("_id")
            .cloned()
            .ok_or_else(|| Error::failed_to_parse("applyOps entry without an _id"))
    };
    let operation = match kind {
        "i" => {
            let document = object()?;
            id_of(&document)?;
            Operation::Insert(document)
        }
        "u" => {
            let document = object()?;
            let target = entry
                .get_document("o2")
                .map_err(|_| Error::failed_to_parse("applyOps 'u' entry needs an object 'o2'"))?;
            let id = id_of(target)?;
            match (document.get("$v"), document.get("diff")) {
                (Some(version), Some(Bson::Document(diff)))
                    if basalt_value::as_i64(version) == Some(2) =>
                {
                    Operation::Update {
                        id,
                        diff: diff.clone(),
                    }
                }
                _ if document.keys().any(|key| key.starts_with('$')) => {
                    return Err(Error::bad_value(
                        "applyOps: a 'u' entry is a replacement or {$v: 2, diff: {...}}",
                    ))
                }
                _ => Operation::Replace {
                    id,
                    document,
                    pre_image_hash,
                },
            }
        }
        "d" => Operation::Delete {
            id: id_of(&object()?)?,
            pre_image_hash,
        },
        "n" => Operation::Noop,
        "c" => return parse_catalog_change(db, object()?),
        other => {
            return Err(Error::bad_value(format!(
                "applyOps: unsupported operation type '{other}'"
            )))
        }
    };
    if !matches!(operation, Operation::Noop) && (db.is_empty() || collection.is_empty()) {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            format!("applyOps: invalid namespace '{ns}'"),
        ));
    }
    Ok(Op {
        db: db.to_string(),
        collection: collection.to_string(),
        operation,
    })
}

/// An `op: "c"` entry: `o` is `{create: <name>, <options>}` or `{createIndexes: <name>,
/// <index spec>}`.
fn parse_catalog_change(db: &str, change: Document) -> Result<Op> {
    let (command, collection) =
        match change.iter().next() {
            Some((command, Bson::String(collection)))
                if command == "create" || command == "createIndexes" =>
            {
                (command.clone(), collection.clone())
            }
            _ => return Err(Error::bad_value(
                "applyOps: a 'c' entry is {create: <name>, ...} or {createIndexes: <name>, ...}",
            )),
        };
    if db.is_empty() || collection.is_empty() {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            format!("applyOps: invalid namespace '{db}.{collection}'"),
        ));
    }
    let body = match command.as_str() {
        "create" => change,
        _ => {
            let mut spec = change;
            spec.remove("createIndexes");
            doc! { "createIndexes": &collection, "indexes": [spec] }
        }
    };
    Ok(Op {
        db: db.to_string(),
        collection,
        operation: Operation::Catalog(body),
    })
}

pub fn apply_ops(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let entries = body
        .get_array("applyOps")
        .map_err(|_| Error::failed_to_parse("applyOps needs an array of operations"))?;
    let (mut ops, staged) = staged_operations(ctx, body)?;
    for entry in entries {
        ops.push(parse(entry)?);
    }
    ops.extend(staged);
    let catalog = &ctx.server.catalog;
    let engine = catalog.engine().clone();
    let writes = Arc::new(Buffered::new(Arc::from(engine.snapshot()), false));
    let created = Arc::new(Uncommitted::default());
    let applied = with_write_scope(writes.clone(), || {
        with_uncommitted(created.clone(), || {
            ops.iter().try_for_each(|op| apply(ctx, op))
        })
    })
    .and_then(|()| engine.write(writes.take().into_batch(), Durability::Process));
    if applied.is_ok() {
        catalog.publish(&created);
    }
    if let Err(e) = applied {
        // The collections counted writes that were not stored.
        for op in &ops {
            if let Some(collection) = catalog.get(&op.db, &op.collection) {
                collection.forget_counts();
            }
        }
        return Err(e);
    }
    Ok(doc! {
        "applied": ops.len() as i32,
        "results": vec![Bson::Boolean(true); ops.len()],
    })
}

/// The operations of a chained commit's staged chunks, in order, and the deletes of
/// the chunks' documents; none without `stagedChunks`.
fn staged_operations(ctx: &Ctx<'_>, body: &Document) -> Result<(Vec<Op>, Vec<Op>)> {
    use crate::transactions::{chunk_id, CHUNKS_COLLECTION, CHUNKS_DB};
    let Some(count) = body.get("stagedChunks") else {
        return Ok((Vec::new(), Vec::new()));
    };
    let count = basalt_value::as_i64(count)
        .filter(|n| (1..=i64::from(i32::MAX)).contains(n))
        .ok_or_else(|| Error::bad_value("applyOps: stagedChunks must be a positive number"))?;
    let (Ok(lsid), Some(txn_number)) = (
        body.get_document("lsid"),
        body.get("txnNumber").and_then(basalt_value::as_i64),
    ) else {
        return Err(Error::failed_to_parse(
            "applyOps: stagedChunks needs the transaction's lsid and txnNumber",
        ));
    };
    let ids: Vec<Bson> = (0..count as i32)
        .map(|seq| Bson::Document(chunk_id(lsid, txn_number, seq)))
        .collect();
    let mut ops = Vec::new();
    for id in &ids {
        // One at a time: a reply holds 16 MB, a chunk up to a quarter of that.
        let found = super::find_internal(
            ctx.server,
            CHUNKS_DB,
            CHUNKS_COLLECTION,
            doc! { "_id": id.clone() },
        )?;
        let chunk = found.first().ok_or_else(|| {
            Error::new(
                ErrorCode::NO_SUCH_TRANSACTION,
                format!("applyOps: a staged chunk of the transaction is missing: {id}"),
            )
        })?;
        let entries = chunk
            .get_array("applyOps")
            .map_err(|_| Error::failed_to_parse("applyOps: a staged chunk without operations"))?;
        for entry in entries {
            ops.push(parse(entry)?);
        }
    }
    let deletes = ids
        .into_iter()
        .map(|id| Op {
            db: CHUNKS_DB.to_string(),
            collection: CHUNKS_COLLECTION.to_string(),
            operation: Operation::Delete {
                id,
                pre_image_hash: None,
            },
        })
        .collect();
    Ok((ops, deletes))
}

/// Runs a `create` or `createIndexes` entry through its command, its arguments checked
/// as a client's are.
fn apply_catalog_change(ctx: &Ctx<'_>, op: &Op, body: &Document) -> Result<()> {
    let ctx = &Ctx { db: &op.db, ..*ctx };
    let name = body.keys().next().map(String::as_str).unwrap_or_default();
    super::arguments::check(name, body)?;
    if name == "create" {
        if ctx.server.catalog.get(&op.db, &op.collection).is_some() {
            return Err(Error::new(
                ErrorCode::NAMESPACE_EXISTS,
                format!(
                    "applyOps: collection {}.{} already exists",
                    op.db, op.collection
                ),
            ));
        }
        return super::create::create(ctx, body).map(drop);
    }
    super::create_indexes::create_indexes(ctx, body).map(drop)
}

fn changed_since() -> Error {
    Error::new(
        ErrorCode::WRITE_CONFLICT,
        "applyOps: a document changed since the version the operation was computed from",
    )
}

/// Applies one operation in the scope.
fn apply(ctx: &Ctx<'_>, op: &Op) -> Result<()> {
    let catalog = &ctx.server.catalog;
    let (id, pre_image_hash) = match &op.operation {
        Operation::Noop => return Ok(()),
        Operation::Catalog(body) => return apply_catalog_change(ctx, op, body),
        Operation::Insert(document) => {
            let outcome = catalog.write(&op.db, &op.collection, true, |writer| {
                let outcomes = writer.insert_many(&[document], true, Durability::Process)?;
                outcomes.into_iter().next().unwrap_or(Ok(0)).map(|_| ())
            })?;
            return outcome.ok_or_else(|| Error::internal("applyOps: collection vanished"));
        }
        Operation::Replace {
            id, pre_image_hash, ..
        }
        | Operation::Delete { id, pre_image_hash } => (id, *pre_image_hash),
        Operation::Update { id, .. } => (id, None),
    };
    let written = catalog.write(&op.db, &op.collection, false, |writer| {
        let collection = writer.collection();
        let meta = collection.meta();
        let id_index = meta
            .indexes
            .iter()
            .find(|index| index.is_id_index())
            .ok_or_else(|| Error::internal("a collection without an _id index"))?;
        let snapshot = collection.snapshot();
        let record_id = collection
            .lookup_index(&*snapshot, id_index, std::slice::from_ref(id))?
            .first()
            .copied();
        let stored = match record_id {
            Some(record_id) => collection.get_record_bytes(&*snapshot, record_id)?,
            None => None,
        };
        let (Some(record_id), Some(stored)) = (record_id, stored) else {
            // Deleted meanwhile: a transaction's operation conflicts; a plain one has
            // nothing to do, as mongod's applyOps.
            return match pre_image_hash {
                Some(_) => Err(changed_since()),
                None => Ok(()),
            };
        };
        if pre_image_hash.is_some_and(|hash| hash != crate::transactions::pre_image_hash(&stored)) {
            return Err(changed_since());
        }
        let old = Document::from_reader(stored.as_slice())?;
        match &op.operation {
            Operation::Replace { document, .. } => {
                writer.replace(record_id, &old, document, Durability::Process)
            }
            Operation::Update { diff, .. } => {
                let mut new = old.clone();
                basalt_catalog::oplog::apply_diff(&mut new, diff)
                    .map_err(|e| Error::bad_value(format!("applyOps: {e}")))?;
                writer.replace(record_id, &old, &new, Durability::Process)
            }
            _ => writer.delete(record_id, &old, Durability::Process),
        }
    })?;
    match (written, pre_image_hash) {
        (None, Some(_)) => Err(changed_since()),
        _ => Ok(()),
    }
}
