//! Talking to a server over raw sockets with `crates/wire`'s framing, for what the
//! driver would get in the way of: the importer's bulk inserts (`import/wire_insert.rs`)
//! and the connection storm (`workloads/conns.rs`).

use basalt_error::{Error, ErrorCode, Result};
use basalt_wire::{decode, Decoded, Message, HEADER_SIZE_BYTES};
use bson::{Bson, Document};

/// URI options that change nothing on the wire; any other option keeps the driver.
const PLAIN_OPTIONS: [&str; 4] = [
    "appname",
    "directconnection",
    "connecttimeoutms",
    "serverselectiontimeoutms",
];

/// `host:port` of a URI with one host and nothing the driver must handle.
pub(crate) fn plain_address(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("mongodb://")?;
    let (hosts, options) = match rest.split_once('/') {
        Some((hosts, path)) => (hosts, path.split_once('?').map_or("", |(_, o)| o)),
        None => match rest.split_once('?') {
            Some((hosts, options)) => (hosts, options),
            None => (rest, ""),
        },
    };
    if hosts.is_empty() || hosts.contains(['@', ',']) {
        return None;
    }
    let plain = options.split('&').filter(|o| !o.is_empty()).all(|o| {
        let name = o.split('=').next().unwrap_or_default();
        PLAIN_OPTIONS.contains(&name.to_ascii_lowercase().as_str())
    });
    if !plain {
        return None;
    }
    let has_port = match hosts.rfind(']') {
        Some(bracket) => hosts[bracket..].contains(':'),
        None => hosts.contains(':'),
    };
    Some(if has_port {
        hosts.to_string()
    } else {
        format!("{hosts}:27017")
    })
}

/// The length of a message from its header, at least a header's.
pub(crate) fn message_length(header: &[u8]) -> usize {
    let length = header
        .first_chunk::<4>()
        .map_or(0, |l| i32::from_le_bytes(*l));
    usize::try_from(length).unwrap_or(0).max(HEADER_SIZE_BYTES)
}

/// The body of a reply (a whole OP_MSG message).
pub(crate) fn reply_body(reply: &[u8]) -> Result<Document> {
    let not_a_reply = || {
        Error::new(
            ErrorCode::PROTOCOL_ERROR,
            "the server's reply is not an OP_MSG",
        )
    };
    let frame = match decode(reply) {
        Ok(Decoded::Frame { frame, .. }) => frame,
        Ok(Decoded::Incomplete) => return Err(not_a_reply()),
        Err(basalt_wire::DecodeError::Fatal(e)) => return Err(e),
        Err(basalt_wire::DecodeError::Rejected(rejected)) => return Err(rejected.error),
    };
    let Message::Msg(msg) = frame.message else {
        return Err(not_a_reply());
    };
    Document::try_from(msg.body.as_ref())
        .map_err(|e| Error::new(ErrorCode::PROTOCOL_ERROR, format!("bad reply: {e}")))
}

/// `ok`, `n`, `code` and `index` come as int32, int64 or double depending on the server.
pub(crate) fn as_i64(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(x) if x.fract() == 0.0 => Some(*x as i64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_uris_skip_the_driver() {
        let cases = [
            ("mongodb://127.0.0.1:27017", Some("127.0.0.1:27017")),
            ("mongodb://localhost", Some("localhost:27017")),
            ("mongodb://localhost/", Some("localhost:27017")),
            (
                "mongodb://h:1/db?appName=x&directConnection=true",
                Some("h:1"),
            ),
            ("mongodb://h:1?serverSelectionTimeoutMS=5", Some("h:1")),
            ("mongodb://[::1]:27018", Some("[::1]:27018")),
            ("mongodb://[::1]", Some("[::1]:27017")),
            ("mongodb://user:pw@h:1", None),
            ("mongodb://h:1,h:2", None),
            ("mongodb://h:1/?tls=true", None),
            ("mongodb://h:1/?compressors=zstd", None),
            ("mongodb+srv://cluster.example", None),
            ("mongodb://", None),
        ];
        for (uri, address) in cases {
            assert_eq!(plain_address(uri).as_deref(), address, "{uri}");
        }
    }
}
