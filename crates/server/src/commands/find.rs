//! `find`: filter, projection, sort, skip, limit, batchSize, singleBatch, maxTimeMS, let.
//!
//! An unsorted find streams from a resumable scan; a sorted one (or `$natural: -1`)
//! computes the whole result first and buffers it in the cursor.

use super::Ctx;
use crate::cursors::CursorSource;
use crate::exec::{collect_matches, let_scope, AccessPath, CollectionScan};
use crate::local_oplog;
use crate::request::{is_requested, Fields};
use basalt_error::{Error, ErrorCode, Result};
use basalt_query::{Matcher, Projection, SortSpec};
use basalt_value::Collation;
use bson::{doc, Bson, Document, RawDocumentBuf};

/// Find options not built yet: refused when asked for rather than ignored, since the
/// results would silently differ.
const UNSUPPORTED_FIND_FIELDS: &[&str] = &["returnKey", "showRecordId"];

/// Refuses options not built yet, and tailable cursors on collections that are not
/// capped (unknown fields are refused before, `arguments.rs`).
pub(super) fn check_fields(body: &Document, namespace: &str, capped: bool) -> Result<()> {
    for (key, value) in body.iter().skip(1) {
        let key = key.as_str();
        if UNSUPPORTED_FIND_FIELDS.contains(&key) {
            if is_requested(value) && !matches!(value, Bson::Document(d) if d.is_empty()) {
                return Err(Error::new(
                    ErrorCode::COMMAND_NOT_SUPPORTED,
                    format!("find with option '{key}' is not supported by Basalt yet"),
                ));
            }
        } else if key == "tailable" || key == "awaitData" {
            let tailable = body.get("tailable").is_some_and(is_requested);
            if key == "awaitData" && is_requested(value) && !tailable {
                return Err(Error::failed_to_parse(
                    "Cannot set 'awaitData' without also setting 'tailable'",
                ));
            }
            if tailable && !capped {
                return Err(Error::bad_value(format!(
                    "error processing query: ns={namespace} tailable cursor requested on non capped collection"
                )));
            }
        }
    }
    Ok(())
}

/// A find's `min` and `max` (an empty one is none), when it has either: the bounds of
/// a scan of the hinted index (`basalt_plan::min_max_scan`).
pub(super) type MinMax<'a> = (Option<&'a Document>, Option<&'a Document>);

pub(super) fn min_max<'a>(fields: &Fields<'a>) -> Result<Option<MinMax<'a>>> {
    let bound = |name| -> Result<Option<&'a Document>> {
        Ok(fields.document_opt(name)?.filter(|d| !d.is_empty()))
    };
    Ok(match (bound("min")?, bound("max")?) {
        (None, None) => None,
        bounds => Some(bounds),
    })
}

/// How a find orders its results.
enum Order {
    Natural,
    ReverseNatural,
    Sorted(SortSpec),
}

fn parse_order(sort: Option<&Document>, collation: Option<&Collation>) -> Result<Order> {
    let Some(sort) = sort.filter(|s| !s.is_empty()) else {
        return Ok(Order::Natural);
    };
    if let Some(direction) = sort.get("$natural") {
        if sort.len() > 1 {
            return Err(Error::bad_value(
                "$natural sort cannot be combined with other sort fields",
            ));
        }
        return match basalt_value::as_f64(direction) {
            Some(d) if d < 0.0 => Ok(Order::ReverseNatural),
            Some(_) => Ok(Order::Natural),
            None => Err(Error::bad_value("$natural sort must be 1 or -1")),
        };
    }
    Ok(Order::Sorted(
        SortSpec::new(sort)?.with_collation(collation),
    ))
}

/// Whether `hint` is `{$natural: <negative>}`.
fn reverse_natural_hint(hint: Option<&Bson>) -> bool {
    match hint {
        Some(Bson::Document(hint)) if hint.len() == 1 => hint
            .get("$natural")
            .and_then(basalt_value::as_f64)
            .is_some_and(|direction| direction < 0.0),
        _ => false,
    }
}

