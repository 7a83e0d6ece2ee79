//! OP_QUERY (opcode 2004), kept for one purpose: drivers open every connection with a
//! legacy `hello`/`isMaster` on `admin.$cmd` before they know the server speaks OP_MSG.

use basalt_error::Result;
use bson::RawDocumentBuf;

use crate::compression::Compressor;
use crate::header::{frame, OpCode};
use crate::reader::{protocol_error, Reader};

#[derive(Clone, Debug, PartialEq)]
pub struct OpQuery {
    pub flags: i32,
    /// `<database>.<collection>`; commands go to `<database>.$cmd`.
    pub full_collection_name: String,
    pub number_to_skip: i32,
    pub number_to_return: i32,
    pub query: RawDocumentBuf,
    pub return_fields_selector: Option<RawDocumentBuf>,
}

impl OpQuery {
    /// The database part of `full_collection_name`.
    pub fn database(&self) -> &str {
        self.full_collection_name
            .split_once('.')
            .map_or(self.full_collection_name.as_str(), |(db, _)| db)
    }
}

/// Parses what follows the header of an OP_QUERY.
pub(crate) fn parse(payload: &[u8]) -> Result<OpQuery> {
    let mut r = Reader::new(payload);
    let flags = r.i32("OP_QUERY flags")?;
    let full_collection_name = r.cstr("OP_QUERY fullCollectionName")?.to_string();
    let number_to_skip = r.i32("OP_QUERY numberToSkip")?;
    let number_to_return = r.i32("OP_QUERY numberToReturn")?;
    let query = r.document("OP_QUERY query")?;
    let return_fields_selector = if r.is_empty() {
        None
    } else {
        Some(r.document("OP_QUERY returnFieldsSelector")?)
    };
    if !r.is_empty() {
        return Err(protocol_error(format!(
            "OP_QUERY has {} bytes after its documents",
            r.remaining()
        )));
    }
    Ok(OpQuery {
        flags,
        full_collection_name,
        number_to_skip,
        number_to_return,
        query,
        return_fields_selector,
    })
}

/// Encodes an OP_QUERY request (responseTo 0), as a driver's handshake would send it.
pub fn encode_op_query(
    request_id: i32,
    query: &OpQuery,
    compressor: Option<Compressor>,
) -> Vec<u8> {
    debug_assert!(!query.full_collection_name.contains('\0'));
    let mut payload = Vec::new();
    payload.extend_from_slice(&query.flags.to_le_bytes());
    payload.extend_from_slice(query.full_collection_name.as_bytes());
    payload.push(0);
    payload.extend_from_slice(&query.number_to_skip.to_le_bytes());
    payload.extend_from_slice(&query.number_to_return.to_le_bytes());
    payload.extend_from_slice(query.query.as_bytes());
    if let Some(fields) = &query.return_fields_selector {
        payload.extend_from_slice(fields.as_bytes());
    }
    frame(request_id, 0, OpCode::Query, &payload, compressor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_error::ErrorCode;
    use bson::rawdoc;

    fn hello() -> OpQuery {
        OpQuery {
            flags: 0,
            full_collection_name: "admin.$cmd".into(),
            number_to_skip: 0,
            number_to_return: -1,
            query: rawdoc! { "isMaster": 1, "compression": ["zstd", "snappy"] },
            return_fields_selector: None,
        }
    }

    fn payload(query: &OpQuery) -> Vec<u8> {
        encode_op_query(1, query, None)[16..].to_vec()
    }

    #[test]
    fn parses_with_and_without_selector() {
        let q = hello();
        assert_eq!(parse(&payload(&q)).unwrap(), q);
        assert_eq!(q.database(), "admin");
        let q = OpQuery {
            return_fields_selector: Some(rawdoc! { "a": 1 }),
            ..hello()
        };
        assert_eq!(parse(&payload(&q)).unwrap(), q);
    }

    #[test]
    fn database_without_dot_is_the_whole_name() {
        let q = OpQuery {
            full_collection_name: "admin".into(),
            ..hello()
        };
        assert_eq!(q.database(), "admin");
    }

    #[test]
    fn rejects_trailing_bytes_and_truncation() {
        let mut bytes = payload(&hello());
        bytes.push(0);
        assert_eq!(parse(&bytes).unwrap_err().code, ErrorCode::INVALID_BSON);
        let with_selector = payload(&OpQuery {
            return_fields_selector: Some(rawdoc! {}),
            ..hello()
        });
        let mut extra = with_selector.clone();
        extra.push(0);
        assert_eq!(parse(&extra).unwrap_err().code, ErrorCode::PROTOCOL_ERROR);
        for len in 0..with_selector.len() {
            assert!(parse(&with_selector[..len]).is_err() || len == payload(&hello()).len());
        }
    }

    #[test]
    fn rejects_unterminated_namespace() {
        let mut bytes = 0_i32.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"admin.$cmd");
        assert_eq!(parse(&bytes).unwrap_err().code, ErrorCode::PROTOCOL_ERROR);
    }
}
