//! Operational transform by example (K3): where a range lands after a step, which ranges
//! conflict, and how an observed scope follows edits around and inside it. Each case writes its
//! offsets out; the property tests in `props.rs` check convergence over random steps.

use patchdiff_kernel::{
    Conflict, EditShape, TextEdit, apply_edits, map_scope, ot::transform_range_over,
    transform_range,
};

/// Bytes `[start, end)` became `new_len` bytes.
fn edit(start: usize, end: usize, new_len: usize) -> EditShape {
    EditShape {
        start,
        end,
        new_len,
    }
}

fn conflict(start: usize, end: usize, new_len: usize) -> Result<(usize, usize), Conflict> {
    Err(Conflict {
        edit: edit(start, end, new_len),
    })
}

#[test]
fn a_range_moves_by_the_length_change_of_the_edits_before_it_only() {
    // "abcdefghij": replace "bc" (1..3) by four bytes, range "gh" (6..8) moves right by 2.
    assert_eq!(transform_range(6, 8, &[edit(1, 3, 4)]), Ok((8, 10)));
    // Deleting "bc" moves it left by 2.
    assert_eq!(transform_range(6, 8, &[edit(1, 3, 0)]), Ok((4, 6)));
    // An edit after the range leaves it in place.
    assert_eq!(transform_range(1, 3, &[edit(6, 8, 9)]), Ok((1, 3)));
    // Two edits before it add up, in any order.
    assert_eq!(
        transform_range(6, 8, &[edit(4, 5, 3), edit(0, 1, 0)]),
        Ok((7, 9))
    );
}

#[test]
fn touching_ranges_do_not_overlap_and_crossing_ones_conflict() {
    // Edit 3..5 against range 5..7 (touching on the right) and 1..3 (touching on the left).
    assert_eq!(transform_range(5, 7, &[edit(3, 5, 1)]), Ok((4, 6)));
    assert_eq!(transform_range(1, 3, &[edit(3, 5, 1)]), Ok((1, 3)));
    // One byte of overlap on either side, containment both ways: conflicts naming the edit.
    assert_eq!(transform_range(4, 7, &[edit(3, 5, 1)]), conflict(3, 5, 1));
    assert_eq!(transform_range(1, 4, &[edit(3, 5, 1)]), conflict(3, 5, 1));
    assert_eq!(transform_range(2, 8, &[edit(3, 5, 1)]), conflict(3, 5, 1));
    assert_eq!(transform_range(4, 5, &[edit(3, 6, 1)]), conflict(3, 6, 1));
}

#[test]
fn an_insertion_conflicts_only_strictly_inside_a_range() {
    // Insertion (empty edit) at 4 of two bytes against range 2..6: inside, a conflict.
    assert_eq!(transform_range(2, 6, &[edit(4, 4, 2)]), conflict(4, 4, 2));
    // At the range's start it lands before the range, which moves right.
    assert_eq!(transform_range(2, 6, &[edit(2, 2, 2)]), Ok((4, 8)));
    // At the range's end it lands after the range.
    assert_eq!(transform_range(2, 6, &[edit(6, 6, 2)]), Ok((2, 6)));
    // Just inside either end is still inside.
    assert_eq!(transform_range(2, 6, &[edit(3, 3, 1)]), conflict(3, 3, 1));
    assert_eq!(transform_range(2, 6, &[edit(5, 5, 1)]), conflict(5, 5, 1));
}

#[test]
fn an_insertion_point_conflicts_only_strictly_inside_an_edit() {
    // Range 4..4 (an insertion point) against the edit 2..6: inside, a conflict.
    assert_eq!(transform_range(4, 4, &[edit(2, 6, 1)]), conflict(2, 6, 1));
    // At the edit's start: before it. At its end: after it, moved by the change (1 - 4).
    assert_eq!(transform_range(2, 2, &[edit(2, 6, 1)]), Ok((2, 2)));
    assert_eq!(transform_range(6, 6, &[edit(2, 6, 1)]), Ok((3, 3)));
    // Two insertions at the same offset: the earlier accepted step's text lands first.
    assert_eq!(transform_range(3, 3, &[edit(3, 3, 5)]), Ok((8, 8)));
}