/// The top-level fields an inclusion projection reads, when it only names stored
/// fields (no expressions, `$` operators or positional paths): then a scan decodes
/// nothing else of each document.
pub(super) fn projected_fields(spec: &Document) -> Option<Vec<String>> {
    let mut fields = vec!["_id".to_string()];
    let mut inclusion = false;
    for (path, value) in spec {
        let included = match value {
            Bson::Boolean(b) => *b,
            other => basalt_value::as_f64(other)? != 0.0,
        };
        if path.contains('$') {
            return None;
        }
        let top = path.split('.').next().unwrap_or(path);
        match (top == "_id", included) {
            (true, false) => fields.retain(|f| f != "_id"),
            (false, false) => return None,
            (_, true) => {
                inclusion = true;
                if !fields.iter().any(|f| f == top) {
                    fields.push(top.to_string());
                }
            }
        }
    }
    // `{}` and `{_id: 0}` return whole documents.
    inclusion.then_some(fields)
}

/// `read` (the top-level fields a projection reads) with those a blocking `sort`
/// reads too, for a scan that feeds the sort.
pub(super) fn with_sort_fields(mut read: Vec<String>, sort: Option<&Document>) -> Vec<String> {
    for path in sort.into_iter().flat_map(Document::keys) {
        let top = path.split('.').next().unwrap_or(path);
        if !read.iter().any(|f| f == top) {
            read.push(top.to_string());
        }
    }
    read
}

pub fn find(ctx: &Ctx<'_>, body: &Document) -> Result<RawDocumentBuf> {
    let fields = Fields::new(body);
    let name = fields.collection()?;
    let namespace = format!("{}.{name}", ctx.db);
    let oplog = crate::local_oplog::is_oplog(ctx.db, name)
        .then(|| ctx.server.replication())
        .flatten();
    let collection = ctx.server.catalog.get(ctx.db, name);
    // A tailable find on a collection that does not exist gets a dead cursor.
    let capped = oplog.is_some()
        || collection
            .as_ref()
            .is_none_or(|c| c.meta().capped().is_some());
    check_fields(body, &namespace, capped)?;
    let filter = fields.document_opt("filter")?.cloned().unwrap_or_default();
    // A search by distance runs as the aggregation `$geoNear` starts; a text search
    // as one whose stages read its score.
    let geo_near = match &collection {
        Some(collection) => crate::geo::find_pipeline(collection, body, &filter)?,
        None => None,
    };
    let pipeline = match geo_near {
        Some(stages) => Some(stages),
        None if filter.contains_key("$text") && collection.is_some() => {
            Some(super::views::find_stages(body)?)
        }
        None => None,
    };
    if let Some(pipeline) = pipeline {
        let mut aggregation = doc! { "aggregate": name, "pipeline": pipeline };
        super::views::find_cursor(body, &mut aggregation)?;
        let cursor = super::aggregate::ViewCursor {
            namespace,
            single_batch: fields.bool_or("singleBatch", false)?,
        };
        return super::aggregate::aggregate_as(ctx, &aggregation, Some(cursor));
    }
    let scope = let_scope(&fields)?;
    let collation = fields.collation()?;
    let matcher = Matcher::with_scope(&filter, &scope)?.with_collation(collation.as_ref());
    let projection = fields
        .document_opt("projection")?
        .map(|spec| Projection::with_query(spec, &matcher, &scope))
        .transpose()?;
    let order = match parse_order(fields.document_opt("sort")?, collation.as_ref())? {
        // A hint of `{$natural: -1}` reads the collection backwards, as that sort does.
        Order::Natural if reverse_natural_hint(body.get("hint")) => Order::ReverseNatural,
        order => order,
    };
    let skip = fields.non_negative_opt("skip")?.unwrap_or(0) as u64;
    let limit = fields
        .non_negative_opt("limit")?
        .filter(|n| *n > 0)
        .map(|n| n as u64);
    let batch_size = fields.non_negative_opt("batchSize")?.map(|n| n as usize);
    let single_batch = fields.bool_or("singleBatch", false)?;
    let deadline = ctx.deadline();
    let window = Window {
        skip,
        limit,
        allow_disk_use: fields.bool_or("allowDiskUse", true)?,
        dbpath: &ctx.server.options.dbpath,
    };
    let source = match oplog {
        Some(set) => {
            let read = local_oplog::Read {
                filter,
                matcher,
                projection,
                direction: local_oplog::Direction::Forward,
                tailable: fields.bool_or("tailable", false)?,
                await_data: fields.bool_or("awaitData", false)?,
                skip,
                limit,
                deadline: deadline.clone(),
            };
            oplog_source(ctx, set, read, order, &window)?
        }
        None => {
            let Some(collection) = collection else {
                return crate::cursors::cursor_reply(0, &namespace, Vec::new(), true);
            };
            let collection_find = CollectionFind {
                filter: &filter,
                matcher,
                projection,
                collation: collation.as_ref(),
                deadline: deadline.clone(),
            };
            let tailable = fields.bool_or("tailable", false)?;
            if tailable && !collection.is_empty()? {
                let await_data = fields.bool_or("awaitData", false)?;
                tailing_source(collection, collection_find, order, &window, await_data)?
            } else {
                collection_source(ctx, &fields, collection, collection_find, order, &window)?
            }
        }
    };
    ctx.server.cursors.first_batch_reply(
        namespace,
        source,
        batch_size,
        single_batch,
        deadline,
        crate::security::cursor_owner(ctx),
    )
}

