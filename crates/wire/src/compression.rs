//! The compressors of OP_COMPRESSED: noop, snappy, zlib and zstd.
//!
//! A client offers compressor names in `hello.compression`; the server answers with the
//! ones it shares and thereafter may receive any of them. Decompression never produces
//! more than the size the message declared, so a small hostile payload cannot make the
//! server allocate or inflate gigabytes.

use std::io::Read;

use basalt_error::{Error, Result};

/// One of MongoDB's wire compressors, with its `compressorId` on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compressor {
    Noop,
    Snappy,
    Zlib,
    Zstd,
}

/// The largest zstd window we accept: 2^26 = 64 MiB covers any 48 MB message, while a
/// frame asking for more would only make the decoder allocate for nothing.
const ZSTD_WINDOW_LOG_MAX: u32 = 26;

/// zlib's usual default, which MongoDB also uses (`zlibCompressionLevel`).
const ZLIB_LEVEL: u32 = 6;

/// zstd's own default level.
const ZSTD_LEVEL: i32 = 3;

impl Compressor {
    /// Every compressor Basalt supports. Negotiation follows the client's order of
    /// preference, so this order carries no meaning.
    pub const ALL: [Compressor; 4] = [
        Compressor::Zstd,
        Compressor::Snappy,
        Compressor::Zlib,
        Compressor::Noop,
    ];

    /// The compressor a client names in `hello.compression`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "noop" => Some(Compressor::Noop),
            "snappy" => Some(Compressor::Snappy),
            "zlib" => Some(Compressor::Zlib),
            "zstd" => Some(Compressor::Zstd),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compressor::Noop => "noop",
            Compressor::Snappy => "snappy",
            Compressor::Zlib => "zlib",
            Compressor::Zstd => "zstd",
        }
    }

    /// The `compressorId` byte of OP_COMPRESSED.
    pub fn id(self) -> u8 {
        match self {
            Compressor::Noop => 0,
            Compressor::Snappy => 1,
            Compressor::Zlib => 2,
            Compressor::Zstd => 3,
        }
    }

    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(Compressor::Noop),
            1 => Some(Compressor::Snappy),
            2 => Some(Compressor::Zlib),
            3 => Some(Compressor::Zstd),
            _ => None,
        }
    }

    pub fn compress(self, input: &[u8]) -> Vec<u8> {
        match self {
            Compressor::Noop => input.to_vec(),
            Compressor::Snappy => snap::raw::Encoder::new()
                .compress_vec(input)
                // Fails only for inputs beyond 4 GiB, far above any message.
                .expect("snappy compresses any message-sized input"),
            Compressor::Zlib => {
                let mut out = Vec::new();
                let mut encoder =
                    flate2::bufread::ZlibEncoder::new(input, flate2::Compression::new(ZLIB_LEVEL));
                encoder
                    .read_to_end(&mut out)
                    .expect("zlib compression in memory cannot fail");
                out
            }
            Compressor::Zstd => zstd::bulk::compress(input, ZSTD_LEVEL)
                .expect("zstd compression in memory cannot fail"),
        }
    }

    /// Decompresses `input`, which must inflate to exactly `uncompressed_size_bytes`.
    /// The caller bounds `uncompressed_size_bytes`; no more than that (plus one byte, to
    /// detect overruns) is ever produced.
    pub fn decompress(self, input: &[u8], uncompressed_size_bytes: usize) -> Result<Vec<u8>> {
        let out = match self {
            Compressor::Noop => input.to_vec(),
            Compressor::Snappy => {
                // Snappy states its length up front: check it before allocating.
                let declared = snap::raw::decompress_len(input).map_err(|e| failed(self, e))?;
                if declared != uncompressed_size_bytes {
                    return Err(size_mismatch(self, uncompressed_size_bytes, declared));
                }
                let mut out = vec![0; declared];
                let written = snap::raw::Decoder::new()
                    .decompress(input, &mut out)
                    .map_err(|e| failed(self, e))?;
                out.truncate(written);
                out
            }
            Compressor::Zlib => read_bounded(
                self,
                flate2::bufread::ZlibDecoder::new(input),
                uncompressed_size_bytes,
            )?,
            Compressor::Zstd => {
                let mut decoder =
                    zstd::stream::read::Decoder::with_buffer(input).map_err(|e| failed(self, e))?;
                decoder
                    .window_log_max(ZSTD_WINDOW_LOG_MAX)
                    .map_err(|e| failed(self, e))?;
                read_bounded(self, decoder, uncompressed_size_bytes)?
            }
        };
        if out.len() != uncompressed_size_bytes {
            return Err(size_mismatch(self, uncompressed_size_bytes, out.len()));
        }
        Ok(out)
    }
}

/// Reads at most one byte more than expected, growing the buffer only as data arrives.
fn read_bounded(compressor: Compressor, reader: impl Read, expected: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    reader
        .take(expected as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| failed(compressor, e))?;
    Ok(out)
}

fn failed(compressor: Compressor, e: impl std::fmt::Display) -> Error {
    Error::bad_value(format!(
        "could not decompress {} message: {e}",
        compressor.name()
    ))
}

fn size_mismatch(compressor: Compressor, expected: usize, actual: usize) -> Error {
    Error::bad_value(format!(
        "{} message decompressed to {actual} bytes, but declared {expected}",
        compressor.name()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_error::ErrorCode;

    #[test]
    fn names_and_ids_round_trip() {
        for c in Compressor::ALL {
            assert_eq!(Compressor::from_name(c.name()), Some(c));
            assert_eq!(Compressor::from_id(c.id()), Some(c));
        }
        assert_eq!(Compressor::from_name("lz4"), None);
        assert_eq!(Compressor::from_id(4), None);
    }

    #[test]
    fn every_compressor_round_trips() {
        let input: Vec<u8> = (0..10_000u32)
            .flat_map(|i| (i % 97).to_le_bytes())
            .collect();
        for c in Compressor::ALL {
            let packed = c.compress(&input);
            assert_eq!(c.decompress(&packed, input.len()).unwrap(), input, "{c:?}");
            assert_eq!(c.decompress(&c.compress(b""), 0).unwrap(), b"", "{c:?}");
        }
    }

    #[test]
    fn declared_size_must_match() {
        let input = vec![7u8; 1000];
        for c in Compressor::ALL {
            let packed = c.compress(&input);
            for wrong in [999, 1001] {
                let err = c.decompress(&packed, wrong).unwrap_err();
                assert_eq!(err.code, ErrorCode::BAD_VALUE, "{c:?}");
            }
        }
    }

    #[test]
    fn zip_bomb_stops_at_the_declared_size() {
        // 16 MiB of zeros compresses to little; the declared size is tiny.
        let bomb = vec![0u8; 16 << 20];
        for c in [Compressor::Zlib, Compressor::Zstd, Compressor::Snappy] {
            let packed = c.compress(&bomb);
            assert!(packed.len() < bomb.len() / 10);
            assert!(c.decompress(&packed, 100).is_err(), "{c:?}");
        }
    }

    #[test]
    fn garbage_is_an_error() {
        for c in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
            assert!(c
                .decompress(b"\xff\xfe\xfd\xfc not compressed", 10)
                .is_err());
            assert!(c.decompress(b"", 10).is_err());
        }
    }
}