#[test]
fn ranges_are_carried_over_steps_in_order_and_a_conflict_names_its_step() {
    let steps = vec![
        vec![edit(0, 1, 3)],
        vec![edit(10, 12, 0)],
        vec![edit(2, 3, 2)],
    ];
    // 5..7 → 7..9 (step 0) → 7..9 (step 1, after) → 8..10 (step 2, before).
    assert_eq!(transform_range_over(5, 7, &steps), Ok((8, 10)));
    // 9..11 → 11..13, which crosses step 1's edit 10..12: the conflict is step index 1.
    assert_eq!(
        transform_range_over(9, 11, &steps),
        Err((
            1,
            Conflict {
                edit: edit(10, 12, 0)
            }
        ))
    );
    assert_eq!(transform_range_over(5, 7, &[]), Ok((5, 7)));
}

#[test]
fn a_scope_grows_with_edits_inside_it_and_is_untouched_by_edits_outside() {
    // Scope 10..20. An edit inside (12..14 → 5 bytes) grows it by 3 and touches it.
    assert_eq!(map_scope(10, 20, &[edit(12, 14, 5)]), ((10, 23), true));
    // An edit before it shifts it untouched; one after it leaves it.
    assert_eq!(map_scope(10, 20, &[edit(2, 4, 0)]), ((8, 18), false));
    assert_eq!(map_scope(10, 20, &[edit(25, 30, 0)]), ((10, 20), false));
    // Edits touching its boundaries from outside do not touch it.
    assert_eq!(map_scope(10, 20, &[edit(5, 10, 1)]), ((6, 16), false));
    assert_eq!(map_scope(10, 20, &[edit(20, 22, 0)]), ((10, 20), false));
}

#[test]
fn an_edit_crossing_a_scope_boundary_pulls_the_boundary_to_its_outer_edge() {
    // Scope 10..20; edit 8..12 → 1 byte crosses the start: the start goes to the edit's start.
    assert_eq!(map_scope(10, 20, &[edit(8, 12, 1)]), ((8, 17), true));
    // Edit 18..25 → 2 bytes crosses the end: the end goes to the end of its new text.
    assert_eq!(map_scope(10, 20, &[edit(18, 25, 2)]), ((10, 20), true));
    // An insertion at either boundary lands outside the scope (before it, after it).
    assert_eq!(map_scope(10, 20, &[edit(10, 10, 3)]), ((13, 23), false));
    assert_eq!(map_scope(10, 20, &[edit(20, 20, 3)]), ((10, 20), false));
    // An empty scope (a point) stays a point after an insertion there, and inside a
    // replacement it goes to the replacement's start.
    assert_eq!(map_scope(10, 10, &[edit(10, 10, 3)]), ((13, 13), false));
    assert_eq!(map_scope(10, 10, &[edit(8, 12, 3)]), ((8, 8), true));
    // A replacement that starts exactly at the scope's end stays outside it, whatever its size.
    assert_eq!(map_scope(10, 20, &[edit(20, 25, 2)]), ((10, 20), false));
    // A boundary pulled to a crossing edit also moves with the edits before that edit.
    assert_eq!(
        map_scope(10, 20, &[edit(0, 2, 5), edit(8, 12, 1)]),
        ((11, 20), true)
    );
}

#[test]
fn edits_of_one_step_apply_in_offset_order_whatever_order_they_are_given() {
    let text = |start, end, t: &str| TextEdit {
        start,
        end,
        new_text: t.to_owned(),
    };
    let content = "fn a() {}\nfn b() {}\n";
    let applied = apply_edits(content, &[text(13, 14, "B"), text(3, 4, "A")]).unwrap();
    assert_eq!(applied, "fn A() {}\nfn B() {}\n");
    // Adjacent edits are fine; overlapping ones and two insertions at one offset are refused.
    assert_eq!(
        apply_edits("abcd", &[text(0, 2, "X"), text(2, 4, "Y")]).unwrap(),
        "XY"
    );
    for edits in [
        vec![text(0, 3, "X"), text(2, 4, "Y")],
        vec![text(1, 1, "X"), text(1, 1, "Y")],
    ] {
        let err = apply_edits("abcd", &edits).unwrap_err();
        assert_eq!(err.code.as_str(), "OVERLAPPING_OPERATIONS", "{edits:?}");
    }
    // An insertion next to a replacement starting at the same offset is not an overlap.
    assert_eq!(
        apply_edits("abcd", &[text(1, 1, "X"), text(1, 2, "Y")]).unwrap(),
        "aXYcd"
    );
}
