//! One update operator at one path: parsing its operand and computing the field's new
//! value from the old one. The families are implemented in `field.rs`, `arithmetic.rs`
//! and `array.rs`; this file dispatches.

use super::tree::Env;
use super::{arithmetic, array, field};
use basalt_error::Result;
use bson::Bson;

#[derive(Clone, Debug)]
pub(super) enum Modifier {
    Set(Bson),
    SetOnInsert(Bson),
    Unset,
    CurrentDate(field::DateKind),
    Arithmetic(arithmetic::Arithmetic),
    Bound(arithmetic::Bound),
    Bitwise(arithmetic::Bitwise),
    Push(array::Push),
    AddToSet(Vec<Bson>),
    Pop(array::PopEnd),
    Pull(array::Pull),
    PullAll(Vec<Bson>),
    RenameSource,
    /// The target of the rename with this index (see `OperatorUpdate::renames`).
    RenameTarget(usize),
}

/// What a modifier does to its field.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Outcome {
    Keep,
    Set(Bson),
    Remove,
}

/// The field a modifier is applied to: its own name and its full path, for messages.
pub(super) struct Target<'a> {
    pub field: &'a str,
    pub path: &'a str,
}

pub(super) fn is_update_operator(name: &str) -> bool {
    matches!(
        name,
        "$set"
            | "$setOnInsert"
            | "$unset"
            | "$currentDate"
            | "$inc"
            | "$mul"
            | "$bit"
            | "$min"
            | "$max"
            | "$rename"
            | "$push"
            | "$addToSet"
            | "$pop"
            | "$pull"
            | "$pullAll"
    )
}

impl Modifier {
    /// Parses the operand of `operator` for `path` (`$rename` is parsed by the caller,
    /// since it touches two paths).
    pub(super) fn parse(operator: &str, path: &str, operand: &Bson) -> Result<Modifier> {
        Ok(match operator {
            "$set" => Modifier::Set(operand.clone()),
            "$setOnInsert" => Modifier::SetOnInsert(operand.clone()),
            "$unset" => Modifier::Unset,
            "$currentDate" => Modifier::CurrentDate(field::parse_current_date(path, operand)?),
            "$inc" | "$mul" => {
                Modifier::Arithmetic(arithmetic::Arithmetic::parse(operator, path, operand)?)
            }
            "$min" | "$max" => Modifier::Bound(arithmetic::Bound::new(operator, operand)),
            "$bit" => Modifier::Bitwise(arithmetic::Bitwise::parse(path, operand)?),
            "$push" => Modifier::Push(array::Push::parse(operand)?),
            "$addToSet" => Modifier::AddToSet(array::parse_add_to_set(operand)?),
            "$pop" => Modifier::Pop(array::PopEnd::parse(path, operand)?),
            "$pull" => Modifier::Pull(array::Pull::parse(operand)?),
            _ => Modifier::PullAll(array::parse_pull_all(operand)?),
        })
    }

    /// Whether applying to a missing field sets it (and so creates missing parents).
    pub(super) fn creates(&self, env: &Env) -> bool {
        match self {
            Modifier::Unset
            | Modifier::Pop(_)
            | Modifier::Pull(_)
            | Modifier::PullAll(_)
            | Modifier::RenameSource => false,
            Modifier::SetOnInsert(_) => env.ctx.is_upsert_insert,
            Modifier::RenameTarget(i) => env.renamed.get(*i).is_some_and(Option::is_some),
            _ => true,
        }
    }

    pub(super) fn apply(
        &self,
        existing: Option<&Bson>,
        target: &Target,
        env: &Env,
    ) -> Result<Outcome> {
        Ok(match self {
            Modifier::Set(value) => Outcome::Set(value.clone()),
            Modifier::SetOnInsert(value) if env.ctx.is_upsert_insert => Outcome::Set(value.clone()),
            Modifier::SetOnInsert(_) => Outcome::Keep,
            Modifier::Unset | Modifier::RenameSource => Outcome::Remove,
            Modifier::CurrentDate(kind) => Outcome::Set(kind.now(env.ctx.now)),
            Modifier::Arithmetic(a) => a.apply(existing, target, env)?,
            Modifier::Bitwise(b) => b.apply(existing, target, env)?,
            Modifier::Bound(b) => b.apply(existing),
            Modifier::Push(p) => p.apply(existing, target, env)?,
            Modifier::AddToSet(values) => array::add_to_set(values, existing, target)?,
            Modifier::Pop(end) => end.apply(existing, target)?,
            Modifier::Pull(p) => p.apply(existing)?,
            Modifier::PullAll(values) => array::pull_all(values, existing)?,
            Modifier::RenameTarget(i) => match env.renamed.get(*i).cloned().flatten() {
                Some(value) => Outcome::Set(value),
                None => Outcome::Keep,
            },
        })
    }
}
