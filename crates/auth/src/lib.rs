//! Authentication and authorization as MongoDB defines them: SCRAM credentials and
//! conversations (`scram`), and action types, resources, privileges and the built-in
//! roles (`privileges`). The server's commands and checks build on these; replica set
//! members use the SCRAM client to prove they hold the key file.

pub mod privileges;
pub mod scram;

pub use privileges::{Action, Actions, Privilege, Resource};
pub use scram::{Credentials, Mechanism};

/// The user a replica set member authenticates as with the key file (in `local`).
pub const INTERNAL_USER: &str = "__system";
pub const INTERNAL_USER_DB: &str = "local";

/// The password of the internal user: the key file's text without its whitespace, as
/// MongoDB reads it (base64 characters, 6 to 1024 of them).
pub fn key_from_file_text(text: &str) -> basalt_error::Result<String> {
    let key: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if key.len() < 6 || key.len() > 1024 {
        return Err(basalt_error::Error::bad_value(format!(
            "security key must be between 6 and 1024 characters, not {}",
            key.len()
        )));
    }
    if let Some(bad) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '+' || *c == '/' || *c == '='))
    {
        return Err(basalt_error::Error::bad_value(format!(
            "invalid char in key file: {bad:?}"
        )));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_is_base64_text_of_6_to_1024_characters() {
        assert_eq!(key_from_file_text("abc def\nghi\n").unwrap(), "abcdefghi");
        assert!(key_from_file_text("short").is_err());
        assert!(key_from_file_text(&"a".repeat(1025)).is_err());
        let bad = key_from_file_text("abcdef!gh").unwrap_err();
        assert!(bad.message.contains("invalid char"), "{}", bad.message);
    }
}
