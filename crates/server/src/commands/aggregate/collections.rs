//! The aggregation pipeline's window on the server ([`basalt_agg::Collections`]): scans of
//! other collections for `$lookup`, `$graphLookup` and `$unionWith`, the writes of `$out`
//! and `$merge` through the catalog, and the server state `$listLocalSessions`,
//! `$currentOp`, `$collStats` and `$indexStats` report.

use crate::commands::insert::{check_document_size, prepare_for_insert};
use crate::commands::Ctx;
use crate::connection::ConnectionInfo;
use crate::exec::{AccessPath, CollectionScan, Deadline};
use crate::security::UserName;
use crate::timeseries::TimeSeries;
use crate::validation::Validator;
use crate::views::Resolved;
use crate::Server;
use basalt_agg::{Collections, DocumentStream, MergeTarget, MergeWrite, SessionUsers};
use basalt_catalog::{validate_collection_name, Collection, CollectionMeta, IndexSpec};
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::Matcher;
use basalt_storage::Durability;
use bson::{doc, Bson, Document};
use std::sync::Arc;

/// `$out` writes its temporary collection in batches of this many documents.
const OUT_BATCH_DOCS_MAX: usize = 1000;
/// ... or of this many bytes, whichever comes first.
const OUT_BATCH_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Owns what it reaches the server through, so that a pipeline streaming to a cursor
/// can outlive the command that started it.
pub struct ServerCollections {
    server: Arc<Server>,
    connection: Arc<ConnectionInfo>,
    db: String,
    /// The aggregate command, for the session and `$currentOp`.
    command: Document,
    namespace: String,
    deadline: Deadline,
    durability: Durability,
}

impl ServerCollections {
    pub fn new(
        ctx: &Ctx<'_>,
        command: &Document,
        namespace: &str,
        deadline: Deadline,
        durability: Durability,
    ) -> ServerCollections {
        ServerCollections {
            server: Arc::clone(ctx.server),
            connection: Arc::clone(ctx.connection),
            db: ctx.db.to_string(),
            command: command.clone(),
            namespace: namespace.to_string(),
            deadline,
            durability,
        }
    }

