//! libFuzzer harness for `agent_fuzz::wire_format`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_fuzz::wire_format(data));
