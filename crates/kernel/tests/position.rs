//! Positions by example (K1): the line a range ends on and the checks every byte range passes
//! (ordered, inside the content, on character boundaries). Offsets are UTF-8 bytes, written out.

use patchdiff_kernel::{
    KernelCode, Outcome,
    position::{check_range, last_line_of},
};

#[test]
fn the_last_line_of_a_range_is_the_line_of_its_last_byte() {
    let content = "a\nb\nc"; // bytes: a0 \n1 b2 \n3 c4
    assert_eq!(last_line_of(content, 0, 1).unwrap(), 1, "\"a\"");
    assert_eq!(last_line_of(content, 2, 3).unwrap(), 2, "\"b\"");
    // A range ending with its line's terminator still ends on that line.
    assert_eq!(last_line_of(content, 2, 4).unwrap(), 2, "\"b\\n\"");
    assert_eq!(last_line_of(content, 0, 5).unwrap(), 3, "the whole content");
    // An empty range is on its start's line.
    assert_eq!(
        last_line_of(content, 4, 4).unwrap(),
        3,
        "the point before \"c\""
    );
    assert_eq!(
        last_line_of(content, 2, 2).unwrap(),
        2,
        "the point before \"b\""
    );
    assert_eq!(last_line_of(content, 0, 0).unwrap(), 1, "the start");
}

#[test]
fn the_last_line_of_a_bad_range_is_an_error_not_a_guess() {
    let err = last_line_of("a\nb", 2, 9).unwrap_err();
    assert_eq!(err.code, KernelCode::OutOfRange);
}

#[test]
fn ranges_must_be_ordered_inside_the_content_and_on_character_boundaries() {
    let content = "a界b"; // bytes: a0, 界 1..4, b4
    for (start, end) in [(0, 0), (0, 1), (1, 4), (4, 5), (5, 5), (0, 5)] {
        assert_eq!(check_range(content, start, end), Ok(()), "{start}..{end}");
    }
    let code = |start, end| check_range(content, start, end).unwrap_err().code;
    assert_eq!(code(4, 1), KernelCode::OutOfRange, "reversed");
    assert_eq!(code(1, 0), KernelCode::OutOfRange, "reversed by one");
    assert_eq!(code(0, 6), KernelCode::OutOfRange, "past the end");
    assert_eq!(
        code(6, 6),
        KernelCode::OutOfRange,
        "an empty range past the end"
    );
    assert_eq!(code(2, 4), KernelCode::NotCharBoundary, "starts inside 界");
    assert_eq!(code(1, 3), KernelCode::NotCharBoundary, "ends inside 界");
    let reversed = check_range(content, 4, 1).unwrap_err();
    assert!(
        reversed.message.contains("4..1 is reversed"),
        "{}",
        reversed.message
    );
}

#[test]
fn outcomes_are_spelled_lowercase_on_the_wire() {
    assert_eq!(Outcome::Accepted.as_str(), "accepted");
    assert_eq!(Outcome::Rejected.as_str(), "rejected");
}

#[test]
fn line_ranges_cover_their_lines_with_the_last_terminator() {
    use patchdiff_kernel::line_range_to_bytes;
    let content = "a\nb\r\nc"; // a0 \n1 b2 \r3 \n4 c5
    assert_eq!(line_range_to_bytes(content, 1, 1).unwrap(), (0, 2));
    assert_eq!(
        line_range_to_bytes(content, 2, 2).unwrap(),
        (2, 5),
        "with its \\r\\n"
    );
    assert_eq!(
        line_range_to_bytes(content, 3, 3).unwrap(),
        (5, 6),
        "no terminator"
    );
    assert_eq!(line_range_to_bytes(content, 2, 3).unwrap(), (2, 6));
    assert_eq!(line_range_to_bytes(content, 1, 3).unwrap(), (0, 6));
    // A trailing newline starts a final empty line.
    assert_eq!(line_range_to_bytes("a\n", 2, 2).unwrap(), (2, 2));
    for (start, end) in [(0, 1), (2, 1), (1, 4), (4, 4)] {
        let err = line_range_to_bytes(content, start, end).unwrap_err();
        assert_eq!(err.code, KernelCode::OutOfRange, "{start}..={end}");
        assert!(err.message.contains("has 3 lines"), "{}", err.message);
    }
}