    /// The command context the pipeline runs in.
    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            server: &self.server,
            connection: &self.connection,
            db: &self.db,
            raw_sequences: &[],
            max_time_ms: None,
            operation: None,
        }
    }

    /// Writes `documents` into the new collection `temp`, with the indexes of `old`.
    /// `$out` with `timeseries` options: the measurements go into the buckets of a new
    /// time-series collection, which then takes the target's place. The target may be
    /// missing or a time-series collection with the same options (whose expiry and
    /// secondary indexes the new one keeps); a view or an ordinary collection is
    /// refused (7268700), other options too (7406103).
    fn replace_time_series(
        &self,
        db: &str,
        collection: &str,
        options: &TimeSeries,
        documents: &mut dyn Iterator<Item = Result<Document>>,
    ) -> Result<()> {
        let catalog = &self.server.catalog;
        let namespace = format!("{db}.{collection}");
        if catalog.get(db, collection).is_some()
            || crate::views::get(catalog, db, collection)?.is_some()
        {
            return Err(Error::location(
                7268700,
                format!("Target collection {namespace} must be a time-series collection"),
            ));
        }
        let old = crate::timeseries::get(catalog, db, collection);
        if let Some((existing, _)) = &old {
            if existing != options {
                return Err(Error::location(
                    7406103,
                    format!(
                        "Time-series options of $out do not match those of the existing \
                         time-series collection {namespace}"
                    ),
                ));
            }
        }
        let old_buckets = old.map(|(_, buckets)| buckets);
        let expire = old_buckets
            .as_ref()
            .and_then(|buckets| buckets.meta().options.get("expireAfterSeconds").cloned())
            .and_then(|seconds| basalt_value::as_i64(&seconds));
        let temp_name = format!("tmp.agg_out.{}", bson::Uuid::new());
        let temp_buckets = crate::timeseries::buckets_name(&temp_name);
        crate::timeseries::create(catalog, db, &temp_name, options, expire)?;
        let written = self
            .fill_time_series(db, &temp_buckets, options, old_buckets.as_ref(), documents)
            .and_then(|()| {
                let target = crate::timeseries::buckets_name(collection);
                catalog.rename((db, &temp_buckets), (db, &target), true)
            });
        if written.is_err() {
            let _ = catalog.drop_collection(db, &temp_buckets);
        }
        written
    }

    /// Stores `documents` as measurements in the buckets `buckets` (of a new
    /// time-series collection), with the secondary indexes of the one it replaces.
    fn fill_time_series(
        &self,
        db: &str,
        buckets: &str,
        options: &TimeSeries,
        old: Option<&Arc<Collection>>,
        documents: &mut dyn Iterator<Item = Result<Document>>,
    ) -> Result<()> {
        let catalog = &self.server.catalog;
        let buckets = catalog
            .get(db, buckets)
            .ok_or_else(|| Error::internal(format!("the buckets {db}.{buckets} are gone")))?;
        let present: Vec<String> = buckets
            .meta()
            .indexes
            .iter()
            .map(|index| index.name.clone())
            .collect();
        for index in old.iter().flat_map(|c| c.meta().indexes.clone()) {
            if !index.is_id_index() && !present.contains(&index.name) {
                catalog.add_index(&buckets, index)?;
            }
        }
        let mut batch = Vec::new();
        let mut bytes = 0usize;
        let store = |batch: Vec<Document>| {
            let batch = batch
                .iter()
                .map(bson::RawDocumentBuf::try_from)
                .collect::<std::result::Result<Vec<_>, _>>()?;
            crate::timeseries::insert(options, &buckets, &batch, true, self.durability)
                .into_iter()
                .collect::<Result<Vec<()>>>()
                .map(drop)
        };
        for doc in documents {
            let doc = written(doc?);
            bytes += basalt_value::document_size_bytes(&doc);
            batch.push(doc);
            if batch.len() >= OUT_BATCH_DOCS_MAX || bytes >= OUT_BATCH_BYTES_MAX {
                store(std::mem::take(&mut batch))?;
                bytes = 0;
            }
        }
        store(batch)
    }

    fn fill(
        &self,
        temp: &Collection,
        old: Option<&Arc<Collection>>,
        documents: &mut dyn Iterator<Item = Result<Document>>,
    ) -> Result<()> {
        let catalog = &self.server.catalog;
        for index in old.iter().flat_map(|c| c.meta().indexes.clone()) {
            if !index.is_id_index() {
                catalog.add_index(temp, index)?;
            }
        }
        let validator = match old {
            Some(old) => self.validator(&old.meta())?,
            None => None,
        };
        let mut batch = Vec::new();
        let mut bytes = 0usize;
        for doc in documents {
            let doc = prepare_for_insert(&written(doc?))?;
            if let Some(validator) = &validator {
                validator.check_new(&doc)?;
            }
            bytes += basalt_value::document_size_bytes(&doc);
            batch.push(doc);
            if batch.len() >= OUT_BATCH_DOCS_MAX || bytes >= OUT_BATCH_BYTES_MAX {
                self.insert_all(temp, &std::mem::take(&mut batch))?;
                bytes = 0;
            }
        }
        self.insert_all(temp, &batch)
    }

    /// The documents of a view, read by `$lookup`, `$graphLookup` or `$unionWith`: its
    /// pipeline run over its collection, under its collation, streaming.
    fn view_results(&self, db: &str, view: Resolved) -> Result<DocumentStream<'_>> {
        // The stage compares under the command's collation, which must be the view's.
        let collation = crate::request::Fields::new(&self.command).collation()?;
        if collation.as_ref().map(basalt_value::Collation::spec) != view.collation.as_ref() {
            return Err(Error::new(
                ErrorCode::OPTION_NOT_SUPPORTED_ON_VIEW,
                "Cannot override a view's default collation: the stage reads a view whose \
                 collation is not the one of the command",
            ));
        }
        let ctx = Ctx { db, ..self.ctx() };
        let mut aggregation = doc! {
            "aggregate": &view.collection,
            "pipeline": view.pipeline.into_iter().map(Bson::Document).collect::<Vec<_>>(),
            "cursor": {},
        };
        if let Some(collation) = view.collation {
            aggregation.insert("collation", collation);
        }
        let (_, mut source, _) = super::results(&ctx, &aggregation, Some(&view.collection))?;
        let mut batch = Vec::<bson::RawDocumentBuf>::new().into_iter();
        let mut exhausted = false;
        Ok(Box::new(std::iter::from_fn(move || loop {
            if let Some(raw) = batch.next() {
                return Some(Document::try_from(raw.as_ref()).map_err(Error::from));
            }
            if exhausted {
                return None;
            }
            match source.next_batch(None) {
                Ok((next, done)) => {
                    batch = next.into_iter();
                    exhausted = done;
                }
                Err(e) => {
                    exhausted = true;
                    return Some(Err(e));
                }
            }
        })))
    }

    /// The validator `$out` and `$merge` apply to the documents they write into the
    /// collection `meta`, unless the command bypasses it.
    fn validator(&self, meta: &CollectionMeta) -> Result<Option<Validator>> {
        let bypass = crate::request::Fields::new(&self.command)
            .bool_or("bypassDocumentValidation", false)?;
        Validator::of(meta, bypass)
    }

    fn insert_all(&self, collection: &Collection, docs: &[Document]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        let outcomes = collection
            .writer()
            .insert_many(docs, true, self.durability)?;
        outcomes.into_iter().try_for_each(|o| o.map(|_| ()))
    }
}

