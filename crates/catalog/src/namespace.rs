//! Database and collection name rules, as MongoDB enforces them (InvalidNamespace).

use basalt_error::{Error, ErrorCode, Result};

/// MongoDB's limit on a database name, in bytes.
pub const DATABASE_NAME_LENGTH_MAX_BYTES: usize = 63;
/// MongoDB's limit on a full namespace `db.collection`, in bytes.
pub const NAMESPACE_LENGTH_MAX_BYTES: usize = 255;

pub fn validate_database_name(db: &str) -> Result<()> {
    if db.is_empty() {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            "database name cannot be empty",
        ));
    }
    if db.len() > DATABASE_NAME_LENGTH_MAX_BYTES {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            format!("db name is too long: {db}"),
        ));
    }
    if let Some(bad) = db.chars().find(|c| "/\\. \"$\0".contains(*c)) {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            format!("Invalid database name: '{db}' (contains '{bad}')"),
        ));
    }
    Ok(())
}

pub fn validate_collection_name(db: &str, collection: &str) -> Result<()> {
    validate_database_name(db)?;
    let invalid = |why: &str| {
        Error::new(
            ErrorCode::INVALID_NAMESPACE,
            format!("Invalid collection name: {db}.{collection}{why}"),
        )
    };
    if collection.is_empty() {
        return Err(invalid(" (collection name cannot be empty)"));
    }
    if collection.contains('\0') || collection.contains('$') {
        return Err(invalid(""));
    }
    if collection.starts_with('.') {
        return Err(invalid(""));
    }
    if db.len() + 1 + collection.len() > NAMESPACE_LENGTH_MAX_BYTES {
        return Err(Error::new(
            ErrorCode::INVALID_NAMESPACE,
            format!("Fully qualified namespace is too long. Namespace: {db}.{collection}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_names() {
        assert!(validate_database_name("test").is_ok());
        assert!(validate_database_name("a.b").is_err());
        assert!(validate_database_name("").is_err());
        assert!(validate_collection_name("test", "c.d").is_ok());
        assert!(validate_collection_name("test", "").is_err());
        assert!(validate_collection_name("test", "a$b").is_err());
        let err = validate_collection_name("test", "").unwrap_err();
        assert_eq!(err.code, ErrorCode::INVALID_NAMESPACE);
    }
}
