//! Feeds arbitrary bytes to the wire decoder, as a hostile or broken client would.
//!
//! Beyond "never panics", it checks what the server relies on: a frame never claims more
//! bytes than it was given, every document that comes out is readable by the bson crate,
//! and a decoded OP_MSG re-encodes to the same message.

#![no_main]

use basalt_wire::{decode, encode_op_msg_with_sequences, DecodeError, Decoded, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Ok(Decoded::Frame { frame, consumed }) => {
            assert!(consumed <= data.len());
            if let Message::Msg(msg) = &frame.message {
                let docs = std::iter::once(&msg.body)
                    .chain(msg.sequences.iter().flat_map(|s| s.documents.iter()));
                for doc in docs {
                    bson::Document::try_from(doc.as_ref()).expect("validated document reads");
                }
                let again = encode_op_msg_with_sequences(
                    frame.header.request_id,
                    frame.header.response_to,
                    msg.flags,
                    &msg.body,
                    &msg.sequences,
                    frame.compressor,
                );
                match decode(&again) {
                    Ok(Decoded::Frame { frame: re, .. }) => assert_eq!(re.message, frame.message),
                    other => panic!("re-encoded OP_MSG does not decode: {other:?}"),
                }
            }
        }
        Ok(Decoded::Incomplete) | Err(DecodeError::Fatal(_)) => {}
        Err(DecodeError::Rejected(rejected)) => assert!(rejected.consumed <= data.len()),
    }
});
