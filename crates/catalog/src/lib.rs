//! The catalog: which databases and collections exist, their ids, options and indexes,
//! persisted in the storage engine's catalog space and cached in memory.
//!
//! Databases and collections come into being implicitly on first write, as in MongoDB;
//! a database exists while it has a collection. Catalog changes (create, drop, rename)
//! are serialised by one lock; data changes go through each collection's [`Writer`].

mod capped;
mod collection;
mod column_store;
mod geo_index;
mod index;
mod index_builds;
mod keys;
mod latency_stats;
mod namespace;
pub mod oplog;
mod plan_cache;
#[cfg(test)]
mod testing;
mod ttl;
mod uncommitted;
mod validate;

pub use capped::CappedBounds;
use collection::{delete_prefix, delete_record_ids};

/// Deletes an index's entries (and a column store's write markers, kept apart).
fn delete_index_data(engine: &dyn Engine, index: &IndexSpec) -> Result<()> {
    delete_prefix(engine, Space::Indexes, &index.id.to_be_bytes())?;
    if index.is_column_store() {
        delete_prefix(
            engine,
            Space::Catalog,
            &column_store::marker_prefix(index.id),
        )?;
    }
    Ok(())
}
pub use collection::{
    duplicate_key_error, Collection, CollectionMeta, CollectionStats, DiskSizes, InsertOutcome,
    Writer,
};
pub use column_store::{
    is_column_store, set_chunk_cache_limit, ColumnStoreView, CHUNK_CACHE_BYTES_MAX, COLUMN_STORE,
    RECORD_IDS_PATH, ROW_GROUP_SPAN_BITS,
};
pub use geo_index::{is_geo, GeoIndex, GEO_CELL_FIELD, SPHERE_BUCKET, SPHERE_INDEX_VERSION};
pub use index::{
    hashed_value, is_hashed, DocumentKeys, IndexKey, IndexSpec, PartialFilter, Wildcard,
    TEXT_KEY_FIELD, TEXT_SCORE_KEY_FIELD, WILDCARD_PATH_FIELD,
};
pub use index_builds::IndexBuildProgress;
pub use latency_stats::{LatencyStats, OperationClass};
pub use namespace::{
    validate_collection_name, validate_database_name, DATABASE_NAME_LENGTH_MAX_BYTES,
    NAMESPACE_LENGTH_MAX_BYTES,
};
pub use plan_cache::{CachedFrom, CachedPlan, IndexFilter, PlanCache};
pub use ttl::expired_filter;
pub use uncommitted::{with_uncommitted, Uncommitted};
pub use validate::{IndexValidation, Validation};

use basalt_error::{Error, ErrorCode, Result};
use basalt_storage::{Durability, Engine, ScanStart, Space, WriteBatch};
use bson::Document;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;

type Namespace = (String, String);

pub struct Catalog {
    engine: Arc<dyn Engine>,
    collections: RwLock<BTreeMap<Namespace, Arc<Collection>>>,
    /// Serialises catalog changes and hands out ids.
    ddl: Mutex<u64>,
    builds: index_builds::IndexBuilds,
}

impl Catalog {
    /// Loads the catalog from the engine.
    pub fn open(engine: Arc<dyn Engine>) -> Result<Catalog> {
        let (collections, next_id) = Self::load(&engine)?;
        Ok(Catalog {
            engine,
            collections: RwLock::new(collections),
            ddl: Mutex::new(next_id),
            builds: index_builds::IndexBuilds::default(),
        })
    }

    /// Reads the catalog from the engine again, after the data under it was replaced
    /// (a replica set member that loaded a copy of the primary's data).
    pub fn reload(&self) -> Result<()> {
        let mut ddl = self.ddl.lock();
        let (collections, next_id) = Self::load(&self.engine)?;
        *self.collections.write() = collections;
        *ddl = next_id;
        Ok(())
    }

