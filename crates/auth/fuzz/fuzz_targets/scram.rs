//! Feeds arbitrary bytes to every SCRAM message parser, as a hostile client (or, for
//! the client side, a hostile member) would: see `basalt_auth::scram::fuzz_one`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| basalt_auth::scram::fuzz_one(data));
