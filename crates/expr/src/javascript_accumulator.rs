//! `$accumulator`: a `$group` accumulator written in JavaScript. `init` makes a group's
//! state from `initArgs`, `accumulate` folds each document's `accumulateArgs` into it,
//! `merge` combines the states of two partitions, `finalize` turns the state into the
//! output value. The state crosses between calls as BSON, so it keeps its types.
//!
//! The argument expression of the accumulator evaluates to `[initArgs, accumulateArgs]`;
//! `initArgs` are taken from the group's first document.

use crate::context::ParseContext;
use crate::expression::Expression;
use basalt_error::{Error, Result};
use basalt_js::Script;
use basalt_value::value_memory_bytes;
use bson::{Bson, Document};
use std::sync::Arc;

/// The parsed functions of one `$accumulator`.
#[derive(Debug)]
pub struct JavaScriptAccumulator {
    init: Script,
    accumulate: Script,
    merge: Script,
    finalize: Option<Script>,
}

impl JavaScriptAccumulator {
    /// Parses `{init, initArgs, accumulate, accumulateArgs, merge, finalize, lang}` into
    /// the functions and the argument expression that feeds them.
    pub(crate) fn parse(
        spec: &Bson,
        ctx: &ParseContext,
    ) -> Result<(Arc<JavaScriptAccumulator>, Expression)> {
        basalt_js::check_scripting_enabled()?;
        let Bson::Document(spec) = spec else {
            return Err(Error::location(
                4544703,
                "$accumulator expects an object as an argument",
            ));
        };
        let code = |field: &str| -> Result<Option<Script>> {
            match spec.get(field) {
                None => Ok(None),
                Some(Bson::String(code) | Bson::JavaScriptCode(code)) => {
                    Script::new(code, &Document::new()).map(Some)
                }
                Some(_) => Err(Error::location(
                    4544705,
                    format!("$accumulator '{field}' must be a string or JavaScript code"),
                )),
            }
        };
        let required = |field: &str| {
            code(field)?.ok_or_else(|| {
                Error::location(
                    4544706,
                    format!("$accumulator missing required argument '{field}'"),
                )
            })
        };
        match spec.get("lang") {
            Some(Bson::String(lang)) if lang == "js" => {}
            Some(_) => {
                return Err(Error::location(
                    4544707,
                    "$accumulator only supports language 'js'",
                ))
            }
            None => {
                return Err(Error::location(
                    4544706,
                    "$accumulator missing required argument 'lang'",
                ))
            }
        }
        let args = |field: &str| match spec.get(field) {
            None => Ok(Bson::Array(Vec::new())),
            Some(array @ Bson::Array(_)) => Ok(array.clone()),
            Some(_) => Err(Error::location(
                4544708,
                format!("$accumulator '{field}' must be an array"),
            )),
        };
        let accumulator = JavaScriptAccumulator {
            init: required("init")?,
            accumulate: required("accumulate")?,
            merge: required("merge")?,
            finalize: code("finalize")?,
        };
        let argument = Expression::parse(
            &Bson::Array(vec![args("initArgs")?, args("accumulateArgs")?]),
            ctx,
        )?;
        Ok((Arc::new(accumulator), argument))
    }
}

/// One group's running `$accumulator` state: `None` until its first document.
#[derive(Clone, Debug)]
pub struct JavaScriptState {
    functions: Arc<JavaScriptAccumulator>,
    state: Option<Bson>,
}

impl JavaScriptState {
    pub(crate) fn new(functions: Arc<JavaScriptAccumulator>) -> JavaScriptState {
        JavaScriptState {
            functions,
            state: None,
        }
    }

    /// Folds one document's `[initArgs, accumulateArgs]` into the state; returns the
    /// bytes of memory the state grew by.
    pub(crate) fn accumulate(&mut self, args: Option<&Bson>) -> Result<isize> {
        let (init_args, accumulate_args) = match args {
            Some(Bson::Array(pair)) => match pair.as_slice() {
                [Bson::Array(init), Bson::Array(accumulate)] => {
                    (init.as_slice(), accumulate.as_slice())
                }
                _ => (&[][..], &[][..]),
            },
            _ => (&[][..], &[][..]),
        };
        let (state, before) = match self.state.take() {
            Some(state) => {
                let size = value_memory_bytes(&state);
                (state, size)
            }
            None => (self.functions.init.call(None, init_args)?, 0),
        };
        let mut call_args = Vec::with_capacity(1 + accumulate_args.len());
        call_args.push(state);
        call_args.extend_from_slice(accumulate_args);
        let state = self.functions.accumulate.call(None, &call_args)?;
        let grown = value_memory_bytes(&state) as isize - before as isize;
        self.state = Some(state);
        Ok(grown)
    }

    /// Absorbs the state of a partition that came after this one.
    pub(crate) fn merge(&mut self, later: JavaScriptState) -> Result<()> {
        self.state = match (self.state.take(), later.state) {
            (Some(a), Some(b)) => Some(self.functions.merge.call(None, &[a, b])?),
            (a, b) => a.or(b),
        };
        Ok(())
    }

    /// `finalize(state)`, or the state.
    pub(crate) fn finish(self) -> Result<Bson> {
        let state = match self.state {
            Some(state) => state,
            None => self.functions.init.call(None, &[])?,
        };
        match &self.functions.finalize {
            Some(finalize) => finalize.call(None, &[state]),
            None => Ok(state),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::accumulator::AccumulatorSpec;
    use crate::context::ParseContext;
    use bson::{bson, doc, Bson};

    #[test]
    fn init_accumulate_merge_finalize() {
        let spec = AccumulatorSpec::parse(
            "avg",
            &bson!({"$accumulator": {
                "init": "function (start) { return {count: 0, sum: start}; }",
                "initArgs": [100],
                "accumulate": "function (s, v) { return {count: s.count + 1, sum: s.sum + v}; }",
                "accumulateArgs": ["$v"],
                "merge": "function (a, b) { return {count: a.count + b.count, sum: a.sum + b.sum - 100}; }",
                "finalize": "function (s) { return (s.sum - 100) / s.count; }",
                "lang": "js",
            }}),
            &ParseContext::new(),
        )
        .unwrap();
        let vars = crate::Variables::new();
        let mut left = spec.new_accumulator();
        let mut right = spec.new_accumulator();
        let args = |v: i32| spec.argument.evaluate(&doc! {"v": v}, &vars).unwrap();
        left.accumulate(args(1).as_ref()).unwrap();
        left.accumulate(args(2).as_ref()).unwrap();
        right.accumulate(args(6).as_ref()).unwrap();
        left.merge(right).unwrap();
        assert_eq!(left.finish().unwrap(), Bson::Double(3.0));
    }

    #[test]
    fn a_missing_function_is_refused() {
        let e = AccumulatorSpec::parse(
            "x",
            &bson!({"$accumulator": {"init": "function () {}", "merge": "function () {}", "lang": "js"}}),
            &ParseContext::new(),
        )
        .unwrap_err();
        assert_eq!(e.code.0, 4544706);
    }
}
