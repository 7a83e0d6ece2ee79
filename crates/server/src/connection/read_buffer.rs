//! A connection's read buffer: small while the connection idles, as large as the message
//! being received while one arrives, and small again once it is handled.
//!
//! Idle connections are most connections, so what each holds between messages is what
//! thousands of them cost: 4 KiB, which most requests fit in (one read each). A larger
//! message learns its length from its first four bytes and gets a buffer of exactly that
//! size, given back as soon as the message is handled, as mongod allocates one per
//! message; a connection that once sent 48 MB does not keep 48 MB. The bytes are kept
//! initialised (a safe `read` needs that), so they are zeroed once when allocated, not
//! before every read. The bytes held are counted in serverStatus's
//! `basalt.connections.bufferBytes`.
//!
//! A large message's buffer is also reserved from the server's memory budget before it
//! is allocated, and the copy its command runs on stays reserved until the reply is sent
//! ([`reserve_frame`]). When the budget has no room, the connection stops reading (the
//! client's writes then wait on TCP) until it has, for at most [`MESSAGE_MEMORY_WAIT_MS`],
//! and is closed after that, or at once when the message is larger than the whole
//! budget: a flood of 48 MB messages on many connections waits or is cut off instead of
//! exhausting the machine.

use basalt_memory::Reservation;
use basalt_wire::{HEADER_SIZE_BYTES, MAX_MESSAGE_SIZE_BYTES};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a connection holds between messages.
pub const READ_BUFFER_IDLE_BYTES: usize = 4 * 1024;
/// How long a large message waits for the memory budget before its connection is closed.
pub const MESSAGE_MEMORY_WAIT_MS: u64 = 10_000;

/// The budget's share of a large message's copy (the frame its command runs on) until the
/// reply is sent; `None` for a small one, not worth the shared counter.
pub fn reserve_frame(message_bytes: usize) -> Option<Reservation> {
    (message_bytes > READ_BUFFER_IDLE_BYTES).then(|| {
        let mut frame = Reservation::default();
        // The copy exists already: counted even past the budget.
        let _ = frame.record(message_bytes);
        frame
    })
}

pub struct ReadBuffer<'a> {
    /// All initialised; `start..end` is what was read and not yet consumed.
    bytes: Vec<u8>,
    start: usize,
    end: usize,
    /// Where the bytes held are counted.
    held_bytes: &'a AtomicU64,
    /// A large buffer's share of the server's memory budget.
    memory: Reservation,
}

