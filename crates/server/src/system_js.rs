//! `system.js`: the database's stored JavaScript (`{_id: "name", value: function}`), which
//! mongod makes globals of every script's scope, so `$where` and `mapReduce` can call a
//! stored function by its name. The sandbox reads it only when a command runs a script.

use crate::exec::{for_each_match, AccessPath, Deadline};
use basalt_catalog::Catalog;
use basalt_js::StoredFunctions;
use basalt_query::Matcher;
use bson::Document;
use std::ops::ControlFlow;
use std::sync::Arc;

/// The collection's name, in every database.
const SYSTEM_JS: &str = "system.js";

/// How a command's sandbox reads `db`'s stored functions; `None` when it has none.
pub fn stored_functions(catalog: &Catalog, db: &str) -> Option<StoredFunctions> {
    let stored = catalog.get(db, SYSTEM_JS)?;
    Some(Arc::new(move || {
        let mut docs = Vec::new();
        for_each_match(
            &stored,
            &*stored.snapshot(),
            &Matcher::new(&Document::new())?,
            &AccessPath::CollectionScan,
            Deadline::from_max_time_ms(None),
            None,
            &mut |_, doc| {
                docs.push(doc);
                Ok(ControlFlow::Continue(()))
            },
        )?;
        Ok(docs)
    }))
}