impl Collections for ServerCollections {
    fn database(&self) -> &str {
        &self.db
    }

    fn scan(&self, db: &str, collection: &str) -> Result<DocumentStream<'_>> {
        let Some(collection) = self.server.catalog.get(db, collection) else {
            return match crate::views::resolve_readable(&self.server.catalog, db, collection)? {
                Some(view) => self.view_results(db, view),
                None => Ok(Box::new(std::iter::empty())),
            };
        };
        let scan = CollectionScan::new(
            collection,
            Matcher::new(&Document::new())?,
            AccessPath::CollectionScan,
            None,
            0,
            None,
            self.deadline.clone(),
        );
        Ok(Box::new(scan.into_stream()))
    }

    fn replace_collection(
        &self,
        db: &str,
        collection: &str,
        timeseries: Option<&Document>,
        documents: &mut dyn Iterator<Item = Result<Document>>,
    ) -> Result<()> {
        validate_collection_name(db, collection)?;
        if let Some(spec) = timeseries {
            let options = TimeSeries::parse(&Bson::Document(spec.clone()))?;
            return self.replace_time_series(db, collection, &options, documents);
        }
        refuse_view(&self.server, db, collection)?;
        let catalog = &self.server.catalog;
        // A time-series target becomes an ordinary collection (its buckets go once the
        // new collection is in place), as in mongod.
        let replaced_series = crate::timeseries::get(catalog, db, collection);
        let old = catalog.get(db, collection);
        let options = old
            .as_ref()
            .map(|c| c.meta().options.clone())
            .unwrap_or_default();
        let temp_name = format!("tmp.agg_out.{}", bson::Uuid::new());
        let temp = catalog.create(db, &temp_name, options)?;
        let written = self
            .fill(&temp, old.as_ref(), documents)
            .and_then(|()| catalog.rename((db, &temp_name), (db, collection), true));
        if written.is_err() {
            // The write's own error is the one to report; a temporary collection left
            // behind by a failing drop holds nothing anyone reads.
            let _ = catalog.drop_collection(db, &temp_name);
        }
        written?;
        if replaced_series.is_some() {
            catalog.drop_collection(db, &crate::timeseries::buckets_name(collection))?;
        }
        Ok(())
    }

    fn merge_target(
        &self,
        db: &str,
        collection: &str,
        on: &[String],
    ) -> Result<Box<dyn MergeTarget + '_>> {
        validate_collection_name(db, collection)?;
        refuse_view(&self.server, db, collection)?;
        let indexed = on == ["_id"]
            || self
                .server
                .catalog
                .get(db, collection)
                .is_some_and(|c| unique_index_on(&c.meta(), on).is_some());
        if !indexed {
            return Err(no_unique_index());
        }
        Ok(Box::new(MergeInto {
            collections: self,
            db: db.to_string(),
            collection: collection.to_string(),
            on: on.to_vec(),
        }))
    }

    fn local_sessions(&self) -> Result<Vec<Document>> {
        Ok(self.server.sessions.list())
    }

    fn session_owners(&self, users: &SessionUsers) -> Result<Option<Vec<Vec<u8>>>> {
        let digest = |user: Option<&UserName>| crate::sessions::user_digest(user).to_vec();
        Ok(match users {
            SessionUsers::All => None,
            SessionUsers::Listed(users) => Some(
                users
                    .iter()
                    .map(|(user, db)| digest(Some(&UserName::new(user, db))))
                    .collect(),
            ),
            // Without access control every session is the current user's.
            SessionUsers::Current => {
                crate::security::cursor_owner(&self.ctx()).map(|user| vec![digest(Some(&user))])
            }
        })
    }

    fn spill_directory(&self) -> Option<std::path::PathBuf> {
        // `allowDiskUseByDefault` is on since MongoDB 6.0; the command was validated.
        let allowed = !matches!(
            self.command.get("allowDiskUse"),
            Some(bson::Bson::Boolean(false))
        );
        allowed
            .then(|| basalt_query::BlockingSort::spill_directory_under(&self.server.options.dbpath))
    }

    fn current_ops(&self, options: &basalt_agg::CurrentOpOptions) -> Result<Vec<Document>> {
        Ok(crate::commands::current_op::current_ops(
            &self.ctx(),
            options,
        ))
    }

    fn query_settings(&self, debug_shape: bool) -> Result<Vec<Document>> {
        crate::query_settings::list(&self.ctx(), debug_shape)
    }

    fn collection_stats(&self, scale: i64, histograms: bool) -> Result<Document> {
        let mut out = doc! {"ns": &self.namespace, "host": crate::commands::host_info::host_name()};
        if let Some(collection) = self.aggregated() {
            let body = doc! {"collStats": collection.meta().name.clone(), "scale": scale};
            out.insert(
                "storageStats",
                crate::commands::stats::coll_stats(&self.ctx(), &body)?,
            );
            out.insert("latencyStats", collection.latency().to_document(histograms));
        } else if let Some(set) = self
            .server
            .replication()
            .filter(|_| self.namespace == "local.oplog.rs")
        {
            let engine = self.server.catalog.engine();
            out.insert(
                "storageStats",
                crate::local_oplog::stats(&**engine, set, scale)?,
            );
        }
        Ok(out)
    }

    fn plan_cache_stats(&self) -> Result<Vec<Document>> {
        self.cached_plans()
    }

    fn cluster_catalog(&self, shards: bool) -> Result<Vec<Document>> {
        let databases = if self.db == "admin" {
            self.server.catalog.database_names()
        } else {
            vec![self.db.clone()]
        };
        let mut out = Vec::new();
        for db in databases {
            for entry in
                crate::commands::list_collections::catalog_entries(&self.server, &db, &|_| true)?
            {
                let name = entry.get_str("name").unwrap_or_default().to_string();
                let mut listed = doc! { "ns": format!("{db}.{name}"), "db": &db };
                for (field, value) in entry {
                    if field != "name" {
                        listed.insert(field, value);
                    }
                }
                listed.insert("sharded", false);
                if shards {
                    // Not sharded: no shard holds it apart from the set itself.
                    listed.insert("shards", Vec::<Bson>::new());
                }
                out.push(listed);
            }
        }
        Ok(out)
    }

    fn index_stats(&self) -> Result<Vec<Document>> {
        let Some(collection) = self.aggregated() else {
            return Ok(Vec::new());
        };
        // Operations that read each index (a plan using it) since the collection was
        // opened, as MongoDB counts them since the server started or the index was made.
        let host = crate::commands::host_info::host_name();
        Ok(collection
            .meta()
            .indexes
            .iter()
            .map(|index| {
                let (ops, since) = collection.index_uses(index.id);
                doc! {
                    "name": index.name.clone(),
                    "key": index.key.clone(),
                    "host": host.clone(),
                    "accesses": {"ops": ops as i64, "since": since},
                    "spec": index.to_list_document(),
                }
            })
            .collect())
    }
}