    /// The collections stored in the engine, and the next id to hand out.
    fn load(engine: &Arc<dyn Engine>) -> Result<(BTreeMap<Namespace, Arc<Collection>>, u64)> {
        let snapshot = engine.snapshot();
        let next_id = match snapshot.get(Space::Catalog, keys::NEXT_ID_KEY)? {
            Some(bytes) => u64::from_be_bytes(
                bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| Error::internal("corrupt id counter in catalog"))?,
            ),
            None => 1,
        };
        let mut metas = Vec::new();
        snapshot.scan_prefix(
            Space::Catalog,
            &keys::collection_meta_prefix(),
            ScanStart::Beginning,
            &mut |_, value| {
                let doc = Document::from_reader(value)
                    .map_err(|e| Error::internal(format!("corrupt catalog: {e}")))?;
                metas.push(CollectionMeta::from_catalog_document(&doc)?);
                Ok(ControlFlow::Continue(()))
            },
        )?;
        let mut collections = BTreeMap::new();
        for meta in metas {
            let ns = (meta.db.clone(), meta.name.clone());
            collections.insert(ns, Arc::new(Collection::open(engine.clone(), meta)?));
        }
        Ok((collections, next_id))
    }

    /// The index builds running now (for `$currentOp`).
    pub fn index_builds(&self) -> Vec<IndexBuildProgress> {
        self.builds.list()
    }

    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// The collection `db.collection`: this thread's uncommitted one first (see
    /// `uncommitted.rs`), else the catalog's.
    pub fn get(&self, db: &str, collection: &str) -> Option<Arc<Collection>> {
        if let Some(created) = uncommitted::created(db, collection) {
            return Some(created);
        }
        self.collections
            .read()
            .get(&(db.to_string(), collection.to_string()))
            .cloned()
    }

    /// The collection, created with default options when missing (implicit creation on
    /// first write).
    pub fn get_or_create(&self, db: &str, collection: &str) -> Result<Arc<Collection>> {
        if let Some(existing) = self.get(db, collection) {
            return Ok(existing);
        }
        match self.create(db, collection, Document::new()) {
            Ok(created) => Ok(created),
            Err(e) if e.code == ErrorCode::NAMESPACE_EXISTS => self
                .get(db, collection)
                .ok_or_else(|| Error::internal("collection vanished while being created")),
            Err(e) => Err(e),
        }
    }

    /// Runs `write` holding the write lock of the live collection `db.name`, created
    /// first when missing if `create` (else `None` when missing). A collection dropped
    /// or renamed while the caller waited for its lock is looked up again, so no write
    /// lands in a collection that no longer has this name.
    pub fn write<T>(
        &self,
        db: &str,
        collection: &str,
        create: bool,
        mut write: impl FnMut(&mut Writer<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        loop {
            let target = match self.get(db, collection) {
                Some(existing) => existing,
                None if create => self.get_or_create(db, collection)?,
                None => return Ok(None),
            };
            let mut writer = target.writer();
            let meta = target.meta();
            if target.is_retired() || meta.db != db || meta.name != collection {
                continue;
            }
            return write(&mut writer).map(Some);
        }
    }

    /// Creates a collection; NamespaceExists if it is already there. Inside
    /// [`with_uncommitted`], the collection stays this thread's until published.
    pub fn create(&self, db: &str, collection: &str, options: Document) -> Result<Arc<Collection>> {
        validate_collection_name(db, collection)?;
        let mut next_id = self.ddl.lock();
        if self.get(db, collection).is_some() {
            return Err(Error::new(
                ErrorCode::NAMESPACE_EXISTS,
                format!("Collection {db}.{collection} already exists."),
            ));
        }
        let provisional = uncommitted::provisional_ids(2);
        let collection_id = provisional.unwrap_or(*next_id);
        // A clustered collection names its `_id` index in its options.
        let id_index_name = options
            .get_document("clusteredIndex")
            .ok()
            .and_then(|c| c.get_str("name").ok())
            .unwrap_or(IndexSpec::ID_INDEX_NAME);
        let id_index = IndexSpec::id_index(collection_id + 1, id_index_name);
        if provisional.is_none() {
            *next_id += 2;
        }
        let meta = CollectionMeta {
            id: collection_id,
            db: db.to_string(),
            name: collection.to_string(),
            uuid: bson::Uuid::new(),
            options,
            indexes: vec![id_index],
        };
        let mut batch = WriteBatch::default();
        batch.put(
            Space::Catalog,
            keys::NEXT_ID_KEY.to_vec(),
            next_id.to_be_bytes().to_vec(),
        );
        batch.put(
            Space::Catalog,
            keys::collection_meta_key(db, collection),
            meta.to_catalog_document().to_vec()?,
        );
        oplog::command(
            &mut batch,
            db,
            Some(meta.uuid),
            bson::doc! { "create": collection },
        );
        self.engine.write(batch, Durability::Process)?;
        let created = Arc::new(Collection::open(self.engine.clone(), meta)?);
        match uncommitted::current() {
            Some(uncommitted) => uncommitted.add(created.clone()),
            None => {
                self.collections
                    .write()
                    .insert((db.to_string(), collection.to_string()), created.clone());
            }
        }
        Ok(created)
    }

    /// Makes the collections of `uncommitted` part of the catalog, once the write scope
    /// they were created in is stored.
    pub fn publish(&self, uncommitted: &Uncommitted) {
        let _ddl = self.ddl.lock();
        let mut collections = self.collections.write();
        for created in uncommitted.take() {
            let meta = created.meta();
            collections.insert((meta.db.clone(), meta.name.clone()), created.clone());
        }
    }

    /// Drops a collection and all its data; false when it did not exist.
    pub fn drop_collection(&self, db: &str, collection: &str) -> Result<bool> {
        let _ddl = self.ddl.lock();
        let Some(existing) = self.get(db, collection) else {
            return Ok(false);
        };
        // Wait for a writer in flight, then make later writers look the name up again.
        let writer = existing.writer();
        existing.retire();
        let meta = existing.meta();
        let mut batch = WriteBatch::default();
        batch.delete(Space::Catalog, keys::collection_meta_key(db, collection));
        // The marker of an ingestion that failed, if any: nothing will complete it now.
        batch.delete(Space::Catalog, keys::ingestion_marker_key(meta.id));
        oplog::command(
            &mut batch,
            db,
            Some(meta.uuid),
            bson::doc! { "drop": collection },
        );
        self.engine.write(batch, Durability::Process)?;
        self.collections
            .write()
            .remove(&(db.to_string(), collection.to_string()));
        drop(writer);
        match self.delete_data(&meta) {
            // A corrupt collection can still be dropped (and restored from a backup): its
            // records are deleted by id past an unreadable block, and only index entries
            // in an unreadable block stay on disk, where nothing can reach them.
            Err(e) if e.code == ErrorCode::DATA_CORRUPTION_DETECTED => {
                tracing::warn!(
                    collection = %meta.namespace(),
                    "dropped; part of its data could not be read to be deleted: {}",
                    e.message
                );
                Ok(true)
            }
            deleted => deleted.map(|()| true),
        }
    }

    /// Deletes a collection's records and index entries, going on past what cannot be
    /// read; the first failure is returned at the end.
    fn delete_data(&self, meta: &CollectionMeta) -> Result<()> {
        let engine = &*self.engine;
        let mut failures = Vec::new();
        if let Err(e) = delete_prefix(engine, Space::Records, &keys::record_prefix(meta.id)) {
            // Records need no reading to be deleted: their ids come from the `_id` index.
            failures.extend(delete_record_ids(engine, meta).err());
            failures.push(e);
        }
        for index in &meta.indexes {
            failures.extend(delete_index_data(engine, index).err());
        }
        failures.into_iter().next().map_or(Ok(()), Err)
    }

    /// Adds an index to a collection, building its entries from the existing documents.
    /// Writers wait while it builds.
    /// Inside [`with_uncommitted`] (a transaction), only an empty collection created
    /// there takes new indexes, as in MongoDB.
    pub fn add_index(&self, collection: &Collection, mut spec: IndexSpec) -> Result<()> {
        // Catalog lock before the collection's write lock, as in drop and rename.
        let mut next_id = self.ddl.lock();
        check_live(collection)?;
        if let Some(uncommitted) = uncommitted::current() {
            let ns = collection.meta().namespace();
            let refuse = |what: &str| {
                Err(Error::new(
                    ErrorCode::OPERATION_NOT_SUPPORTED_IN_TRANSACTION,
                    format!(
                        "Cannot create new indexes on {what} collection {ns} in a \
                         multi-document transaction."
                    ),
                ))
            };
            if !uncommitted.holds(collection) {
                return refuse("existing");
            }
            if !collection.is_empty()? {
                return refuse("non-empty");
            }
        }
        let provisional = uncommitted::provisional_ids(1);
        spec.id = provisional.unwrap_or(*next_id);
        if provisional.is_none() {
            *next_id += 1;
        }
        let mut writer = collection.writer();
        let meta = collection.meta();
        let build = self.builds.start(
            spec.id,
            IndexBuildProgress {
                namespace: meta.namespace(),
                index_name: spec.name.clone(),
                key: spec.key.clone(),
                done: 0,
                total: collection.record_id_high_water(),
            },
        );
        spec.multikey = writer.build_index(&spec, &mut |done| build.advance(done))?;
        drop(build);
        let mut meta = (*collection.meta()).clone();
        let change = bson::doc! { "createIndexes": &meta.name, "spec": spec.to_list_document() };
        meta.indexes.push(spec);
        let next_id = provisional.is_none().then_some(*next_id);
        self.write_meta(collection, meta, next_id, Some(change))
    }

    /// Replaces a collection's options (collMod).
    pub fn set_options(&self, collection: &Collection, options: Document) -> Result<()> {
        let _ddl = self.ddl.lock();
        check_live(collection)?;
        // Writers also change the metadata (an index turning multikey).
        let _writer = collection.writer();
        let mut meta = (*collection.meta()).clone();
        meta.options = options;
        let change = bson::doc! { "collMod": &meta.name };
        self.write_meta(collection, meta, None, Some(change))
    }

    /// Sets (or, with `None`, removes) an index's `expireAfterSeconds` (collMod);
    /// returns the previous value.
    pub fn set_index_expiry(
        &self,
        collection: &Collection,
        name: &str,
        seconds: Option<i64>,
    ) -> Result<Option<i64>> {
        self.modify_index(collection, name, |index| {
            std::mem::replace(&mut index.expire_after_seconds, seconds)
        })
    }

    /// Hides an index from the planner or shows it again (`collMod`); returns whether
    /// it was hidden.
    pub fn set_index_hidden(
        &self,
        collection: &Collection,
        name: &str,
        hidden: bool,
    ) -> Result<bool> {
        self.modify_index(collection, name, |index| {
            std::mem::replace(&mut index.hidden, hidden)
        })
    }

    /// Changes the spec of the index `name` with `change`, durably; returns what
    /// `change` returned.
    pub fn modify_index<R>(
        &self,
        collection: &Collection,
        name: &str,
        change: impl FnOnce(&mut IndexSpec) -> R,
    ) -> Result<R> {
        let _ddl = self.ddl.lock();
        check_live(collection)?;
        let _writer = collection.writer();
        let mut meta = (*collection.meta()).clone();
        let Some(index) = meta.indexes.iter_mut().find(|i| i.name == name) else {
            return Err(Error::new(
                ErrorCode::INDEX_NOT_FOUND,
                format!("index not found with name [{name}]"),
            ));
        };
        let result = change(index);
        let index = index.to_list_document();
        let change = bson::doc! { "collMod": &meta.name, "index": index };
        self.write_meta(collection, meta, None, Some(change))?;
        Ok(result)
    }

    /// Removes an index and its entries.
    pub fn remove_index(&self, collection: &Collection, name: &str) -> Result<()> {
        let _ddl = self.ddl.lock();
        check_live(collection)?;
        let _writer = collection.writer();
        let mut meta = (*collection.meta()).clone();
        let Some(position) = meta.indexes.iter().position(|i| i.name == name) else {
            return Err(Error::new(
                ErrorCode::INDEX_NOT_FOUND,
                format!("index not found with name [{name}]"),
            ));
        };
        let removed = meta.indexes.remove(position);
        let change = bson::doc! { "dropIndexes": &meta.name, "spec": removed.to_list_document() };
        self.write_meta(collection, meta, None, Some(change))?;
        delete_index_data(&*self.engine, &removed)
    }

    /// Persists a collection's changed metadata (and the id counter, when it moved), with
    /// the oplog record of the `change` that made it; the caller holds the catalog lock.
    fn write_meta(
        &self,
        collection: &Collection,
        meta: CollectionMeta,
        next_id: Option<u64>,
        change: Option<Document>,
    ) -> Result<()> {
        let mut batch = WriteBatch::default();
        if let Some(next) = next_id {
            batch.put(
                Space::Catalog,
                keys::NEXT_ID_KEY.to_vec(),
                next.to_be_bytes().to_vec(),
            );
        }
        batch.put(
            Space::Catalog,
            keys::collection_meta_key(&meta.db, &meta.name),
            meta.to_catalog_document().to_vec()?,
        );
        if let Some(change) = change {
            oplog::command(&mut batch, &meta.db, Some(meta.uuid), change);
        }
        self.engine.write(batch, Durability::Process)?;
        collection.set_meta(meta);
        Ok(())
    }

    /// Drops every collection of a database.
    pub fn drop_database(&self, db: &str) -> Result<()> {
        for name in self.collection_names(db) {
            self.drop_collection(db, &name)?;
        }
        let mut batch = WriteBatch::default();
        oplog::command(&mut batch, db, None, bson::doc! { "dropDatabase": 1 });
        if batch.is_empty() {
            return Ok(());
        }
        self.engine.write(batch, Durability::Process)
    }

    /// Renames a collection, within or across databases. With `drop_target`, an existing
    /// target is dropped first; otherwise it is NamespaceExists.
    pub fn rename(&self, from: (&str, &str), to: (&str, &str), drop_target: bool) -> Result<()> {
        validate_collection_name(to.0, to.1)?;
        let dropped_target = self.get(to.0, to.1).map(|target| target.meta().uuid);
        if dropped_target.is_some() {
            if !drop_target {
                return Err(Error::new(
                    ErrorCode::NAMESPACE_EXISTS,
                    "target namespace exists",
                ));
            }
            self.drop_collection(to.0, to.1)?;
        }
        let _ddl = self.ddl.lock();
        let Some(source) = self.get(from.0, from.1) else {
            return Err(Error::new(
                ErrorCode::NAMESPACE_NOT_FOUND,
                "source namespace does not exist",
            ));
        };
        let writer = source.writer();
        let mut meta = (*source.meta()).clone();
        meta.db = to.0.to_string();
        meta.name = to.1.to_string();
        let mut batch = WriteBatch::default();
        batch.delete(Space::Catalog, keys::collection_meta_key(from.0, from.1));
        batch.put(
            Space::Catalog,
            keys::collection_meta_key(to.0, to.1),
            meta.to_catalog_document().to_vec()?,
        );
        let mut rename = bson::doc! {
            "renameCollection": format!("{}.{}", from.0, from.1),
            "to": meta.namespace(),
        };
        if let Some(uuid) = dropped_target {
            rename.insert("dropTarget", uuid);
        }
        oplog::command(&mut batch, from.0, Some(meta.uuid), rename);
        self.engine.write(batch, Durability::Process)?;
        // Records are keyed by collection id, so a rename moves no data: the same
        // collection object lives on under its new name.
        source.set_meta(meta);
        let mut collections = self.collections.write();
        collections.remove(&(from.0.to_string(), from.1.to_string()));
        collections.insert((to.0.to_string(), to.1.to_string()), source.clone());
        drop(writer);
        Ok(())
    }

    pub fn database_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .collections
            .read()
            .keys()
            .map(|(db, _)| db.clone())
            .collect();
        names.dedup();
        names
    }

    pub fn collection_names(&self, db: &str) -> Vec<String> {
        self.collections
            .read()
            .keys()
            .filter(|(d, _)| d == db)
            .map(|(_, c)| c.clone())
            .collect()
    }

    pub fn collections_of(&self, db: &str) -> Vec<Arc<Collection>> {
        self.collections
            .read()
            .iter()
            .filter(|((d, _), _)| d == db)
            .map(|(_, c)| c.clone())
            .collect()
    }
}

