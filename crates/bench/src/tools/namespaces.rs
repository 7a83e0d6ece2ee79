//! Which namespaces a dump or restore takes (`--db`, `--collection`, `--nsInclude`,
//! `--nsExclude`) and what a restore renames them to (`--nsFrom`/`--nsTo`), with the
//! Database Tools' `*` wildcard (any run of characters, dots included).

use basalt_error::{Error, ErrorCode, Result};

/// A `db.collection` pattern with `*` wildcards.
#[derive(Clone, Debug)]
struct Pattern(Vec<String>);

impl Pattern {
    fn new(pattern: &str) -> Pattern {
        Pattern(pattern.split('*').map(str::to_string).collect())
    }

    /// The text each `*` stood for, if `namespace` matches.
    fn captures(&self, namespace: &str) -> Option<Vec<String>> {
        let parts = &self.0;
        let first = parts.first()?;
        let mut rest = namespace.strip_prefix(first.as_str())?;
        if parts.len() == 1 {
            return rest.is_empty().then(Vec::new);
        }
        let mut captured = Vec::new();
        for (i, part) in parts.iter().enumerate().skip(1) {
            let last = i == parts.len() - 1;
            let at = if last {
                // The last literal part ends the namespace.
                rest.len()
                    .checked_sub(part.len())
                    .filter(|at| rest[*at..] == **part)?
            } else {
                rest.find(part.as_str())?
            };
            captured.push(rest[..at].to_string());
            rest = &rest[at + part.len()..];
        }
        Some(captured)
    }
}

/// The flags that choose namespaces, which dump and restore share.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Selection {
    /// Only this database.
    #[arg(long, short = 'd')]
    pub db: Option<String>,
    /// Only this collection (with --db).
    #[arg(long, short = 'c')]
    pub collection: Option<String>,
    /// Namespaces to take (`db.collection`, `*` wildcards; repeatable).
    #[arg(long = "nsInclude")]
    pub ns_include: Vec<String>,
    /// Namespaces to leave out (`*` wildcards; repeatable).
    #[arg(long = "nsExclude")]
    pub ns_exclude: Vec<String>,
}

/// The namespaces to take, and their new names.
#[derive(Clone, Debug, Default)]
pub struct NamespaceFilter {
    include: Vec<Pattern>,
    exclude: Vec<Pattern>,
    renames: Vec<(Pattern, String)>,
}

impl NamespaceFilter {
    /// From the tools' flags: `--db`/`--collection` narrow like an `--nsInclude`;
    /// `from`/`to` are `--nsFrom`/`--nsTo`.
    pub fn new(selection: &Selection, from: &[String], to: &[String]) -> Result<NamespaceFilter> {
        let (db, collection) = (selection.db.as_deref(), selection.collection.as_deref());
        let (include, exclude) = (&selection.ns_include, &selection.ns_exclude);
        if collection.is_some() && db.is_none() {
            return Err(usage("--collection needs --db"));
        }
        if from.len() != to.len() {
            return Err(usage("--nsFrom and --nsTo must come in pairs"));
        }
        let mut include: Vec<Pattern> = include.iter().map(|p| Pattern::new(p)).collect();
        if let Some(db) = db {
            include.push(Pattern::new(&format!("{db}.{}", collection.unwrap_or("*"))));
        }
        let mut renames = Vec::new();
        for (from, to) in from.iter().zip(to) {
            if from.matches('*').count() != to.matches('*').count() {
                return Err(usage(format!(
                    "--nsFrom {from} and --nsTo {to} must have as many wildcards"
                )));
            }
            renames.push((Pattern::new(from), to.clone()));
        }
        Ok(NamespaceFilter {
            include,
            exclude: exclude.iter().map(|p| Pattern::new(p)).collect(),
            renames,
        })
    }

    /// Whether `namespace` is taken. The server's own databases (`admin`, `config`,
    /// `local`) only when a pattern names the database, and `system.*` collections (but
    /// `system.js`) only when a pattern names the collection, as mongodump.
    pub fn takes(&self, namespace: &str) -> bool {
        if self.exclude.iter().any(|p| p.captures(namespace).is_some()) {
            return false;
        }
        let (db, collection) = namespace.split_once('.').unwrap_or((namespace, ""));
        let internal_db = matches!(db, "admin" | "config" | "local");
        let system = collection.starts_with("system.") && collection != "system.js";
        if self.include.is_empty() {
            return !internal_db && !system;
        }
        self.include.iter().any(|p| {
            p.captures(namespace).is_some()
                && (!system || p.0.len() == 1)
                && (!internal_db || p.0[0].starts_with(&format!("{db}.")))
        })
    }

    /// The namespace a restore writes `namespace` to.
    pub fn renamed(&self, namespace: &str) -> String {
        for (from, to) in &self.renames {
            if let Some(captured) = from.captures(namespace) {
                let mut parts = to.split('*');
                let mut out = parts.next().unwrap_or_default().to_string();
                for (capture, part) in captured.iter().zip(parts) {
                    out.push_str(capture);
                    out.push_str(part);
                }
                return out;
            }
        }
        namespace.to_string()
    }
}

pub fn usage(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::BAD_VALUE, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn filter(db: Option<&str>, include: &[&str], exclude: &[&str]) -> NamespaceFilter {
        let selection = Selection {
            db: db.map(str::to_string),
            collection: None,
            ns_include: strings(include),
            ns_exclude: strings(exclude),
        };
        NamespaceFilter::new(&selection, &[], &[]).unwrap()
    }

    #[test]
    fn wildcards_include_exclude_and_the_servers_own_namespaces() {
        let all = filter(None, &[], &[]);
        assert!(all.takes("shop.items"));
        assert!(all.takes("shop.system.js"));
        assert!(!all.takes("shop.system.profile"));
        assert!(!all.takes("admin.system.users") && !all.takes("admin.things"));
        assert!(filter(Some("admin"), &[], &[]).takes("admin.things"));
        assert!(!filter(Some("shop"), &[], &[]).takes("shop.system.profile"));
        assert!(filter(None, &["shop.system.profile"], &[]).takes("shop.system.profile"));
        let shop = filter(Some("shop"), &[], &["shop.tmp*"]);
        assert!(shop.takes("shop.items") && !shop.takes("shopx.items"));
        assert!(!shop.takes("shop.tmp_1"));
        let middle = filter(None, &["s*p.i*s"], &[]);
        assert!(middle.takes("shop.items") && !middle.takes("shop.item"));
    }

    #[test]
    fn renames_carry_what_the_wildcards_matched() {
        let f = NamespaceFilter::new(
            &Selection::default(),
            &strings(&["shop.*", "a.b"]),
            &strings(&["archive.shop_*", "c.d"]),
        )
        .unwrap();
        assert_eq!(f.renamed("shop.items"), "archive.shop_items");
        assert_eq!(f.renamed("a.b"), "c.d");
        assert_eq!(f.renamed("x.y"), "x.y");
        assert!(NamespaceFilter::new(
            &Selection::default(),
            &strings(&["a.*"]),
            &strings(&["b.c"])
        )
        .is_err());
    }
}