impl ServerCollections {
    /// `$planCacheStats`: the cached choices of the aggregated collection, in the shape
    /// of mongod's entries.
    fn cached_plans(&self) -> Result<Vec<Document>> {
        let Some(collection) = self.aggregated() else {
            return Err(Error::location(
                50933,
                format!("collection '{}' does not exist", self.namespace),
            ));
        };
        let host = crate::commands::host_info::host_name();
        let meta = collection.meta();
        Ok(collection
            .plan_cache()
            .entries()
            .into_iter()
            .map(|(shape, plan, from)| {
                // The shape explain reports for the same query, so the two can be
                // matched; the key is the cache's own (with the collation).
                let sort = Some(&from.sort).filter(|sort| !sort.is_empty());
                let shape_hash = crate::query_shape::plan_cache_shape_hash(
                    &from.query,
                    sort,
                    None,
                    None,
                    &[],
                );
                let key = crate::query_shape::short_hash(&shape);
                let stage = match &plan {
                    basalt_catalog::CachedPlan::CollectionScan => doc! { "stage": "COLLSCAN" },
                    basalt_catalog::CachedPlan::Index(name)
                    | basalt_catalog::CachedPlan::IndexInSortOrder(name) => {
                        let key = meta
                            .indexes
                            .iter()
                            .find(|i| i.name == *name)
                            .map(|i| i.key.clone())
                            .unwrap_or_default();
                        doc! {
                            "stage": "FETCH",
                            "inputStage": { "stage": "IXSCAN", "keyPattern": key, "indexName": name },
                        }
                    }
                };
                doc! {
                    "version": "1",
                    "queryHash": shape_hash.clone(),
                    "planCacheShapeHash": shape_hash,
                    "planCacheKey": key,
                    "isActive": true,
                    "works": 1_i64,
                    "timeOfCreation": from.created,
                    "createdFromQuery": { "query": from.query, "sort": from.sort, "projection": {} },
                    "cachedPlan": stage,
                    "creationExecStats": [],
                    "candidatePlanScores": [],
                    "indexFilterSet": false,
                    "estimatedSizeBytes": shape.len() as i64,
                    "host": host.clone(),
                }
            })
            .collect())
    }

