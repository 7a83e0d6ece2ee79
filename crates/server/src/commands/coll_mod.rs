//! `collMod`: changes a collection's options. Only the options Basalt keeps today can
//! change (`changeStreamPreAndPostImages`, `validationLevel`, `validationAction`); the rest
//! are refused by name rather than ignored.

use super::create::pre_and_post_images;
use super::Ctx;
use crate::request::{Fields, GENERIC_COMMAND_FIELDS};
use basalt_error::{Error, ErrorCode, Result};
use bson::Document;

pub fn coll_mod(ctx: &Ctx<'_>, body: &Document) -> Result<Document> {
    let name = Fields::new(body).collection()?;
    let Some(collection) = ctx.server.catalog.get(ctx.db, name) else {
        return Err(Error::new(
            ErrorCode::NAMESPACE_NOT_FOUND,
            format!("ns does not exist: {}.{name}", ctx.db),
        ));
    };
    let mut options = collection.meta().options.clone();
    for (key, value) in body.iter().skip(1) {
        match key.as_str() {
            "changeStreamPreAndPostImages" => {
                options.insert(key.clone(), pre_and_post_images(value)?);
            }
            "validationLevel" | "validationAction" => {
                options.insert(key.clone(), value.clone());
            }
            generic if GENERIC_COMMAND_FIELDS.contains(&generic) => {}
            other => {
                return Err(Error::new(
                    ErrorCode::COMMAND_NOT_SUPPORTED,
                    format!("collMod option '{other}' is not supported by Basalt yet"),
                ))
            }
        }
    }
    ctx.server.catalog.set_options(&collection, options)?;
    Ok(Document::new())
}
