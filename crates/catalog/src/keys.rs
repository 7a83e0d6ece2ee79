//! Byte layouts of the keys Basalt writes into the storage spaces (DESIGN §4).
//!
//! - catalog: `c` | db | 0x00 | collection → collection metadata (BSON);
//!   `n` → the next id to hand out (u64, big-endian);
//!   `i` | collection id → the first and last record ids (u64 BE) of an insert batch
//!   being ingested (present only while it is written);
//!   `w` | index id | record id → a column store index's write marker
//!   (`column_store.rs`)
//! - records: collection id (u64 BE) | record id (u64 BE) → document (BSON)
//! - indexes: index id (u64 BE) | encoded key | record id (u64 BE) → empty
//!
//! Big-endian ids make byte order equal numeric order, so natural order is insertion
//! order and one collection's records are one contiguous range.

pub const NEXT_ID_KEY: &[u8] = b"n";
const COLLECTION_TAG: u8 = b'c';
const INGESTION_TAG: u8 = b'i';

pub fn collection_meta_key(db: &str, collection: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + db.len() + collection.len());
    key.push(COLLECTION_TAG);
    key.extend_from_slice(db.as_bytes());
    key.push(0);
    key.extend_from_slice(collection.as_bytes());
    key
}

pub fn ingestion_marker_key(collection_id: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(9);
    key.push(INGESTION_TAG);
    key.extend_from_slice(&collection_id.to_be_bytes());
    key
}

/// The value of an ingestion marker: the batch's first and last record ids.
pub fn ingestion_marker_value(first: u64, last: u64) -> Vec<u8> {
    let mut value = first.to_be_bytes().to_vec();
    value.extend_from_slice(&last.to_be_bytes());
    value
}

/// The first and last record ids an ingestion marker names; `None` when it is corrupt.
pub fn ingestion_marker_range(value: &[u8]) -> Option<(u64, u64)> {
    let (first, last) = value.split_first_chunk::<8>()?;
    Some((
        u64::from_be_bytes(*first),
        u64::from_be_bytes(last.try_into().ok()?),
    ))
}

pub fn collection_meta_prefix() -> Vec<u8> {
    vec![COLLECTION_TAG]
}

pub fn record_prefix(collection_id: u64) -> [u8; 8] {
    collection_id.to_be_bytes()
}

pub fn record_key(collection_id: u64, record_id: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(16);
    key.extend_from_slice(&collection_id.to_be_bytes());
    key.extend_from_slice(&record_id.to_be_bytes());
    key
}

/// The record id at the end of a record or index key.
pub fn trailing_record_id(key: &[u8]) -> Option<u64> {
    let tail = key.len().checked_sub(8).map(|start| &key[start..])?;
    Some(u64::from_be_bytes(tail.try_into().ok()?))
}

/// `index id | encoded key`: every entry for one key value starts with this.
pub fn index_key_prefix(index_id: u64, encoded: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(8 + encoded.len() + 8);
    key.extend_from_slice(&index_id.to_be_bytes());
    key.extend_from_slice(encoded);
    key
}

pub fn index_entry_key(index_id: u64, encoded: &[u8], record_id: u64) -> Vec<u8> {
    let mut key = index_key_prefix(index_id, encoded);
    key.extend_from_slice(&record_id.to_be_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_keys_order_by_id_and_round_trip() {
        assert!(record_key(1, 2) < record_key(1, 256));
        assert!(record_key(1, u64::MAX) < record_key(2, 0));
        assert_eq!(trailing_record_id(&record_key(7, 300)), Some(300));
        assert_eq!(trailing_record_id(&index_entry_key(3, b"abc", 9)), Some(9));
        assert_eq!(trailing_record_id(b"short"), None);
    }

    #[test]
    fn ingestion_markers_name_their_record_range() {
        let value = ingestion_marker_value(11, 20);
        assert_eq!(ingestion_marker_range(&value), Some((11, 20)));
        assert_eq!(ingestion_marker_range(&value[..15]), None);
        assert_eq!(
            ingestion_marker_range(&[value.clone(), vec![0]].concat()),
            None
        );
    }
}
