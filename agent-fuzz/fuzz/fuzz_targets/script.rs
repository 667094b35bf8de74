//! libFuzzer harness for `agent_fuzz::script`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_fuzz::script(data));