    /// The collection the pipeline aggregates, when it exists.
    fn aggregated(&self) -> Option<Arc<Collection>> {
        let name = self
            .namespace
            .strip_prefix(self.db.as_str())?
            .strip_prefix('.')?;
        self.server.catalog.get(&self.db, name)
    }
}

/// A running index build as MongoDB's `$currentOp` shows it.
/// The unique index whose fields are exactly `on`, which makes `$merge`'s match unique.
fn unique_index_on<'m>(meta: &'m CollectionMeta, on: &[String]) -> Option<&'m IndexSpec> {
    meta.indexes.iter().find(|index| {
        index.unique && index.key.len() == on.len() && on.iter().all(|f| index.key.contains_key(f))
    })
}

/// A document as `$out` and `$merge` store it: without the metadata a search left on
/// it for the pipeline.
fn written(mut doc: Document) -> Document {
    basalt_expr::remove_metadata(&mut doc);
    doc
}

/// `$out` and `$merge` write collections, never views (CommandNotSupportedOnView).
fn refuse_view(server: &Server, db: &str, collection: &str) -> Result<()> {
    match crate::views::get(&server.catalog, db, collection)? {
        Some(_) => Err(crate::views::not_a_collection(db, collection)),
        None => Ok(()),
    }
}

fn no_unique_index() -> Error {
    Error::location(
        51183,
        "Cannot find index to verify that join fields will be unique",
    )
}

struct MergeInto<'a> {
    collections: &'a ServerCollections,
    db: String,
    collection: String,
    on: Vec<String>,
}

impl MergeTarget for MergeInto<'_> {
    fn upsert(
        &mut self,
        key: &Document,
        decide: &mut dyn FnMut(Option<&Document>) -> Result<MergeWrite>,
    ) -> Result<()> {
        let catalog = &self.collections.server.catalog;
        let Some(collection) = catalog.get(&self.db, &self.collection) else {
            // Nothing matches in a collection that does not exist yet; the first insert
            // creates it.
            return match decide(None)? {
                MergeWrite::Insert(doc) => {
                    let created = catalog.get_or_create(&self.db, &self.collection)?;
                    self.collections
                        .insert_all(&created, &[prepare_for_insert(&written(doc))?])
                }
                MergeWrite::Keep => Ok(()),
                MergeWrite::Replace(_) => Err(Error::internal("$merge replaced a missing match")),
            };
        };
        let mut writer = collection.writer();
        if collection.is_retired() {
            return Err(Error::new(
                ErrorCode::NAMESPACE_NOT_FOUND,
                format!(
                    "the $merge target {}.{} was dropped while being written",
                    self.db, self.collection
                ),
            ));
        }
        let meta = collection.meta();
        let validator = self.collections.validator(&meta)?;
        let index = unique_index_on(&meta, &self.on).ok_or_else(no_unique_index)?;
        let values: Vec<Bson> = index
            .key
            .keys()
            .map(|field| key.get(field).cloned().unwrap_or(Bson::Null))
            .collect();
        let found = collection
            .lookup_index(&*collection.snapshot(), index, &values)?
            .into_iter()
            .next();
        let existing = match found {
            Some(record_id) => writer.current(record_id)?.map(|doc| (record_id, doc)),
            None => None,
        };
        match decide(existing.as_ref().map(|(_, doc)| doc))? {
            MergeWrite::Keep => Ok(()),
            MergeWrite::Insert(doc) => {
                // The write lock is held: insert through it rather than insert_all.
                let ready = prepare_for_insert(&written(doc))?;
                if let Some(validator) = &validator {
                    validator.check_new(&ready)?;
                }
                let outcomes = writer.insert_many(&[ready], true, self.collections.durability)?;
                outcomes.into_iter().try_for_each(|o| o.map(|_| ()))
            }
            MergeWrite::Replace(doc) => {
                let doc = written(doc);
                let (record_id, old) =
                    existing.ok_or_else(|| Error::internal("$merge replaced a missing match"))?;
                check_document_size(&doc)?;
                if let Some(validator) = &validator {
                    validator.check_update(&old, &doc)?;
                }
                writer.replace(record_id, &old, &doc, self.collections.durability)
            }
        }
    }
}