impl<'a> ReadBuffer<'a> {
    pub fn new(held_bytes: &'a AtomicU64) -> ReadBuffer<'a> {
        held_bytes.fetch_add(READ_BUFFER_IDLE_BYTES as u64, Ordering::Relaxed);
        ReadBuffer {
            bytes: vec![0; READ_BUFFER_IDLE_BYTES],
            start: 0,
            end: 0,
            held_bytes,
            memory: Reservation::default(),
        }
    }

    /// The bytes read and not consumed yet.
    pub fn data(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    /// Drops the first `n` bytes of [`data`](Self::data); a large buffer left empty is
    /// given back.
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.start);
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.bytes.len() > READ_BUFFER_IDLE_BYTES {
                self.replace(vec![0; READ_BUFFER_IDLE_BYTES]);
                self.memory.clear();
            }
        }
    }

    /// One read from `source` into the room after the data, which is made at least as
    /// large as the rest of the message being received: the number of bytes read, 0 at
    /// the end of the stream.
    pub fn fill_from(&mut self, source: &mut impl Read) -> std::io::Result<usize> {
        self.make_room()?;
        let n = source.read(&mut self.bytes[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// The length of the message at the start of the data, from its header's first four
    /// bytes (bounded: the decoder refuses a bad length before asking for more).
    fn message_length(&self) -> usize {
        match self.data().first_chunk::<4>() {
            Some(length) => usize::try_from(i32::from_le_bytes(*length))
                .unwrap_or(0)
                .clamp(HEADER_SIZE_BYTES, MAX_MESSAGE_SIZE_BYTES),
            None => HEADER_SIZE_BYTES,
        }
    }

    fn make_room(&mut self) -> std::io::Result<()> {
        let len = self.end - self.start;
        let needed = self.message_length().max(len + 1);
        if needed > self.bytes.len() {
            self.reserve(needed)?;
            let mut larger = vec![0; needed];
            larger[..len].copy_from_slice(self.data());
            self.replace(larger);
        } else if self.start + needed > self.bytes.len() {
            self.bytes.copy_within(self.start..self.end, 0);
        } else {
            return Ok(());
        }
        self.start = 0;
        self.end = len;
        Ok(())
    }

    /// Reserves a buffer of `bytes` from the server's memory budget (replacing what the
    /// current buffer reserved), waiting for room; an error when none came in time.
    fn reserve(&mut self, bytes: usize) -> std::io::Result<()> {
        self.memory.clear();
        let wait = Duration::from_millis(MESSAGE_MEMORY_WAIT_MS);
        self.memory
            .reserve_waiting(bytes, wait)
            .map_err(|exhausted| {
                std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    exhausted
                        .to_error(&format!("a message of {bytes} bytes"))
                        .message,
                )
            })
    }

    fn replace(&mut self, bytes: Vec<u8>) {
        self.held_bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.held_bytes
            .fetch_sub(self.bytes.len() as u64, Ordering::Relaxed);
        self.bytes = bytes;
    }
}

impl Drop for ReadBuffer<'_> {
    fn drop(&mut self) {
        self.held_bytes
            .fetch_sub(self.bytes.len() as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its bytes `chunk` at a time, as a socket may.
    struct Chunks<'a> {
        bytes: &'a [u8],
        chunk: usize,
    }

    impl Read for Chunks<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.chunk.min(out.len()).min(self.bytes.len());
            out[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn message(len: usize, fill: u8) -> Vec<u8> {
        let mut bytes = vec![fill; len];
        bytes[..4].copy_from_slice(&(len as i32).to_le_bytes());
        bytes
    }

    #[test]
    fn a_large_message_gets_a_buffer_of_its_size_given_back_after() {
        let held = AtomicU64::new(0);
        let large = message(100_000, 7);
        let small = message(300, 9);
        let stream = [large.clone(), small.clone()].concat();
        let mut source = Chunks {
            bytes: &stream,
            chunk: 64 * 1024,
        };
        let mut buf = ReadBuffer::new(&held);
        assert_eq!(held.load(Ordering::Relaxed), READ_BUFFER_IDLE_BYTES as u64);
        while buf.data().len() < large.len() {
            assert!(buf.fill_from(&mut source).unwrap() > 0);
        }
        // The reads stop at the message's end: the next one's bytes are not in yet.
        assert_eq!(buf.data(), &large[..]);
        assert_eq!(held.load(Ordering::Relaxed), large.len() as u64);
        buf.consume(large.len());
        assert_eq!(held.load(Ordering::Relaxed), READ_BUFFER_IDLE_BYTES as u64);
        buf.fill_from(&mut source).unwrap();
        assert_eq!(buf.data(), &small[..]);
        drop(buf);
        assert_eq!(held.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn pipelined_messages_are_read_and_consumed_in_order() {
        let held = AtomicU64::new(0);
        let messages: Vec<Vec<u8>> = (0..50).map(|i| message(100 + i * 37, i as u8)).collect();
        let stream = messages.concat();
        let mut source = Chunks {
            bytes: &stream,
            chunk: 1000,
        };
        let mut buf = ReadBuffer::new(&held);
        for expected in &messages {
            while buf.data().len() < expected.len() {
                assert!(buf.fill_from(&mut source).unwrap() > 0);
            }
            assert_eq!(&buf.data()[..expected.len()], &expected[..]);
            buf.consume(expected.len());
        }
        assert!(buf.data().is_empty());
        assert_eq!(buf.fill_from(&mut source).unwrap(), 0);
        assert_eq!(held.load(Ordering::Relaxed), READ_BUFFER_IDLE_BYTES as u64);
    }

    #[test]
    fn a_header_cut_short_still_makes_progress() {
        let held = AtomicU64::new(0);
        let stream = message(20_000, 3);
        let mut source = Chunks {
            bytes: &stream,
            chunk: 3,
        };
        let mut buf = ReadBuffer::new(&held);
        while buf.data().len() < stream.len() {
            assert!(buf.fill_from(&mut source).unwrap() > 0);
        }
        assert_eq!(buf.data(), &stream[..]);
    }
}
