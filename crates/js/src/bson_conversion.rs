//! BSON ↔ JavaScript with MongoDB's shell types, so values keep their BSON type through a
//! script: an int64 becomes a `NumberLong` and comes back an int64, an ObjectId an
//! `ObjectId`, a date a `Date`. As in mongod, a plain JS number comes back a double
//! (int32 fields read by a script are numbers in it), and `undefined` stays distinct
//! from `null`.
//!
//! Typed values are recognised by their prototype, which is cheaper than a property
//! lookup on every object and cannot be forged by a document's field names.

use crate::sandbox::eval_sloppy;
use basalt_error::{Error, ErrorCode, Result};
use base64::Engine as _;
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, DateTime, Decimal128, Document, Regex, Timestamp};
use rquickjs::function::This;
use rquickjs::{Array, Constructor, Ctx, FromJs, Function, Object, Type, Value};
use std::cell::OnceCell;

/// Objects nested deeper than this are refused rather than followed (cycles, bombs).
const NESTING_DEPTH_MAX: usize = 150;

/// The entries of the internals list `shell_types.js` evaluates to, by position.
#[derive(Clone, Copy)]
pub(crate) enum Internal {
    ObjectId,
    NumberLong,
    NumberInt,
    NumberDecimal,
    BinData,
    Timestamp,
    Date,
    RegExp,
    MinKey,
    MaxKey,
    DateConstructor,
    RegExpConstructor,
    /// Makes a script's `emit` and the function that collects what it emitted.
    MakeEmit,
}

const INTERNALS_LEN: usize = Internal::MakeEmit as usize + 1;

/// What the conversion needs from a sandbox's shell types (see `shell_types.js`), read
/// on first use: most calls (a `$where` over numbers) need none of them.
pub(crate) struct ShellTypes<'js> {
    ctx: Ctx<'js>,
    internals: Array<'js>,
    cache: [OnceCell<Value<'js>>; INTERNALS_LEN],
}

/// A QuickJS failure outside a script's own exceptions (allocation, conversion).
pub(crate) fn engine_error(e: rquickjs::Error) -> Error {
    Error::new(ErrorCode::JS_INTERPRETER_FAILURE, e.to_string())
}

impl<'js> ShellTypes<'js> {
    pub(crate) fn new(ctx: &Ctx<'js>, internals: Array<'js>) -> Self {
        ShellTypes {
            ctx: ctx.clone(),
            internals,
            cache: Default::default(),
        }
    }

