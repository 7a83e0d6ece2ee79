//! An in-memory [`Collections`] for the unit tests of the stages that read or write other
//! collections: collections are vectors of documents, unique indexes are lists of fields.

use crate::pipeline::{Collections, DocumentStream, MergeTarget, MergeWrite};
use crate::CurrentOpOptions;
use basalt_error::{Error, ErrorCode, Result};
use bson::{doc, Document};
use std::collections::BTreeMap;
use std::sync::Mutex;

type Namespace = (String, String);

pub(crate) struct MemoryCollections {
    db: String,
    collections: Mutex<BTreeMap<Namespace, Vec<Document>>>,
    unique_indexes: Mutex<Vec<(Namespace, Vec<String>)>>,
    /// The collection a test pipeline aggregates, which `$collStats`/`$indexStats` see.
    aggregated: Mutex<String>,
    /// Where blocking stages may spill; none (disk use refused) by default.
    spill: Option<std::path::PathBuf>,
}

fn namespace(db: &str, coll: &str) -> Namespace {
    (db.to_string(), coll.to_string())
}

fn with_id(doc: Document) -> Document {
    if doc.contains_key("_id") {
        return doc;
    }
    let mut out = doc! {"_id": bson::oid::ObjectId::new()};
    out.extend(doc);
    out
}

impl MemoryCollections {
    pub(crate) fn new(db: &str) -> MemoryCollections {
        MemoryCollections {
            db: db.to_string(),
            collections: Mutex::default(),
            unique_indexes: Mutex::default(),
            aggregated: Mutex::default(),
            spill: None,
        }
    }

    pub(crate) fn set_aggregated(&self, coll: &str) {
        *self.aggregated.lock().expect("test lock") = coll.to_string();
    }

    /// The aggregated collection's namespace and whether it exists.
    fn aggregated(&self) -> (Namespace, bool) {
        let ns = namespace(&self.db, &self.aggregated.lock().expect("test lock"));
        let exists = self
            .collections
            .lock()
            .expect("test lock")
            .contains_key(&ns);
        (ns, exists)
    }

    pub(crate) fn put(&self, db: &str, coll: &str, docs: Vec<Document>) {
        self.collections
            .lock()
            .expect("test lock")
            .insert(namespace(db, coll), docs);
    }

    pub(crate) fn get(&self, db: &str, coll: &str) -> Vec<Document> {
        self.collections
            .lock()
            .expect("test lock")
            .get(&namespace(db, coll))
            .cloned()
            .unwrap_or_default()
    }

    pub(crate) fn add_unique_index(&self, db: &str, coll: &str, fields: &[&str]) {
        self.unique_indexes.lock().expect("test lock").push((
            namespace(db, coll),
            fields.iter().map(|f| f.to_string()).collect(),
        ));
    }
}

impl MemoryCollections {
    /// Lets blocking stages spill under `directory`.
    pub(crate) fn with_spill_directory(mut self, directory: &std::path::Path) -> Self {
        self.spill = Some(directory.to_path_buf());
        self
    }
}

impl Collections for MemoryCollections {
    fn database(&self) -> &str {
        &self.db
    }

    fn spill_directory(&self) -> Option<std::path::PathBuf> {
        self.spill.clone()
    }

