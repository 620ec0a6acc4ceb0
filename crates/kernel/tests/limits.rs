//! The kernel's submission limits (K8) and stable codes, with every figure written out here rather
//! than taken from the kernel's own constants: a wrong constant must fail these tests.
//!
//! Limits: request keys 1..=256 bytes, 1..=64 operations, at most 32 MiB of `old_text` +
//! `new_text` per submission, non-empty `old_text`; a target's content at most 256 MiB.

use patchdiff_kernel::{
    KernelCode, KernelError, MAX_CONTENT_BYTES, MAX_NAME_BYTES, MAX_OPERATIONS,
    MAX_REQUEST_KEY_BYTES, MAX_SUBMISSION_TEXT_BYTES, OperationRequest, Submission, sha256_hex,
    validate_submission,
};

const MIB: usize = 1024 * 1024;

fn op(old: &str, new: &str) -> OperationRequest {
    OperationRequest {
        observation_id: None,
        old_text: old.to_owned(),
        new_text: new.to_owned(),
    }
}

fn submission(key: &str, operations: Vec<OperationRequest>) -> Submission {
    Submission {
        request_key: key.to_owned(),
        base_revision: 0,
        expected_sha256: None,
        operations,
    }
}

fn code_of(s: &Submission) -> Option<KernelCode> {
    validate_submission(s).err().map(|e| e.code)
}

#[test]
fn the_published_limits_are_the_documented_figures() {
    assert_eq!(MAX_OPERATIONS, 64);
    assert_eq!(MAX_SUBMISSION_TEXT_BYTES, 33_554_432, "32 MiB");
    assert_eq!(MAX_CONTENT_BYTES, 268_435_456, "256 MiB");
    assert_eq!(MAX_REQUEST_KEY_BYTES, 256);
    assert_eq!(MAX_NAME_BYTES, 256);
}

#[test]
fn request_keys_of_1_to_256_bytes_pass_and_0_or_257_are_invalid_input() {
    for len in [1, 2, 255, 256] {
        let s = submission(&"k".repeat(len), vec![op("a", "b")]);
        assert_eq!(code_of(&s), None, "a {len}-byte key is accepted");
    }
    for len in [0, 257, 1000] {
        let s = submission(&"k".repeat(len), vec![op("a", "b")]);
        let err = validate_submission(&s).expect_err("refused");
        assert_eq!(err.code, KernelCode::InvalidInput, "{len}-byte key");
        assert!(
            err.message.contains("1..=256") && err.message.contains(&format!("got {len}")),
            "the message names the range and the length: {}",
            err.message
        );
    }
    // Bytes, not characters: 86 three-byte characters are 258 bytes.
    let s = submission(&"界".repeat(86), vec![op("a", "b")]);
    assert_eq!(code_of(&s), Some(KernelCode::InvalidInput));
}

#[test]
fn one_to_64_operations_pass_and_65_are_too_many() {
    assert_eq!(
        code_of(&submission("k", vec![])),
        Some(KernelCode::InvalidInput),
        "no operations"
    );
    for n in [1, 63, 64] {
        let s = submission("k", vec![op("a", "b"); n]);
        assert_eq!(code_of(&s), None, "{n} operations");
    }
    let err = validate_submission(&submission("k", vec![op("a", "b"); 65])).unwrap_err();
    assert_eq!(err.code, KernelCode::TooManyOperations);
    assert!(err.message.contains("65 operations") && err.message.contains("64"));
}

#[test]
fn text_up_to_32_mib_passes_and_one_byte_more_is_too_large() {
    // Old and new text are summed over all operations.
    let half = "x".repeat(16 * MIB);
    let exact = submission("k", vec![op(&half, ""), op("y", &half[1..])]);
    assert_eq!(code_of(&exact), None, "exactly 32 MiB");
    let over = submission("k", vec![op(&half, ""), op("y", &half)]);
    let err = validate_submission(&over).unwrap_err();
    assert_eq!(err.code, KernelCode::SubmissionTooLarge);
    assert!(
        err.message.contains(&format!("{} bytes", 32 * MIB + 1)),
        "{}",
        err.message
    );
}

#[test]
fn an_empty_old_text_names_the_operation_by_number() {
    let s = submission("k", vec![op("a", "b"), op("", "inserted")]);
    let err = validate_submission(&s).unwrap_err();
    assert_eq!(err.code, KernelCode::InvalidInput);
    assert!(
        err.message.contains("operation 2 (index 1)"),
        "{}",
        err.message
    );
}

#[test]
fn codes_are_spelled_the_same_by_display_as_str_and_the_error() {
    let all = [
        (KernelCode::OutOfRange, "OUT_OF_RANGE"),
        (KernelCode::NotCharBoundary, "NOT_CHAR_BOUNDARY"),
        (KernelCode::OverlappingOperations, "OVERLAPPING_OPERATIONS"),
        (KernelCode::InvalidInput, "INVALID_INPUT"),
        (KernelCode::TooManyOperations, "TOO_MANY_OPERATIONS"),
        (KernelCode::SubmissionTooLarge, "SUBMISSION_TOO_LARGE"),
    ];
    for (code, text) in all {
        assert_eq!(code.as_str(), text);
        assert_eq!(code.to_string(), text);
        assert_eq!(
            KernelError::new(code, "why").to_string(),
            format!("{text}: why")
        );
    }
}

#[test]
fn sha256_hex_is_lowercase_hex_of_the_bytes() {
    // FIPS 180-2 test vector "abc".
    assert_eq!(
        sha256_hex("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

#[test]
fn snippets_are_cut_at_the_byte_bound_on_a_character_boundary() {
    use patchdiff_kernel::snippet;
    assert_eq!(snippet("abc", 3), "abc", "at the bound: whole");
    assert_eq!(snippet("abcd", 3), "abc…");
    // "é" is bytes 1..3: a cut at 2 backs off to 1; a cut at 3 keeps it.
    assert_eq!(snippet("héllo", 2), "h…");
    assert_eq!(snippet("héllo", 3), "hé…");
    // "界" is three bytes: a bound of 4 keeps one, not a broken second.
    assert_eq!(snippet("界界", 4), "界…");
}