/// Where a find's results start and end, and how a blocking sort may spill.
struct Window<'a> {
    skip: u64,
    limit: Option<u64>,
    allow_disk_use: bool,
    dbpath: &'a std::path::Path,
}

impl Window<'_> {
    /// `matches` sorted by `spec` (spilling beyond the sort's memory limit), cut to the
    /// window and shaped by `projection`, as a cursor's source: the sorted result
    /// streams out as the cursor is read.
    fn sorted(
        &self,
        spec: &SortSpec,
        matches: impl Iterator<Item = Result<Document>>,
        projection: Option<Projection>,
    ) -> Result<CursorSource> {
        let keep = self.limit.map(|l| (self.skip + l) as usize);
        let sorted = crate::blocking_sort::sort_for_find(
            spec,
            matches,
            keep,
            self.allow_disk_use,
            self.dbpath,
        )?;
        let window = sorted
            .skip(self.skip as usize)
            .take(self.limit.map_or(usize::MAX, |l| l as usize));
        Ok(match projection {
            Some(p) => CursorSource::stream(window.map(move |d| p.apply(&d?))),
            None => CursorSource::stream(window),
        })
    }
}

/// A find on `local.oplog.rs`: forward (maybe tailable), backward, or sorted.
fn oplog_source(
    ctx: &Ctx<'_>,
    set: &std::sync::Arc<basalt_repl::ReplicaSet>,
    read: local_oplog::Read,
    order: Order,
    window: &Window<'_>,
) -> Result<CursorSource> {
    let engine = ctx.server.catalog.engine().clone();
    Ok(match order {
        Order::Natural => local_oplog::source(engine, set.clone(), read),
        _ if read.tailable => {
            return Err(Error::bad_value(
                "cannot use tailable option with a sort other than {$natural: 1}",
            ))
        }
        Order::ReverseNatural => local_oplog::source(
            engine,
            set.clone(),
            local_oplog::Read {
                direction: local_oplog::Direction::Backward,
                ..read
            },
        ),
        Order::Sorted(spec) => {
            let entries = local_oplog::entries(
                engine,
                set.clone(),
                read.filter,
                read.matcher,
                read.deadline,
            );
            window.sorted(&spec, entries, read.projection)?
        }
    })
}

/// A tailable find on a capped collection: a scan in natural order that stays open at
/// the end (a tailable find on an empty collection gets a dead cursor, as in MongoDB).
fn tailing_source(
    collection: std::sync::Arc<basalt_catalog::Collection>,
    find: CollectionFind<'_>,
    order: Order,
    window: &Window<'_>,
    await_data: bool,
) -> Result<CursorSource> {
    if !matches!(order, Order::Natural) {
        return Err(Error::bad_value(
            "cannot use tailable option with a sort other than {$natural: 1}",
        ));
    }
    let scan = CollectionScan::new(
        collection,
        find.matcher,
        AccessPath::CollectionScan,
        find.projection,
        window.skip,
        window.limit,
        find.deadline,
    );
    Ok(CursorSource::Scan(Box::new(scan.tailing(await_data))))
}