    /// One of the internals, as the type it has.
    pub(crate) fn internal<T: FromJs<'js>>(&self, which: Internal) -> rquickjs::Result<T> {
        let cell = &self.cache[which as usize];
        let value = match cell.get() {
            Some(value) => value.clone(),
            None => {
                let value: Value = self.internals.get(which as usize)?;
                cell.get_or_init(|| value).clone()
            }
        };
        T::from_js(&self.ctx, value)
    }

    fn typed(&self, proto: Internal) -> rquickjs::Result<Object<'js>> {
        let proto: Object = self.internal(proto)?;
        Object::new_proto(self.ctx.clone(), Some(&proto))
    }

    /// A document as a plain JS object (a script's `this`): all its fields, or only
    /// `fields` (those the script can read).
    pub(crate) fn document_to_js(
        &self,
        doc: &Document,
        fields: Option<&[String]>,
    ) -> Result<Object<'js>> {
        let object = Object::new(self.ctx.clone()).map_err(engine_error)?;
        let set =
            |name: &str, value: &Bson| object.set(name, self.to_js(value)?).map_err(engine_error);
        // One pass over the document, which is often already just those fields.
        for (name, value) in doc {
            if fields.is_none_or(|fields| fields.iter().any(|f| f == name)) {
                set(name, value)?;
            }
        }
        Ok(object)
    }

    pub(crate) fn to_js(&self, value: &Bson) -> Result<Value<'js>> {
        self.to_js_inner(value).map_err(engine_error)
    }

    fn to_js_inner(&self, value: &Bson) -> rquickjs::Result<Value<'js>> {
        let ctx = self.ctx.clone();
        Ok(match value {
            Bson::Double(d) => Value::new_float(ctx, *d),
            Bson::Int32(i) => Value::new_int(ctx, *i),
            Bson::String(s) => rquickjs::String::from_str(ctx, s)?.into_value(),
            Bson::Boolean(b) => Value::new_bool(ctx, *b),
            Bson::Null => Value::new_null(ctx),
            Bson::Undefined => Value::new_undefined(ctx),
            Bson::Document(doc) => {
                let object = Object::new(ctx)?;
                for (name, v) in doc {
                    object.set(name.as_str(), self.to_js_inner(v)?)?;
                }
                object.into_value()
            }
            Bson::Array(items) => {
                let array = Array::new(ctx)?;
                for (k, v) in items.iter().enumerate() {
                    array.set(k, self.to_js_inner(v)?)?;
                }
                array.into_value()
            }
            Bson::ObjectId(oid) => {
                let object = self.typed(Internal::ObjectId)?;
                object.set("str", oid.to_hex())?;
                object.into_value()
            }
            Bson::Int64(n) => {
                let object = self.typed(Internal::NumberLong)?;
                object.set("floatApprox", *n as f64)?;
                // Beyond 2^53 a double loses digits: the halves keep the exact value.
                if n.unsigned_abs() > (1u64 << 53) - 1 {
                    object.set("top", (*n >> 32) as i32)?;
                    object.set("bottom", f64::from(*n as u32))?;
                }
                object.into_value()
            }
            Bson::Decimal128(d) => {
                let object = self.typed(Internal::NumberDecimal)?;
                object.set("value", d.to_string())?;
                object.into_value()
            }
            Bson::DateTime(dt) => self
                .internal::<Constructor>(Internal::DateConstructor)?
                .construct::<_, Value>((dt.timestamp_millis() as f64,))?,
            Bson::RegularExpression(re) => {
                // JavaScript knows no x (extended) or l (locale) flag.
                let flags: String = re
                    .options
                    .as_str()
                    .chars()
                    .filter(|c| "imsu".contains(*c))
                    .collect();
                self.internal::<Constructor>(Internal::RegExpConstructor)?
                    .construct::<_, Value>((re.pattern.as_str(), flags))?
            }
            Bson::Binary(bin) => {
                let object = self.typed(Internal::BinData)?;
                object.set("type", u8::from(bin.subtype))?;
                object.set(
                    "data",
                    base64::engine::general_purpose::STANDARD.encode(&bin.bytes),
                )?;
                object.into_value()
            }
            Bson::Timestamp(ts) => {
                let object = self.typed(Internal::Timestamp)?;
                object.set("t", f64::from(ts.time))?;
                object.set("i", f64::from(ts.increment))?;
                object.into_value()
            }
            Bson::MinKey => self.internal(Internal::MinKey)?,
            Bson::MaxKey => self.internal(Internal::MaxKey)?,
            Bson::JavaScriptCode(code) => eval_sloppy(&self.ctx, format!("({code}\n)"))?,
            Bson::JavaScriptCodeWithScope(code) => {
                eval_sloppy(&self.ctx, format!("({}\n)", code.code))?
            }
            Bson::Symbol(s) => rquickjs::String::from_str(ctx, s)?.into_value(),
            Bson::DbPointer(_) => Value::new_null(ctx),
        })
    }

    /// A script's result as BSON.
    pub(crate) fn to_bson(&self, value: Value<'js>) -> Result<Bson> {
        self.to_bson_at(value, 0)
    }

    fn to_bson_at(&self, value: Value<'js>, depth: usize) -> Result<Bson> {
        if depth > NESTING_DEPTH_MAX {
            return Err(Error::new(
                ErrorCode::JS_INTERPRETER_FAILURE,
                format!("Converting from JavaScript to BSON failed: Object nested more than {NESTING_DEPTH_MAX} levels deep"),
            ));
        }
        Ok(match value.type_of() {
            Type::Uninitialized | Type::Undefined => Bson::Undefined,
            Type::Null => Bson::Null,
            Type::Bool => Bson::Boolean(value.as_bool().unwrap_or(false)),
            Type::Int => Bson::Double(f64::from(value.as_int().unwrap_or(0))),
            Type::Float => Bson::Double(value.as_float().unwrap_or(f64::NAN)),
            Type::String => Bson::String(value.get::<String>().map_err(engine_error)?),
            Type::BigInt => Bson::Int64(
                value
                    .into_big_int()
                    .map(|b| b.to_i64())
                    .transpose()
                    .map_err(engine_error)?
                    .unwrap_or(0),
            ),
            Type::Function | Type::Constructor => {
                let source: String = value
                    .into_function()
                    .map(|f| f.get::<_, Function>("toString").map(|s| (f, s)))
                    .transpose()
                    .and_then(|pair| match pair {
                        Some((f, to_string)) => to_string.call((This(f),)),
                        None => Ok(String::new()),
                    })
                    .map_err(engine_error)?;
                Bson::JavaScriptCode(source)
            }
            Type::Array => {
                let Some(array) = value.into_array() else {
                    return Ok(Bson::Null);
                };
                let mut items = Vec::with_capacity(array.len());
                for item in array.iter::<Value>() {
                    items.push(self.to_bson_at(item.map_err(engine_error)?, depth + 1)?);
                }
                Bson::Array(items)
            }
            Type::Symbol | Type::Module | Type::Promise | Type::Unknown => Bson::Null,
            _ => match value.into_object() {
                Some(object) => self.object_from_js(object, depth)?,
                None => Bson::Null,
            },
        })
    }

    fn object_from_js(&self, object: Object<'js>, depth: usize) -> Result<Bson> {
        let conv = |e| engine_error(e);
        if let Some(proto) = object.get_prototype() {
            if proto == self.internal::<Object>(Internal::ObjectId).map_err(conv)? {
                let hex: String = object.get("str").map_err(conv)?;
                return bson::oid::ObjectId::parse_str(&hex)
                    .map(Bson::ObjectId)
                    .map_err(|e| js_failure(format!("invalid ObjectId: {e}")));
            }
            if proto
                == self
                    .internal::<Object>(Internal::NumberLong)
                    .map_err(conv)?
            {
                let approx: f64 = object.get("floatApprox").map_err(conv)?;
                let top: Option<i32> = object.get("top").map_err(conv)?;
                let bottom: Option<f64> = object.get("bottom").map_err(conv)?;
                return Ok(Bson::Int64(match (top, bottom) {
                    (Some(top), Some(bottom)) => (i64::from(top) << 32) | bottom as u32 as i64,
                    _ => approx as i64,
                }));
            }
            if proto == self.internal::<Object>(Internal::NumberInt).map_err(conv)? {
                let n: f64 = object.get("value").map_err(conv)?;
                return Ok(Bson::Int32(n as i32));
            }
            if proto
                == self
                    .internal::<Object>(Internal::NumberDecimal)
                    .map_err(conv)?
            {
                let text: String = object.get("value").map_err(conv)?;
                return text
                    .parse::<Decimal128>()
                    .map(Bson::Decimal128)
                    .map_err(|_| js_failure(format!("invalid NumberDecimal: {text}")));
            }
            if proto == self.internal::<Object>(Internal::BinData).map_err(conv)? {
                let subtype: f64 = object.get("type").map_err(conv)?;
                let data: String = object.get("data").map_err(conv)?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.as_bytes())
                    .map_err(|e| js_failure(format!("invalid BinData: {e}")))?;
                return Ok(Bson::Binary(Binary {
                    subtype: BinarySubtype::from(subtype as u8),
                    bytes,
                }));
            }
            if proto == self.internal::<Object>(Internal::Timestamp).map_err(conv)? {
                let t: f64 = object.get("t").map_err(conv)?;
                let i: f64 = object.get("i").map_err(conv)?;
                return Ok(Bson::Timestamp(Timestamp {
                    time: t as u32,
                    increment: i as u32,
                }));
            }
            if proto == self.internal::<Object>(Internal::Date).map_err(conv)? {
                let get_time: Function = object.get("getTime").map_err(conv)?;
                let ms: f64 = get_time.call((This(object),)).map_err(conv)?;
                return Ok(Bson::DateTime(DateTime::from_millis(ms as i64)));
            }
            if proto == self.internal::<Object>(Internal::RegExp).map_err(conv)? {
                let source: String = object.get("source").map_err(conv)?;
                let flags: String = object.get("flags").map_err(conv)?;
                let mut options: Vec<char> =
                    flags.chars().filter(|c| "imsu".contains(*c)).collect();
                options.sort_unstable();
                return regex(&source, &options.into_iter().collect::<String>());
            }
        }
        if object == self.internal::<Object>(Internal::MinKey).map_err(conv)? {
            return Ok(Bson::MinKey);
        }
        if object == self.internal::<Object>(Internal::MaxKey).map_err(conv)? {
            return Ok(Bson::MaxKey);
        }
        let mut doc = Document::new();
        for prop in object.props::<String, Value>() {
            let (name, value) = prop.map_err(conv)?;
            doc.insert(name, self.to_bson_at(value, depth + 1)?);
        }
        Ok(Bson::Document(doc))
    }
}

fn regex(pattern: &str, options: &str) -> Result<Bson> {
    let pattern = pattern
        .to_string()
        .try_into()
        .map_err(|_| js_failure("regular expression contains a null byte"))?;
    let options = options
        .to_string()
        .try_into()
        .map_err(|_| js_failure("regular expression options contain a null byte"))?;
    Ok(Bson::RegularExpression(Regex { pattern, options }))
}

fn js_failure(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::JS_INTERPRETER_FAILURE, message)
}
