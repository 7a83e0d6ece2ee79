//! The environment one evaluation runs in: the document, the command's variables, and
//! the chain of bindings made by enclosing `$let`/`$map`/`$filter`/`$reduce` scopes.
//!
//! Bindings live on the stack of the operator that makes them and link to their parent,
//! so entering a scope allocates nothing.

use crate::context::{VarId, Variables};
use bson::{Bson, Document};
use std::borrow::Cow;

/// The result of evaluating an expression: `None` is MongoDB's "missing" (a field that
/// is absent), which differs from null in `$ifNull`, `$type` and `$project`. Values read
/// from the input document are borrowed, not copied.
pub type Value<'a> = Option<Cow<'a, Bson>>;

#[derive(Clone, Copy)]
pub(crate) struct Env<'a> {
    pub root: &'a Document,
    pub vars: &'a Variables,
    scope: Option<&'a Binding<'a>>,
}

pub(crate) struct Binding<'a> {
    id: VarId,
    value: Option<&'a Bson>,
    parent: Option<&'a Binding<'a>>,
}

impl<'a> Env<'a> {
    pub fn new(root: &'a Document, vars: &'a Variables) -> Env<'a> {
        Env {
            root,
            vars,
            scope: None,
        }
    }

    /// A binding of `id` to `value` on top of this environment's scope, to be passed to
    /// [`Env::with`].
    pub fn binding<'b>(&self, id: VarId, value: Option<&'b Bson>) -> Binding<'b>
    where
        'a: 'b,
    {
        Binding {
            id,
            value,
            parent: self.scope,
        }
    }

    pub fn with<'b>(&self, binding: &'b Binding<'b>) -> Env<'b>
    where
        'a: 'b,
    {
        Env {
            root: self.root,
            vars: self.vars,
            scope: Some(binding),
        }
    }

    /// The value of a user variable; `None` when it is bound to missing.
    pub fn lookup(&self, id: VarId) -> Option<&'a Bson> {
        let mut scope = self.scope;
        while let Some(binding) = scope {
            if binding.id == id {
                return binding.value;
            }
            scope = binding.parent;
        }
        self.vars.get(id)
    }
}
