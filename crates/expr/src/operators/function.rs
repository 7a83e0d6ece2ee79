//! `$function`: a JavaScript function called with the values of its `args` expressions;
//! its result (converted back to BSON with MongoDB's shell types) is the value. The
//! function is compiled when the pipeline is parsed, once per worker thread.

use crate::context::ParseContext;
use crate::env::{Env, Value};
use crate::expression::Expression;
use basalt_error::{Error, Result};
use basalt_js::Script;
use bson::{Bson, Document};
use std::borrow::Cow;

#[derive(Debug)]
pub(crate) struct FunctionOp {
    script: Script,
    args: Vec<Expression>,
}

impl FunctionOp {
    pub(crate) fn parse(name: &str, spec: &Bson, ctx: &ParseContext) -> Result<Option<FunctionOp>> {
        if name != "$function" {
            return Ok(None);
        }
        basalt_js::check_scripting_enabled()?;
        let Bson::Document(spec) = spec else {
            return Err(Error::location(
                31260,
                "$function requires an object as an argument",
            ));
        };
        let body = match spec.get("body") {
            Some(Bson::String(code) | Bson::JavaScriptCode(code)) => code,
            Some(_) => {
                return Err(Error::location(
                    31262,
                    "$function body must be a string or JavaScript code",
                ))
            }
            None => {
                return Err(Error::location(
                    31262,
                    "The body function must be specified.",
                ))
            }
        };
        let args = match spec.get("args") {
            Some(Bson::Array(items)) => items
                .iter()
                .map(|item| Expression::parse(item, ctx))
                .collect::<Result<Vec<_>>>()?,
            Some(_) => {
                return Err(Error::location(
                    31266,
                    "The args field must be of type array",
                ))
            }
            None => return Err(Error::location(31265, "The args field must be specified.")),
        };
        match spec.get("lang") {
            Some(Bson::String(lang)) if lang == "js" => {}
            Some(_) => {
                return Err(Error::location(
                    31419,
                    "Currently the only supported language specifier is 'js'.",
                ))
            }
            None => return Err(Error::location(31418, "The lang field must be specified.")),
        }
        Ok(Some(FunctionOp {
            script: Script::new(body, &Document::new())?,
            args,
        }))
    }

    pub(crate) fn eval<'a>(&'a self, env: &Env<'a>) -> Result<Value<'a>> {
        let args = self
            .args
            .iter()
            .map(|arg| Ok(arg.eval(env)?.map_or(Bson::Undefined, Cow::into_owned)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(Cow::Owned(self.script.call(None, &args)?)))
    }
}

#[cfg(test)]
mod tests {
    use crate::expression::test_util::*;
    use bson::{bson, doc, Bson};

    #[test]
    fn calls_the_body_with_evaluated_args() {
        let spec = bson!({"$function": {
            "body": "function (name, n) { return name.toUpperCase() + n; }",
            "args": ["$name", {"$add": [1, 2]}],
            "lang": "js",
        }});
        let got = eval_in(spec, &doc! {"name": "ab"}).unwrap();
        assert_eq!(got, Some(Bson::String("AB3".into())));
    }

    #[test]
    fn malformed_specs_get_mongodb_codes() {
        assert_eq!(error_code(bson!({"$function": 1})), 31260);
        assert_eq!(
            error_code(bson!({"$function": {"args": [], "lang": "js"}})),
            31262
        );
        assert_eq!(
            error_code(bson!({"$function": {"body": "function(){}", "lang": "js"}})),
            31265
        );
        assert_eq!(
            error_code(bson!({"$function": {"body": "function(){}", "args": []}})),
            31418
        );
        assert_eq!(
            error_code(bson!({"$function": {"body": "function(){}", "args": [], "lang": "py"}})),
            31419
        );
        assert_eq!(
            error_code(
                bson!({"$function": {"body": "function(){ throw 1 }", "args": [], "lang": "js"}})
            ),
            139
        );
    }
}