/// What a find on a collection reads with.
struct CollectionFind<'a> {
    filter: &'a Document,
    matcher: Matcher,
    projection: Option<Projection>,
    collation: Option<&'a Collation>,
    deadline: crate::exec::Deadline,
}

/// A find on a collection: a resumable scan in natural (or an index's) order, a
/// blocking sort, or natural order backwards.
fn collection_source(
    ctx: &Ctx<'_>,
    fields: &Fields<'_>,
    collection: std::sync::Arc<basalt_catalog::Collection>,
    find: CollectionFind<'_>,
    order: Order,
    window: &Window<'_>,
) -> Result<CursorSource> {
    let CollectionFind {
        filter,
        matcher,
        projection,
        collation,
        deadline,
    } = find;
    let (skip, limit) = (window.skip, window.limit);
    let sort = fields.document_opt("sort")?;
    let hint = fields.body.get("hint");
    let (path, index_sorted) = match min_max(fields)? {
        Some((min, max)) => {
            let scan = basalt_plan::min_max_scan(&collection.meta().indexes, hint, min, max)?;
            collection.note_index_use(scan.index.id);
            (AccessPath::IndexScan(Box::new(scan)), false)
        }
        None => AccessPath::choose_sorted(
            &collection,
            filter,
            collation,
            hint,
            sort,
            fields.document_opt("projection")?,
        )?,
    };
    // An index scan in sort order streams like a natural-order scan: no blocking sort.
    let order = if index_sorted { Order::Natural } else { order };
    // The top-level fields the projection reads, when it names stored fields only.
    let read = fields
        .document_opt("projection")?
        .and_then(projected_fields);
    Ok(match order {
        Order::Natural => CursorSource::Scan(Box::new(
            CollectionScan::new(
                collection,
                matcher,
                path,
                projection,
                skip,
                limit,
                deadline.clone(),
            )
            .with_fields(read)
            .with_workers(ctx.server.scan_workers()),
        )),
        Order::Sorted(spec) => {
            // Matches stream into the sorter, which holds at most its memory limit and
            // spills the rest; the sorted result streams out as the cursor is read.
            // The sort reads its fields, the projection the rest: a covering index or
            // a partial decoding serves both.
            let read = read.map(|read| with_sort_fields(read, sort));
            // A column find ranks its rows by the chunks and fetches only the first.
            let mut path = path;
            if let AccessPath::Columns(find) = &mut path {
                let keep = limit.map(|limit| (skip + limit) as usize);
                crate::column_scan::rank_first(find, sort, keep);
            }
            let matches = CollectionScan::new(collection, matcher, path, None, 0, None, deadline)
                .with_fields(read);
            window.sorted(&spec, matches.into_stream(), projection)?
        }
        Order::ReverseNatural => {
            let mut docs: Vec<Document> =
                collect_matches(&collection, &matcher, &path, None, deadline.clone())?
                    .into_iter()
                    .map(|(_, doc)| doc)
                    .collect();
            docs.reverse();
            let window = docs
                .into_iter()
                .skip(skip as usize)
                .take(limit.map_or(usize::MAX, |l| l as usize));
            let shaped = match &projection {
                Some(p) => window.map(|d| p.apply(&d)).collect::<Result<Vec<_>>>()?,
                None => window.collect(),
            };
            CursorSource::buffered(shaped)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn inclusion_projections_name_the_fields_to_decode() {
        let fields = |spec: Document| projected_fields(&spec);
        assert_eq!(
            fields(doc! { "_id": 0, "st": 1, "ts": true, "air.value": 1, "air.q": 1 }),
            Some(vec!["st".into(), "ts".into(), "air".into()])
        );
        assert_eq!(
            fields(doc! { "a": 1 }),
            Some(vec!["_id".into(), "a".into()])
        );
        assert_eq!(fields(doc! { "a": 0 }), None);
        assert_eq!(fields(doc! { "_id": 0 }), None);
        assert_eq!(fields(doc! {}), None);
        assert_eq!(fields(doc! { "a": "$b" }), None);
        assert_eq!(fields(doc! { "a.$": 1 }), None);
        assert_eq!(fields(doc! { "a": { "$slice": 2 } }), None);
    }
}