/// Refuses metadata changes to a collection dropped since the caller looked it up (it
/// would otherwise bring its catalog entry back).
fn check_live(collection: &Collection) -> Result<()> {
    if collection.is_retired() {
        let meta = collection.meta();
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("collection {} was dropped", meta.namespace()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_storage::MemoryEngine;
    use bson::doc;

    fn catalog() -> Catalog {
        Catalog::open(Arc::new(MemoryEngine::default())).unwrap()
    }

    #[test]
    fn insert_scan_and_duplicate_ids() {
        let cat = catalog();
        let coll = cat.get_or_create("test", "c").unwrap();
        let docs = vec![
            doc! {"_id": 1},
            doc! {"_id": 2},
            doc! {"_id": 1.0},
            doc! {"_id": 3},
        ];
        let outcomes = coll
            .writer()
            .insert_many(&docs, false, Durability::Process)
            .unwrap();
        assert!(outcomes[0].is_ok() && outcomes[1].is_ok() && outcomes[3].is_ok());
        let err = outcomes[2].clone().unwrap_err();
        assert_eq!(err.code, ErrorCode::DUPLICATE_KEY);
        assert_eq!(
            err.extra.get_document("keyPattern").unwrap(),
            &doc! {"_id": 1}
        );
        assert!(
            err.message.contains("dup key: { _id: 1.0 }")
                || err.message.contains("dup key: { _id: 1")
        );

        let ordered = coll
            .writer()
            .insert_many(
                &[doc! {"_id": 4}, doc! {"_id": 2}, doc! {"_id": 5}],
                true,
                Durability::Process,
            )
            .unwrap();
        assert_eq!(ordered.len(), 2, "ordered insert stops at the first error");

        let snap = coll.snapshot();
        let mut ids = Vec::new();
        coll.scan(&*snap, None, &mut |_, raw| {
            ids.push(raw.get("_id").unwrap().unwrap().as_i32().unwrap());
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        assert_eq!(ids, vec![1, 2, 3, 4], "natural order is insertion order");
        let id_index = coll.meta().indexes[0].clone();
        assert_eq!(
            coll.lookup_index(&*snap, &id_index, &[bson::Bson::Int64(3)])
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn raw_inserts_check_ids_below_and_above_the_stored_ones() {
        let cat = catalog();
        let coll = cat.get_or_create("test", "c").unwrap();
        let raw = |docs: &[Document]| -> Vec<bson::RawDocumentBuf> {
            docs.iter()
                .map(|d| bson::RawDocumentBuf::try_from(d).unwrap())
                .collect()
        };
        let insert = |docs: &[Document]| {
            coll.writer()
                .insert_many_raw(&raw(docs), false, Durability::Process)
                .unwrap()
                .iter()
                .map(|o| o.as_ref().map(|_| ()).map_err(|e| e.code))
                .collect::<Vec<_>>()
        };
        let dup = Err(ErrorCode::DUPLICATE_KEY);
        assert_eq!(
            insert(&[doc! {"_id": 10}, doc! {"_id": 20}]),
            vec![Ok(()); 2]
        );
        // Below the greatest stored key (looked up), equal to it, past it, and repeated
        // within the batch past it (which only the batch itself knows about).
        assert_eq!(
            insert(&[
                doc! {"_id": 15, "a": 1},
                doc! {"_id": 10.0},
                doc! {"_id": 20},
                doc! {"_id": 30},
                doc! {"_id": 30},
            ]),
            vec![Ok(()), dup, dup, Ok(()), dup]
        );
        let snap = coll.snapshot();
        let mut stored = Vec::new();
        coll.scan(&*snap, None, &mut |_, raw| {
            stored.push(Document::try_from(raw).unwrap());
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        assert_eq!(
            stored,
            vec![
                doc! {"_id": 10},
                doc! {"_id": 20},
                doc! {"_id": 15, "a": 1},
                doc! {"_id": 30}
            ],
            "raw documents are stored as they came"
        );
        assert_eq!(coll.stats().unwrap().count, 4);
    }

    /// Documents of about 1 KiB each, enough of them to be ingested: `a` repeats, `u` is
    /// unique, `m` is an array.
    fn bulk(ids: std::ops::Range<i32>) -> Vec<bson::RawDocumentBuf> {
        let filler = "x".repeat(1000);
        ids.map(|i| {
            let doc = doc! {"_id": i, "a": i % 7, "u": i, "m": [i, -i - 1], "f": &filler};
            bson::RawDocumentBuf::try_from(&doc).unwrap()
        })
        .collect()
    }

    /// Indexes on `a`, `u` (unique) and `m` (becomes multikey); returns them.
    fn bulk_indexes(cat: &Catalog, coll: &Collection) -> Vec<IndexSpec> {
        for (field, unique) in [("a", false), ("u", true), ("m", false)] {
            let mut spec = IndexSpec::id_index(0, &format!("{field}_1"));
            spec.key = doc! {field: 1};
            spec.unique = unique;
            cat.add_index(coll, spec).unwrap();
        }
        coll.meta().indexes[1..].to_vec()
    }

    fn lookup(coll: &Collection, index: &IndexSpec, value: i32) -> Vec<u64> {
        let snap = coll.snapshot();
        coll.lookup_index(&*snap, index, &[bson::Bson::Int32(value)])
            .unwrap()
    }

    fn fjall(dir: &std::path::Path) -> Arc<dyn Engine> {
        Arc::new(basalt_storage::FjallEngine::open_with_cache(dir, 64 << 20).unwrap())
    }

    #[test]
    fn large_batches_are_ingested_with_their_index_entries() {
        let dir = tempfile::tempdir().unwrap();
        let memory: Arc<dyn Engine> = Arc::new(MemoryEngine::default());
        for engine in [memory, fjall(dir.path())] {
            let cat = Catalog::open(engine).unwrap();
            let coll = cat.get_or_create("test", "c").unwrap();
            let indexes = bulk_indexes(&cat, &coll);
            // 6000 documents (~6 MB, past the ingestion threshold), then a repeated `u`.
            let mut docs = bulk(0..6000);
            docs.push(bson::RawDocumentBuf::try_from(&doc! {"_id": -1, "u": 17}).unwrap());
            let outcomes = coll
                .writer()
                .insert_many_raw(&docs, false, Durability::Process)
                .unwrap();
            assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 6000);
            let dup = outcomes[6000].clone().unwrap_err();
            assert_eq!(dup.code, ErrorCode::DUPLICATE_KEY);
            assert!(dup.message.contains("index: u_1"), "{}", dup.message);
            let id_index = coll.meta().indexes[0].clone();
            assert_eq!(lookup(&coll, &id_index, 5999).len(), 1);
            assert_eq!(
                lookup(&coll, &indexes[0], 3).len(),
                (0..6000).filter(|i| i % 7 == 3).count()
            );
            assert_eq!(lookup(&coll, &indexes[1], 4321).len(), 1);
            assert_eq!(lookup(&coll, &indexes[2], -4322).len(), 1);
            assert!(coll.meta().indexes[3].multikey, "written with the marker");
            assert_eq!(coll.stats().unwrap().count, 6000);
            let snap = coll.snapshot();
            let marker = keys::ingestion_marker_key(coll.meta().id);
            assert!(snap.get(Space::Catalog, &marker).unwrap().is_none());
        }
    }

    #[test]
    fn an_interrupted_ingestion_is_completed_when_the_catalog_opens() {
        let dir = tempfile::tempdir().unwrap();
        let memory: Arc<dyn Engine> = Arc::new(MemoryEngine::default());
        // The memory engine "reopens" as itself; fjall is opened again from its files.
        let reopen_memory = move || memory.clone();
        let reopen_fjall = || fjall(dir.path());
        for reopen in [
            &reopen_memory as &dyn Fn() -> Arc<dyn Engine>,
            &reopen_fjall,
        ] {
            let engine = reopen();
            let cat = Catalog::open(engine.clone()).unwrap();
            let coll = cat.get_or_create("test", "c").unwrap();
            bulk_indexes(&cat, &coll);
            coll.writer()
                .insert_many_raw(&bulk(0..10), false, Durability::Process)
                .unwrap();
            // A crash after the records' tables reached the disk and before the index
            // entries' did: records 11..=20 are stored, their entries are not.
            let meta = coll.meta();
            let mut records = WriteBatch::default();
            for (record_id, doc) in (11..=20).zip(bulk(10..20)) {
                records.put(
                    Space::Records,
                    keys::record_key(meta.id, record_id),
                    doc.into_bytes(),
                );
            }
            let marker = keys::ingestion_marker_value(11, 20);
            let mut intent = WriteBatch::default();
            intent.put(Space::Catalog, keys::ingestion_marker_key(meta.id), marker);
            engine.write(intent, Durability::Disk).unwrap();
            engine.ingest(records).unwrap();
            drop((coll, cat, engine));

            let cat = Catalog::open(reopen()).unwrap();
            let coll = cat.get("test", "c").unwrap();
            let indexes = coll.meta().indexes.clone();
            for id in [0, 9, 10, 19] {
                assert_eq!(lookup(&coll, &indexes[0], id).len(), 1, "_id {id}");
            }
            assert_eq!(
                lookup(&coll, &indexes[1], 3),
                vec![4, 11, 18],
                "the entries of records 11..=20 were written at open"
            );
            assert_eq!(lookup(&coll, &indexes[2], 15), vec![16]);
            assert_eq!(lookup(&coll, &indexes[3], -16), vec![16]);
            let snap = coll.snapshot();
            let marker = keys::ingestion_marker_key(meta.id);
            assert!(snap.get(Space::Catalog, &marker).unwrap().is_none());
        }
    }

    #[test]
    fn raw_inserts_fill_every_index() {
        let cat = catalog();
        let coll = cat.get_or_create("test", "c").unwrap();
        let mut spec = IndexSpec::id_index(0, "a_1");
        spec.key = doc! {"a": 1};
        spec.unique = true;
        cat.add_index(&coll, spec).unwrap();
        let docs: Vec<bson::RawDocumentBuf> =
            [doc! {"_id": 1, "a": [1, 2]}, doc! {"_id": 2, "a": 2}]
                .iter()
                .map(|d| bson::RawDocumentBuf::try_from(d).unwrap())
                .collect();
        let outcomes = coll
            .writer()
            .insert_many_raw(&docs, true, Durability::Process)
            .unwrap();
        assert!(outcomes[0].is_ok());
        assert_eq!(
            outcomes[1].clone().unwrap_err().code,
            ErrorCode::DUPLICATE_KEY,
            "a: 2 is taken by the first document's array"
        );
        assert!(coll.meta().indexes[1].multikey);
    }

    #[test]
    fn replace_moves_index_entries_and_delete_frees_them() {
        let cat = catalog();
        let coll = cat.get_or_create("test", "c").unwrap();
        let outcomes = coll
            .writer()
            .insert_many(
                &[doc! {"_id": 1}, doc! {"_id": 2}],
                true,
                Durability::Process,
            )
            .unwrap();
        let first = *outcomes[0].as_ref().unwrap();
        let mut w = coll.writer();
        let err = w
            .replace(
                first,
                &doc! {"_id": 1},
                &doc! {"_id": 2},
                Durability::Process,
            )
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::DUPLICATE_KEY);
        w.delete(first, &doc! {"_id": 1}, Durability::Process)
            .unwrap();
        let again = w
            .insert_many(&[doc! {"_id": 1}], true, Durability::Process)
            .unwrap();
        assert!(again[0].is_ok());
    }

    #[test]
    fn unique_index_build_refuses_duplicates_and_then_guards_inserts() {
        let cat = catalog();
        let coll = cat.get_or_create("test", "c").unwrap();
        let docs = [doc! {"_id": 1, "a": 1}, doc! {"_id": 2, "a": 1}];
        coll.writer()
            .insert_many(&docs, true, Durability::Process)
            .unwrap();
        let unique_a = IndexSpec {
            id: 0,
            name: "a_1".into(),
            key: doc! {"a": 1},
            unique: true,
            sparse: false,
            multikey: false,
            expire_after_seconds: None,
            partial: None,
            collation: None,
            hidden: false,
            echoed: Document::new(),
        };
        let err = cat.add_index(&coll, unique_a.clone()).unwrap_err();
        assert_eq!(err.code, ErrorCode::DUPLICATE_KEY);
        assert_eq!(
            coll.meta().indexes.len(),
            1,
            "a failed build leaves no index behind"
        );

        let mut w = coll.writer();
        w.delete(2, &docs[1], Durability::Process).unwrap();
        drop(w);
        cat.add_index(&coll, unique_a).unwrap();
        let index = coll.meta().indexes[1].clone();
        assert_eq!(
            coll.lookup_index(&*coll.snapshot(), &index, &[bson::Bson::Int32(1)])
                .unwrap(),
            vec![1]
        );
        let again = coll
            .writer()
            .insert_many(&[doc! {"_id": 3, "a": 1}], true, Durability::Process)
            .unwrap();
        assert_eq!(again[0].clone().unwrap_err().code, ErrorCode::DUPLICATE_KEY);

        cat.remove_index(&coll, "a_1").unwrap();
        assert_eq!(
            cat.remove_index(&coll, "a_1").unwrap_err().code,
            ErrorCode::INDEX_NOT_FOUND
        );
        let ok = coll
            .writer()
            .insert_many(&[doc! {"_id": 3, "a": 1}], true, Durability::Process)
            .unwrap();
        assert!(ok[0].is_ok());
    }

    #[test]
    fn kept_counters_follow_every_write() {
        let cat = catalog();
        let coll = cat.get_or_create("test", "c").unwrap();
        let first = doc! {"_id": 1, "s": "x"};
        coll.writer()
            .insert_many(&[first.clone(), doc! {"_id": 2}], true, Durability::Process)
            .unwrap();
        assert_eq!(
            coll.stats().unwrap().count,
            2,
            "counted by a scan the first time"
        );
        let mut w = coll.writer();
        w.insert_many(
            &[doc! {"_id": 3}, doc! {"_id": 1}],
            false,
            Durability::Process,
        )
        .unwrap();
        let bigger = doc! {"_id": 1, "s": "a longer string than before"};
        w.replace(1, &first, &bigger, Durability::Process).unwrap();
        w.delete(2, &doc! {"_id": 2}, Durability::Process).unwrap();
        drop(w);
        let kept = coll.stats().unwrap();
        let mut scanned = CollectionStats::default();
        coll.scan(&*coll.snapshot(), None, &mut |_, raw| {
            scanned.count += 1;
            scanned.data_size_bytes += raw.as_bytes().len() as u64;
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        assert_eq!(kept, scanned);
        assert_eq!(kept.count, 2, "the duplicate _id 1 was not inserted");
    }

    #[test]
    fn create_drop_rename_and_reopen() {
        let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::default());
        let cat = Catalog::open(engine.clone()).unwrap();
        cat.create("db1", "a", doc! {}).unwrap();
        assert_eq!(
            cat.create("db1", "a", doc! {}).err().unwrap().code,
            ErrorCode::NAMESPACE_EXISTS
        );
        let a = cat.get("db1", "a").unwrap();
        a.writer()
            .insert_many(&[doc! {"_id": 1}], true, Durability::Process)
            .unwrap();
        cat.rename(("db1", "a"), ("db2", "b"), false).unwrap();
        assert!(cat.get("db1", "a").is_none());
        assert_eq!(cat.database_names(), vec!["db2".to_string()]);

        let reopened = Catalog::open(engine.clone()).unwrap();
        let b = reopened.get("db2", "b").unwrap();
        assert_eq!(b.stats().unwrap().count, 1);
        assert!(reopened.drop_collection("db2", "b").unwrap());
        assert!(!reopened.drop_collection("db2", "b").unwrap());
        let mut left = 0;
        engine
            .snapshot()
            .scan_prefix(Space::Records, b"", ScanStart::Beginning, &mut |_, _| {
                left += 1;
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
        assert_eq!(left, 0, "dropping removes the records");
    }

    #[test]
    fn a_collection_whose_last_records_are_unreadable_opens_and_drops() {
        let engine = Arc::new(testing::CorruptBlocks::default());
        let cat = Catalog::open(engine.clone()).unwrap();
        let coll = cat.get_or_create("test", "c").unwrap();
        let docs: Vec<Document> = (1..=20).map(|i| doc! {"_id": i}).collect();
        coll.writer()
            .insert_many(&docs, true, Durability::Process)
            .unwrap();
        let id = coll.meta().id;
        drop((coll, cat));
        engine
            .unreadable
            .lock()
            .extend([19, 20].map(|r| keys::record_key(id, r)));

        let cat = Catalog::open(engine.clone()).unwrap();
        let coll = cat.get("test", "c").unwrap();
        coll.writer()
            .insert_many(&[doc! {"_id": 100}], true, Durability::Process)
            .unwrap();
        let id_index = coll.meta().indexes[0].clone();
        let snap = coll.snapshot();
        let found = coll
            .lookup_index(&*snap, &id_index, &[bson::Bson::Int32(100)])
            .unwrap();
        assert_eq!(found, [21], "no record id is handed out twice");
        assert!(coll.get_record(&*snap, 21).unwrap().is_some());
        let meta = coll.meta();
        assert!(cat.drop_collection("test", "c").unwrap());
        assert!(cat.get("test", "c").is_none());
        // Every record is gone, those past the unreadable block too, and every entry.
        let mut prefixes = vec![(Space::Records, keys::record_prefix(id).to_vec())];
        for index in &meta.indexes {
            prefixes.push((Space::Indexes, index.id.to_be_bytes().to_vec()));
        }
        for (space, prefix) in prefixes {
            let mut left = 0;
            engine
                .snapshot()
                .scan_prefix(space, &prefix, ScanStart::Beginning, &mut |_, _| {
                    left += 1;
                    Ok(ControlFlow::Continue(()))
                })
                .unwrap();
            assert_eq!(left, 0, "{space:?} left behind");
        }
    }
}
