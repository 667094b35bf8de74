//! libFuzzer harness for `agent_fuzz::openai_response`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_fuzz::openai_response(data));
