//! The limits on values that expressions build, checked where the values grow rather
//! than after: a `$reduce` that doubles a string with `$concat` stops at 16 MB instead
//! of growing until the kernel ends the process.
//!
//! As in MongoDB: a string may not pass 16 MB (16493, where MongoDB creates the string);
//! an array or object an operator builds may not hold more than 100 MB of memory
//! (ExceededMemoryLimit, MongoDB's `internalQueryMaxRangeBytes` for `$range` and its
//! `$map`/`$reduce` limits); a value `$reduce` carries from one element to the next may
//! not nest deeper than BSON allows (Overflow). A whole document past 16 MB is refused
//! where it leaves the pipeline. Memory is counted as this engine holds the value (every
//! element a 112-byte `Bson`), which is what the limit protects, so `$range` stops at
//! about 900,000 elements where MongoDB's 16-byte values reach 6.5 million. While such a
//! value is built its memory is also reserved from the server's budget, so that many
//! clients building large values at once are refused (ExceededMemoryLimit) before they
//! exhaust the machine together.

use basalt_error::{Error, ErrorCode, Result};
use basalt_memory::Reservation;
use basalt_value::value_memory_bytes;
use bson::Bson;

/// The longest string an expression may build (MongoDB's BSONObjMaxUserSize).
pub const STRING_SIZE_BYTES_MAX: usize = 16 * 1024 * 1024;
/// The most memory one array or object built by an operator may hold.
pub const BUILT_VALUE_MEMORY_BYTES_MAX: usize = 100 * 1024 * 1024;
/// The deepest nesting of a value `$reduce` carries (MongoDB's BSONDepth maximum).
pub const VALUE_DEPTH_MAX: usize = 200;
/// What a value may hold before it is also reserved from the server's budget: most
/// values are small, and their construction should not touch the shared counter.
const UNRESERVED_BYTES_MAX: usize = 1 << 20;

/// Refuses a string of `len` bytes before it is built.
pub(crate) fn check_string_size(len: usize) -> Result<()> {
    if len >= STRING_SIZE_BYTES_MAX {
        return Err(Error::location(
            16493,
            "Tried to create string longer than 16MB",
        ));
    }
    Ok(())
}

/// The error of an operator whose result would hold `bytes` of memory.
pub(crate) fn too_much_memory(operator: &str, bytes: usize) -> Error {
    Error::new(
        ErrorCode::EXCEEDED_MEMORY_LIMIT,
        format!(
            "{operator} would use too much memory ({bytes} bytes) and cannot spill to disk. \
             Memory limit: {BUILT_VALUE_MEMORY_BYTES_MAX} bytes"
        ),
    )
}

/// The memory of a value an operator is building: held to the limit, and reserved from
/// the server's budget until the value is built.
pub(crate) struct BuiltMemory {
    operator: &'static str,
    bytes: usize,
    reservation: Reservation,
}

impl BuiltMemory {
    pub(crate) fn new(operator: &'static str) -> BuiltMemory {
        BuiltMemory {
            operator,
            bytes: 0,
            reservation: Reservation::default(),
        }
    }

    /// Counts `bytes` more, or refuses them past the limit or the budget.
    pub(crate) fn add(&mut self, bytes: usize) -> Result<()> {
        self.bytes += bytes;
        if self.bytes > BUILT_VALUE_MEMORY_BYTES_MAX {
            return Err(too_much_memory(self.operator, self.bytes));
        }
        if self.bytes <= UNRESERVED_BYTES_MAX {
            return Ok(());
        }
        self.reservation
            .reserve_for(self.bytes - self.reservation.used_bytes(), self.operator)
    }

    /// Counts `bytes` instead of what was counted before (a value replaced by the next).
    fn set(&mut self, bytes: usize) -> Result<()> {
        self.bytes = 0;
        self.reservation.clear();
        self.add(bytes)
    }
}

/// An array being built by an operator, refused once it holds too much memory.
pub(crate) struct ArrayBuilder {
    items: Vec<Bson>,
    memory: BuiltMemory,
}

impl ArrayBuilder {
    pub(crate) fn new(operator: &'static str) -> ArrayBuilder {
        ArrayBuilder::with_capacity(operator, 0)
    }

    /// A builder with room for `capacity` elements, as far as the limit allows.
    pub(crate) fn with_capacity(operator: &'static str, capacity: usize) -> ArrayBuilder {
        let capacity = capacity.min(BUILT_VALUE_MEMORY_BYTES_MAX / std::mem::size_of::<Bson>());
        ArrayBuilder {
            items: Vec::with_capacity(capacity),
            memory: BuiltMemory::new(operator),
        }
    }

    pub(crate) fn push(&mut self, item: Bson) -> Result<()> {
        self.memory.add(value_memory_bytes(&item))?;
        self.items.push(item);
        Ok(())
    }

    pub(crate) fn finish(self) -> Bson {
        Bson::Array(self.items)
    }
}

/// Refuses a value `$reduce` would carry to its next element when it nests too deep or
/// holds too much memory, so that no later step recurses past the stack; `memory` then
/// counts it in place of the value it replaces.
pub(crate) fn check_carried_value(value: &Bson, memory: &mut BuiltMemory) -> Result<()> {
    if depth_exceeds(value, VALUE_DEPTH_MAX) {
        return Err(Error::new(
            ErrorCode::OVERFLOW,
            "$reduce accumulated value exceeded max allowable BSON depth",
        ));
    }
    memory.set(value_memory_bytes(value))
}

/// Whether `value` nests more than `levels` arrays or objects deep. Stops descending at
/// the limit, so it never recurses further than `levels`.
fn depth_exceeds(value: &Bson, levels: usize) -> bool {
    let deeper = |child: &Bson| levels == 0 || depth_exceeds(child, levels - 1);
    match value {
        Bson::Array(items) => items.iter().any(deeper),
        Bson::Document(doc) => doc.values().any(deeper),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::bson;

    #[test]
    fn strings_stop_at_16_megabytes() {
        assert!(check_string_size(STRING_SIZE_BYTES_MAX - 1).is_ok());
        assert_eq!(
            check_string_size(STRING_SIZE_BYTES_MAX).unwrap_err().code.0,
            16493
        );
    }

    #[test]
    fn builders_refuse_past_the_memory_limit() {
        let mut array = ArrayBuilder::new("$map");
        let big = Bson::String("x".repeat(30 << 20));
        for _ in 0..3 {
            array.push(big.clone()).unwrap();
        }
        let error = array.push(big).unwrap_err();
        assert_eq!(error.code, ErrorCode::EXCEEDED_MEMORY_LIMIT);
        assert!(error
            .message
            .starts_with("$map would use too much memory ("));
        assert!(error.message.ends_with("Memory limit: 104857600 bytes"));
    }

    #[test]
    fn carried_values_are_bounded_in_depth() {
        let mut value = bson!(1);
        for _ in 0..VALUE_DEPTH_MAX {
            value = Bson::Array(vec![value]);
        }
        let mut memory = BuiltMemory::new("$reduce");
        assert!(check_carried_value(&value, &mut memory).is_ok());
        let deeper = Bson::Array(vec![value]);
        assert_eq!(
            check_carried_value(&deeper, &mut memory).unwrap_err().code,
            ErrorCode::OVERFLOW
        );
        assert!(!depth_exceeds(&bson!([[], {}]), 1));
    }
}