    fn scan(&self, db: &str, collection: &str) -> Result<DocumentStream<'_>> {
        Ok(Box::new(self.get(db, collection).into_iter().map(Ok)))
    }

    fn replace_collection(
        &self,
        db: &str,
        collection: &str,
        _timeseries: Option<&Document>,
        documents: &mut dyn Iterator<Item = Result<Document>>,
    ) -> Result<()> {
        let docs = documents
            .map(|d| d.map(with_id))
            .collect::<Result<Vec<_>>>()?;
        self.put(db, collection, docs);
        Ok(())
    }

    fn merge_target(
        &self,
        db: &str,
        collection: &str,
        on: &[String],
    ) -> Result<Box<dyn MergeTarget + '_>> {
        let ns = namespace(db, collection);
        let indexed = on == ["_id"]
            || self
                .unique_indexes
                .lock()
                .expect("test lock")
                .iter()
                .any(|(n, fields)| {
                    *n == ns && fields.len() == on.len() && on.iter().all(|f| fields.contains(f))
                });
        if !indexed {
            return Err(Error::location(
                51183,
                "Cannot find index to verify that join fields will be unique",
            ));
        }
        Ok(Box::new(MemoryTarget { server: self, ns }))
    }

    fn local_sessions(&self) -> Result<Vec<Document>> {
        Ok(vec![doc! {"_id": {"id": "session"}}])
    }

    /// Every session without access control; the user "me" owns those of uid "me".
    fn session_owners(
        &self,
        users: &crate::pipeline::SessionUsers,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        Ok(match users {
            crate::pipeline::SessionUsers::Listed(users) => Some(
                users
                    .iter()
                    .map(|(user, _)| user.as_bytes().to_vec())
                    .collect(),
            ),
            _ => None,
        })
    }

    fn current_ops(&self, _options: &CurrentOpOptions) -> Result<Vec<Document>> {
        Ok(vec![doc! {"op": "command"}])
    }

    fn query_settings(&self, _debug_shape: bool) -> Result<Vec<Document>> {
        Ok(Vec::new())
    }

    fn collection_stats(&self, scale: i64, _histograms: bool) -> Result<Document> {
        let ((db, coll), exists) = self.aggregated();
        let mut out = doc! {"ns": format!("{db}.{coll}"), "host": "memory"};
        if exists {
            let count = self.get(&db, &coll).len() as i64;
            out.insert("storageStats", doc! {"count": count, "scaleFactor": scale});
            let reads = doc! {"latency": 5_i64, "ops": 1_i64};
            out.insert("latencyStats", doc! {"reads": reads});
        }
        Ok(out)
    }

    fn plan_cache_stats(&self) -> Result<Vec<Document>> {
        Ok(Vec::new())
    }

    fn cluster_catalog(&self, _shards: bool) -> Result<Vec<Document>> {
        Ok(Vec::new())
    }

    fn index_stats(&self) -> Result<Vec<Document>> {
        let (ns, exists) = self.aggregated();
        if !exists {
            return Ok(Vec::new());
        }
        let mut names = vec!["_id_".to_string()];
        for (n, fields) in self.unique_indexes.lock().expect("test lock").iter() {
            if *n == ns {
                names.push(
                    fields
                        .iter()
                        .map(|f| format!("{f}_1"))
                        .collect::<Vec<_>>()
                        .join("_"),
                );
            }
        }
        Ok(names.into_iter().map(|name| doc! {"name": name}).collect())
    }
}

struct MemoryTarget<'a> {
    server: &'a MemoryCollections,
    ns: Namespace,
}

impl MergeTarget for MemoryTarget<'_> {
    fn upsert(
        &mut self,
        key: &Document,
        decide: &mut dyn FnMut(Option<&Document>) -> Result<MergeWrite>,
    ) -> Result<()> {
        let mut collections = self.server.collections.lock().expect("test lock");
        let docs = collections.entry(self.ns.clone()).or_default();
        let position = docs.iter().position(|d| {
            key.iter().all(|(field, value)| {
                basalt_value::get_path(d, field)
                    .is_some_and(|v| basalt_value::values_equal(v, value))
            })
        });
        match decide(position.map(|p| &docs[p]))? {
            MergeWrite::Keep => Ok(()),
            MergeWrite::Insert(_) if position.is_some() => {
                let pattern: Document = key.keys().map(|k| (k.clone(), 1.into())).collect();
                Err(
                    Error::new(ErrorCode::DUPLICATE_KEY, "E11000 duplicate key error")
                        .with_extra(doc! {"keyPattern": pattern, "keyValue": key.clone()}),
                )
            }
            MergeWrite::Insert(doc) => {
                docs.push(with_id(doc));
                Ok(())
            }
            MergeWrite::Replace(doc) => {
                let position = position.expect("a replacement has a match");
                docs[position] = doc;
                Ok(())
            }
        }
    }
}
