//! Misusing `#[derive(Tool)]` is a compile error that says what to change; correct
//! use compiles. The cases build against the `agent` facade with only its `derive`
//! feature, so the compile-test project stays small.

#[test]
fn misuse_is_a_compile_error_with_a_helpful_message() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass_*.rs");
    cases.compile_fail("tests/ui/fail_*.rs");
}
