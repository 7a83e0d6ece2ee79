//! Variables of the expression language: the names in scope while parsing, the values
//! that are fixed for a whole evaluation (`$$NOW` and the command's `let` variables), and
//! the [`Scope`] that pairs them for one command.
//!
//! Names are resolved to slots at parse time, so evaluation never compares strings: a
//! variable's slot is its depth in the scope stack, which keeps nested `$let`/`$map`
//! scopes distinct while sibling scopes may reuse slots.

use crate::expression::Expression;
use basalt_error::{Error, Result};
use bson::{Bson, DateTime, Document};

/// The slot of a user variable, assigned when its scope is parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VarId(pub(crate) usize);

/// The variables in scope while an expression is parsed.
#[derive(Clone, Debug, Default)]
pub struct ParseContext {
    names: Vec<String>,
    /// The command's collation, for the string comparisons of what is parsed under it.
    collation: Option<basalt_value::Collation>,
}

impl ParseContext {
    pub fn new() -> ParseContext {
        ParseContext::default()
    }

    /// The same context with strings compared under `collation`.
    pub fn with_collation(mut self, collation: Option<basalt_value::Collation>) -> ParseContext {
        self.collation = collation;
        self
    }

    pub fn collation(&self) -> Option<&basalt_value::Collation> {
        self.collation.as_ref()
    }

    /// Declares a variable visible to everything parsed with this context afterwards (the
    /// `let` option of `aggregate`); its value is given with [`Variables::set`].
    pub fn define(&mut self, name: &str) -> Result<VarId> {
        validate_name_for_write(name)?;
        self.names.push(name.to_string());
        Ok(VarId(self.names.len() - 1))
    }

    /// The slot of `name`, innermost scope first.
    pub(crate) fn lookup(&self, name: &str) -> Option<VarId> {
        self.names.iter().rposition(|n| n == name).map(VarId)
    }

    /// A context for a nested scope that binds `name` (as `$let`, `$map`, `$filter` and
    /// `$reduce` do).
    pub(crate) fn nested(&self, name: &str) -> Result<(ParseContext, VarId)> {
        let mut inner = self.clone();
        let id = inner.define(name)?;
        Ok((inner, id))
    }
}

/// Checks a name a user binds (`$let` vars, `as`): lowercase or non-ASCII first, then
/// letters, digits and `_`. `CURRENT` is the one system variable users may rebind.
pub(crate) fn validate_name_for_write(name: &str) -> Result<()> {
    if name == "CURRENT" {
        return Ok(());
    }
    // MongoDB 8 refuses a bad name to bind as FailedToParse.
    let first = name
        .chars()
        .next()
        .ok_or_else(|| Error::failed_to_parse("empty variable names are not allowed"))?;
    if !first.is_ascii_lowercase() && first.is_ascii() {
        return Err(Error::failed_to_parse(format!(
            "'{name}' starts with an invalid character for a user variable name"
        )));
    }
    validate_rest(name).map_err(|e| Error::failed_to_parse(e.message))
}

/// Checks a name that is read (`$$name`): system variables start with an uppercase letter.
pub(crate) fn validate_name_for_read(name: &str) -> Result<()> {
    let first = name
        .chars()
        .next()
        .ok_or_else(|| Error::failed_to_parse("empty variable names are not allowed"))?;
    if !first.is_ascii_alphabetic() && first.is_ascii() {
        return Err(Error::location(
            16870,
            format!("'{name}' starts with an invalid character for a variable name"),
        ));
    }
    validate_rest(name)
}

fn validate_rest(name: &str) -> Result<()> {
    match name
        .chars()
        .skip(1)
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || !c.is_ascii()))
    {
        Some(c) => Err(Error::location(
            16868,
            format!("'{name}' contains an invalid character for a variable name: '{c}'"),
        )),
        None => Ok(()),
    }
}

/// Values fixed for one command: the clock reading behind `$$NOW` (and the cluster
/// time behind `$$CLUSTER_TIME`), the values of the
/// variables declared with [`ParseContext::define`], and the collation strings compare
/// under in `$eq`, `$in` and the other comparisons.
#[derive(Clone, Debug)]
pub struct Variables {
    now: DateTime,
    /// `$$CLUSTER_TIME`, on a replica set member.
    cluster_time: Option<bson::Timestamp>,
    values: Vec<Option<Bson>>,
    collation: Option<basalt_value::Collation>,
}

