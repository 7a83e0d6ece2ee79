//! Renders values as MongoDB prints them inside error messages (`a: { b: 1 }`, `5.0`,
//! `"x"`), so that errors quoting the user's input read like MongoDB's own.

use bson::Bson;
use std::fmt::Write;

/// A value in MongoDB's `BSONElement::toString` form, without a field name.
pub fn value_to_string(v: &Bson) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

/// A `name: value` pair, as MongoDB prints an element.
pub fn element_to_string(name: &str, v: &Bson) -> String {
    format!("{name}: {}", value_to_string(v))
}

/// MongoDB's name for a value's type, as used in messages ("int", "string", ...).
pub fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}

fn write_value(out: &mut String, v: &Bson) {
    match v {
        Bson::Double(d) => out.push_str(&double_to_string(*d)),
        Bson::String(s) | Bson::Symbol(s) => {
            let _ = write!(out, "{s:?}");
        }
        Bson::Document(d) => {
            if d.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push_str("{ ");
            for (i, (k, v)) in d.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(k);
                out.push_str(": ");
                write_value(out, v);
            }
            out.push_str(" }");
        }
        Bson::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push_str("[ ");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push_str(" ]");
        }
        Bson::Binary(b) => {
            let hex: String = b.bytes.iter().map(|byte| format!("{byte:02X}")).collect();
            let _ = write!(out, "BinData({}, {hex})", u8::from(b.subtype));
        }
        Bson::Undefined => out.push_str("undefined"),
        Bson::ObjectId(id) => {
            let _ = write!(out, "ObjectId('{id}')");
        }
        Bson::Boolean(b) => {
            let _ = write!(out, "{b}");
        }
        Bson::DateTime(d) => {
            let _ = write!(out, "new Date({})", d.timestamp_millis());
        }
        Bson::Null => out.push_str("null"),
        Bson::RegularExpression(r) => {
            let _ = write!(out, "/{}/{}", r.pattern.as_str(), r.options.as_str());
        }
        Bson::JavaScriptCode(code) => out.push_str(code),
        Bson::JavaScriptCodeWithScope(c) => out.push_str(&c.code),
        Bson::Int32(i) => {
            let _ = write!(out, "{i}");
        }
        Bson::Int64(i) => {
            let _ = write!(out, "{i}");
        }
        Bson::Timestamp(t) => {
            let _ = write!(out, "Timestamp({}, {})", t.time, t.increment);
        }
        Bson::Decimal128(d) => {
            let _ = write!(out, "NumberDecimal(\"{d}\")");
        }
        Bson::MinKey => out.push_str("MinKey"),
        Bson::MaxKey => out.push_str("MaxKey"),
        Bson::DbPointer(_) => out.push_str("DBPointer"),
    }
}

/// Doubles print with a trailing `.0` when integral, as the shell and server do.
fn double_to_string(d: f64) -> String {
    if d.is_nan() {
        "nan.0".to_string()
    } else if d.is_infinite() {
        if d > 0.0 { "inf.0" } else { "-inf.0" }.to_string()
    } else if d.fract() == 0.0 && d.abs() < 1e16 {
        format!("{d:.1}")
    } else {
        format!("{d}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::bson;

    #[test]
    fn formats_like_mongodb() {
        assert_eq!(
            element_to_string("a", &bson!({"b": [1, 2.5, "x"], "c": {}})),
            "a: { b: [ 1, 2.5, \"x\" ], c: {} }"
        );
        assert_eq!(value_to_string(&Bson::Double(5.0)), "5.0");
        assert_eq!(type_name(&Bson::Int32(1)), "int");
    }
}
