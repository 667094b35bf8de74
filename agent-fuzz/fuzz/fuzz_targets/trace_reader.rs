//! libFuzzer harness for `agent_fuzz::trace_reader`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_fuzz::trace_reader(data));