impl Default for Variables {
    fn default() -> Variables {
        Variables::new()
    }
}

impl Variables {
    /// Reads the clock once, so every `$$NOW` in the command sees the same instant.
    pub fn new() -> Variables {
        Variables::with_now(basalt_value::clock::now())
    }

    pub fn with_now(now: DateTime) -> Variables {
        Variables {
            now,
            cluster_time: basalt_value::clock::cluster_time(),
            values: Vec::new(),
            collation: None,
        }
    }

    /// These variables, with string comparisons under `collation`.
    pub fn with_collation(mut self, collation: Option<&basalt_value::Collation>) -> Variables {
        self.collation = collation.cloned();
        self
    }

    pub fn collation(&self) -> Option<&basalt_value::Collation> {
        self.collation.as_ref()
    }

    pub fn now(&self) -> DateTime {
        self.now
    }

    pub fn cluster_time(&self) -> Option<bson::Timestamp> {
        self.cluster_time
    }

    pub fn set(&mut self, id: VarId, value: Bson) {
        if self.values.len() <= id.0 {
            self.values.resize(id.0 + 1, None);
        }
        self.values[id.0] = Some(value);
    }

    pub(crate) fn get(&self, id: VarId) -> Option<&Bson> {
        self.values.get(id.0).and_then(Option::as_ref)
    }
}

/// What one command defines for every expression it holds (filters with `$expr`,
/// projections, update pipelines): the names of its `let` variables, for parsing, and
/// their values with `$$NOW`, for evaluating. Built once per command, so every part of it
/// sees the same `$$NOW` and the same `let` values.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub names: ParseContext,
    pub values: Variables,
}

impl Scope {
    /// A scope with no `let` variables.
    pub fn new() -> Scope {
        Scope::default()
    }

    /// The scope of a command's `let` option. Each value is an expression evaluated once,
    /// here, against an empty document; later variables may use earlier ones.
    pub fn with_let(let_vars: &Document) -> Result<Scope> {
        let mut scope = Scope::new();
        for (name, spec) in let_vars {
            let value = Expression::parse(spec, &scope.names)?
                .evaluate(&Document::new(), &scope.values)?
                .unwrap_or(Bson::Null);
            let id = scope.names.define(name)?;
            scope.values.set(id, value);
        }
        Ok(scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        assert!(validate_name_for_write("x1_y").is_ok());
        assert!(validate_name_for_write("CURRENT").is_ok());
        assert_eq!(validate_name_for_write("").unwrap_err().code.0, 9);
        assert_eq!(validate_name_for_write("Xy").unwrap_err().code.0, 9);
        assert_eq!(validate_name_for_write("a-b").unwrap_err().code.0, 9);
        assert!(validate_name_for_read("ROOT").is_ok());
        assert_eq!(validate_name_for_read("1a").unwrap_err().code.0, 16870);
    }

    #[test]
    fn inner_scopes_shadow_outer_ones() {
        let mut ctx = ParseContext::new();
        let outer = ctx.define("x").unwrap();
        let (inner, id) = ctx.nested("x").unwrap();
        assert_ne!(outer, id);
        assert_eq!(inner.lookup("x"), Some(id));
        assert_eq!(ctx.lookup("x"), Some(outer));
    }

    #[test]
    fn let_scope_evaluates_once_in_order() {
        let scope = Scope::with_let(&bson::doc! {
            "base": 10, "twice": {"$multiply": ["$$base", 2]}, "missing": "$nope",
        })
        .unwrap();
        let e = Expression::parse(&Bson::String("$$twice".into()), &scope.names).unwrap();
        assert_eq!(
            e.evaluate(&Document::new(), &scope.values).unwrap(),
            Some(Bson::Int32(20))
        );
        let e = Expression::parse(&Bson::String("$$missing".into()), &scope.names).unwrap();
        assert_eq!(
            e.evaluate(&Document::new(), &scope.values).unwrap(),
            Some(Bson::Null)
        );
        assert_eq!(
            Scope::with_let(&bson::doc! {"Bad": 1}).unwrap_err().code.0,
            9
        );
    }
}
