//! `$where`: a JavaScript predicate, a string or a function, called with `this` (and
//! `obj`) bound to the document; the document matches when the result is truthy.

use crate::sandbox::{scripting_enabled, with_session, Script};
use basalt_error::{Error, Result};
use bson::{Bson, Document};
use rquickjs::convert::Coerced;

/// A parsed `$where`.
#[derive(Clone, Debug)]
pub struct WhereClause {
    script: Script,
}

impl WhereClause {
    /// Parses the operand of `$where`: a string, JavaScript code, or code with a scope.
    pub fn parse(operand: &Bson) -> Result<WhereClause> {
        if !scripting_enabled() {
            return Err(Error::bad_value("no globalScriptEngine in $where parsing"));
        }
        let script = match operand {
            Bson::String(code) | Bson::JavaScriptCode(code) => Script::new(code, &Document::new())?,
            Bson::JavaScriptCodeWithScope(code) => Script::new(&code.code, &code.scope)?,
            _ => return Err(Error::bad_value("$where got bad type")),
        };
        Ok(WhereClause { script })
    }

    /// The top-level fields the script reads, when it names them all (`this.a`): a
    /// document holding only those matches as the whole one does.
    pub fn fields_read(&self) -> Option<&[String]> {
        self.script.fields_read()
    }

    /// Whether `doc` matches, or the script's error.
    pub fn matches(&self, doc: &Document) -> Result<bool> {
        with_session(|session| {
            let compiled = session.compile(&self.script)?;
            let this = self.script.document_to_js(session, doc)?.into_value();
            let result = session.call(&compiled, this, Vec::new())?;
            Ok(result
                .as_bool()
                .unwrap_or_else(|| result.get::<Coerced<bool>>().map(|c| c.0).unwrap_or(false)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId};

    fn matches(operand: Bson, doc: Document) -> bool {
        WhereClause::parse(&operand).unwrap().matches(&doc).unwrap()
    }

    #[test]
    fn strings_and_functions_see_this_and_obj() {
        assert!(matches("this.a > this.b".into(), doc! {"a": 2, "b": 1}));
        assert!(!matches("obj.a > obj.b".into(), doc! {"a": 1, "b": 1}));
        assert!(matches(
            Bson::JavaScriptCode("function () { return this._id.str.length == 24 }".into()),
            doc! {"_id": ObjectId::new()}
        ));
    }

    #[test]
    fn code_with_scope_sees_its_scope() {
        let operand = Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
            code: "this.a == wanted".into(),
            scope: doc! {"wanted": 5},
        });
        assert!(matches(operand, doc! {"a": 5}));
    }

    #[test]
    fn other_operands_are_refused() {
        assert_eq!(
            WhereClause::parse(&Bson::Int32(1)).unwrap_err().message,
            "$where got bad type"
        );
    }
}
