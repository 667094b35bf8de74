//! Session ids: UUID version 7 text (time-ordered, random low bits), made without
//! extra dependencies.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::event::now_millis;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A new session id such as `01936d2e-7b4c-7a1f-8c3e-5d2b9a0f4e61`; ids made later
/// sort after earlier ones at millisecond resolution.
pub fn new_session_id() -> String {
    let millis = now_millis() & 0xFFFF_FFFF_FFFF;
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    let random_a = hasher.finish();
    hasher.write_u64(random_a);
    let random_b = hasher.finish();
    let high = (millis << 16) | 0x7000 | (random_a & 0x0FFF);
    let low = (random_b & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xFFFF,
        high & 0xFFFF,
        low >> 48,
        low & 0xFFFF_FFFF_FFFF
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::new_session_id;

    #[test]
    fn ids_are_unique_uuid_v7_text() {
        let ids: HashSet<String> = (0..1000).map(|_| new_session_id()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert_eq!(id.len(), 36);
            assert_eq!(&id[14..15], "7");
        }
    }
}
