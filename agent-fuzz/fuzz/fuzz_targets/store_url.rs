//! libFuzzer harness for `agent_fuzz::store_url`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_fuzz::store_url(data));
