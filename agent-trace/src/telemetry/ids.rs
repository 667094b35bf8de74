//! A session's trace id: its OpenTelemetry trace is named after the session, so
//! every run of it — the first, each resume, each worker's drive, on any machine
//! — belongs to one trace without anything more to store than the log already
//! holds. A UUID session id (the runtime's own) is its 128 bits; any other id
//! is hashed.

use sha2::{Digest, Sha256};

/// The 128-bit trace id of `session_id`, never zero.
pub fn trace_id_of(session_id: &str) -> u128 {
    let hex: String = session_id.chars().filter(|c| *c != '-').collect();
    let id = if hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
        u128::from_str_radix(&hex, 16).unwrap_or(0)
    } else {
        let digest = Sha256::digest(session_id.as_bytes());
        digest
            .iter()
            .take(16)
            .fold(0u128, |id, byte| (id << 8) | u128::from(*byte))
    };
    id.max(1)
}

/// The span id of the session's (never exported) root, parent of its runs.
#[cfg(feature = "otel")]
pub fn root_span_id_of(session_id: &str) -> u64 {
    let digest = Sha256::digest(format!("root of {session_id}").as_bytes());
    digest
        .iter()
        .take(8)
        .fold(0u64, |id, byte| (id << 8) | u64::from(*byte))
        .max(1)
}

/// The trace id as the 32 lowercase hex digits OpenTelemetry shows.
pub fn trace_id_hex(session_id: &str) -> String {
    format!("{:032x}", trace_id_of(session_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_session_id_is_its_trace_id_and_others_are_hashed() {
        let id = "01a23d00-04b3-7b54-b514-edeea4aef7cf";
        assert_eq!(trace_id_hex(id), "01a23d0004b37b54b514edeea4aef7cf");
        assert_eq!(trace_id_of("my session"), trace_id_of("my session"));
        assert_ne!(trace_id_of("my session"), trace_id_of("my other session"));
        #[cfg(feature = "otel")]
        assert_ne!(root_span_id_of(id), 0);
    }
}
