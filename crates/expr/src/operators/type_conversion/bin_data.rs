//! `$convert`'s conversions to and from binData, as MongoDB 8.0 added them: a string's
//! text or encoding by `format` (`base64`, `base64url`, `hex`, `utf8`, `uuid`; `auto`
//! for `$toString`), and numbers as their bytes (`byteOrder`: little-endian unless
//! `big`). A value that does not fit is a conversion failure (241), which `onError`
//! catches.

use super::{Failure, Target};
use crate::expression::type_name;
use basalt_error::ErrorCode;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use bson::spec::BinarySubtype;
use bson::{Binary, Bson};
use std::borrow::Cow;

/// The longest string a conversion makes, as MongoDB's BSON strings (16 MiB).
const STRING_BYTES_MAX: usize = 16 * 1024 * 1024;

/// The subtype of UUIDs.
const UUID_SUBTYPE: u8 = 4;
/// The old binary subtype (2), whose payload holds its own length first.
const OLD_BINARY_SUBTYPE: u8 = 2;

/// How a string stands for bytes (`$convert`'s `format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Base64,
    Base64Url,
    Hex,
    Utf8,
    Uuid,
    /// A UUID's text for a 16-byte UUID, else base64 (`$toString`'s choice).
    Auto,
}

impl Format {
    pub(crate) fn from_name(name: &str) -> Option<Format> {
        Some(match name {
            "base64" => Format::Base64,
            "base64url" => Format::Base64Url,
            "hex" => Format::Hex,
            "utf8" => Format::Utf8,
            "uuid" => Format::Uuid,
            "auto" => Format::Auto,
            _ => return None,
        })
    }
}

/// base64url as MongoDB reads it: padding optional.
const URL_SAFE_ANY_PAD: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

fn unsupported(value: &Bson, target: &str) -> Failure {
    Failure::new(
        format!(
            "Unsupported conversion from {} to {target}",
            type_name(Some(value))
        ),
        None,
    )
}

fn bad_text(text: &str, format: &str) -> Failure {
    Failure::new(
        format!("Failed to parse BinData '{text}'"),
        Some(format!("Input is not a valid {format} string")),
    )
}

/// `value` as binData of `subtype`: a string's bytes by `format`, a number's bytes.
pub(crate) fn to_bin_data(
    value: &Bson,
    subtype: u8,
    format: Option<Format>,
    big_endian: bool,
) -> Result<Bson, Failure> {
    let bytes = match value {
        Bson::String(text) => from_text(text, subtype, format)?,
        Bson::Int32(n) => ordered(n.to_le_bytes().to_vec(), big_endian),
        Bson::Int64(n) => ordered(n.to_le_bytes().to_vec(), big_endian),
        Bson::Double(n) => ordered(n.to_le_bytes().to_vec(), big_endian),
        Bson::Binary(bin) if u8::from(bin.subtype) == subtype => bin.bytes.clone(),
        _ => return Err(unsupported(value, "binData")),
    };
    Ok(Bson::Binary(Binary {
        subtype: BinarySubtype::from(subtype),
        bytes,
    }))
}

/// Little-endian bytes in the order asked for.
fn ordered(mut bytes: Vec<u8>, big_endian: bool) -> Vec<u8> {
    if big_endian {
        bytes.reverse();
    }
    bytes
}

