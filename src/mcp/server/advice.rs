//! Where a near miss is (K2): an `old_text` that is not in its observed scope but is elsewhere
//! in the target is named with the scope it is in — its kind, qualified name and lines, e.g.
//! `method Ring.Push lines 10–15` — which only the server knows (the kernel sees bytes, not
//! scopes). Without it the agent is told "observe the scope that contains it" and must search.
//!
//! The scope is added to the receipt as delivered, never to the stored one: the kernel's
//! message stays the durable record, and an identical retry (K4) is delivered the same way.

use super::*;

/// What the kernel's `OLD_TEXT_NOT_FOUND` message says when the text is elsewhere in the target
/// (`kernel::near_miss::explain_not_found`).
const ELSEWHERE: &str = "it occurs elsewhere in the target: at line ";

/// The kernel's advice when it cannot name the scope, replaced when the server can.
const FIND_THE_SCOPE: &str =
    "observe the scope that contains it (find_occurrences names it) and use that observation";

/// For each reason of `reasons` that says its operation's `old_text` occurs elsewhere in
/// `content`: (reason index, the first occurrence's UTF-8 byte range), as the kernel found it.
/// `codes` are the reasons' codes; `old_texts` the submission's, by operation index.
pub(super) fn elsewhere_ranges(
    reasons: &[String],
    codes: &[kernel::RejectionCode],
    old_texts: &[String],
    content: &str,
) -> Vec<(usize, [usize; 2])> {
    reasons
        .iter()
        .zip(codes)
        .enumerate()
        .filter(|(_, (r, c))| {
            **c == kernel::RejectionCode::OldTextNotFound && r.contains(ELSEWHERE)
        })
        .filter_map(|(i, (reason, _))| {
            let old_text = old_texts.get(operation_index(reason)?)?;
            let first = *kernel::find_all(content, old_text).first()?;
            Some((i, [first, first + old_text.len()]))
        })
        .collect()
}

/// The 0-based operation a reason names (`operation N (index I): …`).
fn operation_index(reason: &str) -> Option<usize> {
    let rest = reason.split_once("(index ")?.1;
    rest[..rest.find(')')?].parse().ok()
}

/// `reason` with the scope the text is in named after its place, and the advice to observe
/// that scope instead of searching for it.
pub(super) fn with_scope(reason: &str, scope: &Scope) -> String {
    let Some(at) = reason.find(ELSEWHERE) else {
        return reason.to_owned();
    };
    // After "at line L (bytes A–B)": the first `)` past the marker closes the byte range.
    let after = at + ELSEWHERE.len();
    let Some(close) = reason[after..].find(')').map(|c| after + c + 1) else {
        return reason.to_owned();
    };
    let name = delivery::cut(&scope.name, 200);
    let named = format!(
        "{} in {} {name} lines {}–{}{}",
        &reason[..close],
        scope.kind,
        scope.start_line,
        scope.end_line,
        &reason[close..]
    );
    named.replacen(
        FIND_THE_SCOPE,
        &format!(
            "observe {} {name} (scope \"{name}\") and use that observation",
            scope.kind
        ),
        1,
    )
}

impl PatchdiffServer {
    /// Names the scope of every near miss of a rejected `receipt` that is elsewhere in the
    /// target (see the module docs). Best effort and cheap: one covering discovery for all of
    /// them, only when the target is still at the receipt's base revision (the bytes the
    /// kernel searched); a target without a worker or a language keeps the kernel's words.
    pub(super) async fn name_near_miss_scopes(
        &self,
        receipt: &mut crate::store::Receipt,
        old_texts: &[String],
    ) {
        if !receipt.reasons.iter().any(|r| r.contains(ELSEWHERE)) {
            return;
        }
        let name = receipt.target.clone();
        let Ok(t) = self.blocking(move |s| s.read_target(&name)).await else {
            return;
        };
        if t.revision != receipt.base_revision {
            return;
        }
        let found = elsewhere_ranges(
            &receipt.reasons,
            &receipt.reason_codes,
            old_texts,
            &t.content,
        );
        if found.is_empty() {
            return;
        }
        let ranges = found.iter().map(|(_, r)| *r).collect();
        let Ok(d) = self
            .discover(
                &t.name,
                &t.language,
                &t.content,
                &ScopeQuery::Covering(ranges),
            )
            .await
        else {
            return;
        };
        for (i, [start, end]) in found {
            if let Some(scope) = innermost_scope(&d.scopes, start, end) {
                receipt.reasons[i] = with_scope(&receipt.reasons[i], scope);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = "operation 2 (index 1): old_text \"fn push\" does not occur in scope function f at revision 0: it occurs elsewhere in the target: at line 10 (bytes 120–127) (and 1 more places), outside this scope (lines 2–4); observe the scope that contains it (find_occurrences names it) and use that observation";

    fn ring_push() -> Scope {
        Scope {
            kind: "method".into(),
            name: "Ring.Push".into(),
            start_byte: 100,
            end_byte: 200,
            start_line: 10,
            end_line: 15,
        }
    }

    /// K2: the near miss names the scope the text is in.
    #[test]
    fn text_elsewhere_is_named_with_its_scope_kind_name_and_lines() {
        assert_eq!(
            with_scope(KERNEL, &ring_push()),
            "operation 2 (index 1): old_text \"fn push\" does not occur in scope function f at revision 0: it occurs elsewhere in the target: at line 10 (bytes 120–127) in method Ring.Push lines 10–15 (and 1 more places), outside this scope (lines 2–4); observe method Ring.Push (scope \"Ring.Push\") and use that observation"
        );
        // Another near miss is left as the kernel wrote it.
        let other = "operation 1 (index 0): old_text \"x\" does not occur in scope function f at revision 0: its line endings differ";
        assert_eq!(with_scope(other, &ring_push()), other);
    }

    #[test]
    fn only_elsewhere_reasons_are_located_at_their_operations_first_occurrence() {
        use kernel::RejectionCode::*;
        let content = "aaa fn push bbb fn push";
        let reasons = vec![
            "operation 1 (index 0): old_text \"zz\" does not occur in scope function f at revision 0, nor anywhere else in the target".to_owned(),
            KERNEL.to_owned(),
            KERNEL.to_owned(),
        ];
        let codes = [OldTextNotFound, OldTextNotFound, OldTextAmbiguous];
        let old_texts = ["zz".to_owned(), "fn push".to_owned()];
        assert_eq!(
            elsewhere_ranges(&reasons, &codes, &old_texts, content),
            [(1, [4, 11])]
        );
        assert_eq!(operation_index("operation 12 (index 11): x"), Some(11));
        assert_eq!(operation_index("no index"), None);
    }
}