fn from_text(text: &str, subtype: u8, format: Option<Format>) -> Result<Vec<u8>, Failure> {
    let format = format.unwrap_or(Format::Auto);
    // A UUID's subtype takes a UUID's text, and that text only that subtype.
    if (format == Format::Uuid) != (subtype == UUID_SUBTYPE) {
        return Err(Failure::new(
            format!("Failed to parse BinData '{text}'"),
            Some("Only the uuid format converts to and from binData of subtype 4".into()),
        ));
    }
    match format {
        Format::Base64 => STANDARD.decode(text).map_err(|_| bad_text(text, "base64")),
        Format::Base64Url => URL_SAFE_ANY_PAD
            .decode(text)
            .map_err(|_| bad_text(text, "base64url")),
        Format::Hex => from_hex(text).ok_or_else(|| bad_text(text, "hex")),
        Format::Utf8 => Ok(text.as_bytes().to_vec()),
        Format::Uuid => from_uuid(text).ok_or_else(|| bad_text(text, "UUID")),
        Format::Auto => Err(Failure::new(
            format!("Failed to parse BinData '{text}'"),
            Some("Format 'auto' does not convert strings to binData".into()),
        )),
    }
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The 16 bytes of a UUID written `8-4-4-4-12` in hex.
fn from_uuid(text: &str) -> Option<Vec<u8>> {
    let groups: Vec<&str> = text.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lengths != [8, 4, 4, 4, 12] {
        return None;
    }
    from_hex(&groups.concat())
}

/// The bytes of `bin` as mongod sees them: the old binary subtype's payload begins with
/// its own length, which the BSON reader takes off and mongod keeps.
fn payload(bin: &Binary) -> Cow<'_, [u8]> {
    if u8::from(bin.subtype) == OLD_BINARY_SUBTYPE {
        let mut bytes = (bin.bytes.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(&bin.bytes);
        Cow::Owned(bytes)
    } else {
        Cow::Borrowed(&bin.bytes)
    }
}

/// `bin` as text in `format`.
pub(crate) fn to_text(value: &Bson, bin: &Binary, format: Format) -> Result<String, Failure> {
    let uuid = u8::from(bin.subtype) == UUID_SUBTYPE && bin.bytes.len() == 16;
    let bytes = payload(bin);
    let text = match format {
        Format::Base64 => STANDARD.encode(&bytes),
        Format::Base64Url => URL_SAFE_NO_PAD.encode(&bytes),
        Format::Hex => bytes.iter().map(|b| format!("{b:02X}")).collect(),
        Format::Utf8 => {
            let text = String::from_utf8(bytes.to_vec())
                .map_err(|_| unsupported(value, "string").with_detail("Invalid UTF-8"))?;
            if text.len() >= STRING_BYTES_MAX {
                return Err(too_long().with_code(ErrorCode::location(16493)));
            }
            text
        }
        Format::Uuid if uuid => uuid_text(&bin.bytes),
        Format::Uuid => return Err(unsupported(value, "string").with_detail("Not a UUID")),
        Format::Auto if uuid => uuid_text(&bin.bytes),
        Format::Auto => STANDARD.encode(&bytes),
    };
    if text.len() >= STRING_BYTES_MAX {
        return Err(too_long());
    }
    Ok(text)
}

fn too_long() -> Failure {
    Failure::new(
        "Conversion would exceed the maximum string size",
        Some(format!("{STRING_BYTES_MAX} bytes")),
    )
}

fn uuid_text(bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The number `bin`'s bytes hold: a signed integer of 1, 2 or 4 bytes (8 too for a
/// long), a float of 4 or 8 bytes for a double.
pub(crate) fn to_number(
    value: &Bson,
    bin: &Binary,
    target: Target,
    big_endian: bool,
) -> Result<Bson, Failure> {
    let mut bytes = payload(bin).into_owned();
    if big_endian {
        bytes.reverse();
    }
    let wrong_length = || {
        unsupported(value, target.name()).with_detail(format!("binData of {} bytes", bytes.len()))
    };
    let integer = |widest: usize| -> Result<i64, Failure> {
        if !matches!(bytes.len(), 1 | 2 | 4 | 8) || bytes.len() > widest {
            return Err(wrong_length());
        }
        // Sign-extended from the top byte.
        let fill = if bytes.last().is_some_and(|top| top & 0x80 != 0) {
            0xFF
        } else {
            0
        };
        let mut wide = [fill; 8];
        wide[..bytes.len()].copy_from_slice(&bytes);
        Ok(i64::from_le_bytes(wide))
    };
    Ok(match target {
        Target::Int => Bson::Int32(integer(4)? as i32),
        Target::Long => Bson::Int64(integer(8)?),
        Target::Double => match bytes.len() {
            4 => Bson::Double(f64::from(f32::from_le_bytes(
                bytes.as_slice().try_into().map_err(|_| wrong_length())?,
            ))),
            8 => Bson::Double(f64::from_le_bytes(
                bytes.as_slice().try_into().map_err(|_| wrong_length())?,
            )),
            _ => return Err(wrong_length()),
        },
        _ => return Err(unsupported(value, target.name())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin(subtype: u8, bytes: &[u8]) -> Binary {
        Binary {
            subtype: BinarySubtype::from(subtype),
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn text_formats_both_ways() {
        let hello = bin(0, b"hello");
        let v = Bson::Binary(hello.clone());
        assert_eq!(
            to_text(&v, &bin(0, b">>>>"), Format::Base64).ok().unwrap(),
            "Pj4+Pg=="
        );
        assert_eq!(
            to_text(&v, &bin(0, b">>>>"), Format::Base64Url)
                .ok()
                .unwrap(),
            "Pj4-Pg"
        );
        assert_eq!(to_text(&v, &hello, Format::Hex).ok().unwrap(), "68656C6C6F");
        assert_eq!(to_text(&v, &hello, Format::Utf8).ok().unwrap(), "hello");
        assert!(to_text(&v, &bin(0, b"\x80\xc0"), Format::Utf8).is_err());
        let uuid: Vec<u8> = (1..=16).collect();
        assert_eq!(
            to_text(&v, &bin(4, &uuid), Format::Auto).ok().unwrap(),
            "01020304-0506-0708-090a-0b0c0d0e0f10"
        );
        assert_eq!(to_text(&v, &hello, Format::Auto).ok().unwrap(), "aGVsbG8=");
        // The old binary subtype is written with the length its payload begins with.
        assert_eq!(
            to_text(&v, &bin(2, b"hello"), Format::Auto).ok().unwrap(),
            "BQAAAGhlbGxv"
        );

        let parsed = |text: &str, subtype: u8, format: Format| {
            to_bin_data(&Bson::String(text.into()), subtype, Some(format), false).ok()
        };
        assert_eq!(
            parsed("Pj4-Pg", 0, Format::Base64Url),
            Some(Bson::Binary(bin(0, b">>>>")))
        );
        assert_eq!(
            parsed("aGVsbG8=", 0, Format::Base64Url),
            Some(Bson::Binary(hello.clone()))
        );
        assert_eq!(parsed("aGVsbG8", 0, Format::Base64), None);
        assert_eq!(
            parsed("68656C6c6F", 0, Format::Hex),
            Some(Bson::Binary(hello.clone()))
        );
        assert_eq!(parsed("abc", 0, Format::Hex), None);
        assert_eq!(
            parsed("01020304-0506-0708-090a-0b0c0d0e0f10", 4, Format::Uuid),
            Some(Bson::Binary(bin(4, &uuid)))
        );
        assert_eq!(
            parsed("01020304-0506-0708-090a-0b0c0d0e0f10", 0, Format::Uuid),
            None
        );
        assert_eq!(
            parsed("0102030405060708090a0b0c0d0e0f10", 4, Format::Uuid),
            None
        );
        assert_eq!(parsed("aGVsbG8=", 0, Format::Auto), None);
    }

    #[test]
    fn numbers_as_bytes() {
        let v = Bson::Null;
        assert_eq!(
            to_bin_data(&Bson::Int32(42), 0, None, true).ok(),
            Some(Bson::Binary(bin(0, &42i32.to_be_bytes())))
        );
        let number =
            |bytes: &[u8], target: Target| to_number(&v, &bin(0, bytes), target, false).ok();
        assert_eq!(number(b"\x80", Target::Int), Some(Bson::Int32(-128)));
        assert_eq!(number(b"\xff\x7f", Target::Int), Some(Bson::Int32(32767)));
        assert_eq!(number(&42i64.to_le_bytes(), Target::Int), None);
        assert_eq!(
            number(&42i64.to_le_bytes(), Target::Long),
            Some(Bson::Int64(42))
        );
        assert_eq!(number(b"\x01\x02\x03", Target::Long), None);
        assert_eq!(
            number(&1.5f32.to_le_bytes(), Target::Double),
            Some(Bson::Double(1.5))
        );
        assert_eq!(number(b"\x01", Target::Double), None);
    }
}
