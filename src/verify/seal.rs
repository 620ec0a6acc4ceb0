//! The seal, its signature and the digests it binds (V1): `manifest.seal` against the
//! current `SHA256SUMS` and manifest, the operator's signature, every listed file's digest.

use super::{Ctx, run_id_of};
use crate::evidence::run_dir::MANIFEST_FILE;
use crate::evidence::{SEAL_FILE, SUMS_FILE, evidence_files, file_digest, seal_text};

/// The seal must be exactly what the current `SHA256SUMS` and `manifest.json` give.
pub(super) fn check_seal(ctx: &mut Ctx) {
    let before = ctx.problems.len();
    let found = match std::fs::read(ctx.root.join(SEAL_FILE)) {
        Ok(b) => b,
        Err(e) => {
            ctx.problem(
                "seal",
                SEAL_FILE,
                None,
                format!("cannot read the seal ({e}); a run is sealed by its `report` step"),
            );
            ctx.done("seal", before, "no seal".into());
            return;
        }
    };
    let sums = file_digest(&ctx.root.join(SUMS_FILE)).unwrap_or_default();
    let manifest = file_digest(&ctx.run.manifest()).ok();
    let expected = seal_text(&run_id_of(&ctx.root), manifest.as_deref(), &sums);
    if found != expected.as_bytes() {
        let found = String::from_utf8_lossy(&found).into_owned();
        // Name the sealed file whose digest moved, then the seal itself.
        for (name, now) in [
            (SUMS_FILE, Some(sums.as_str())),
            (MANIFEST_FILE, manifest.as_deref()),
        ] {
            let prefix = format!("SHA256 ({name}) = ");
            let recorded = found.lines().find_map(|l| l.strip_prefix(prefix.as_str()));
            if let (Some(recorded), Some(now)) = (recorded, now)
                && recorded != now
            {
                ctx.problem(
                    "seal",
                    name,
                    None,
                    format!(
                        "SHA-256 is {now}, the seal records {recorded}: {name} (or the seal) \
                         changed after sealing"
                    ),
                );
            }
        }
        let (n, want, got) = first_different_line(&expected, &found);
        ctx.problem(
            "seal",
            SEAL_FILE,
            Some(n),
            format!(
                "the seal does not match the run: expected `{want}`, found `{got}` (the sums, \
                 the manifest or the seal changed)"
            ),
        );
    }
    ctx.done("seal", before, format!("{SEAL_FILE} binds {SUMS_FILE}"));
}

/// The operator's signature over the seal ([`crate::seal`]): with `key`, it must hold for
/// that key; without, the summary says plainly `unsigned` or who signed it, not checked.
pub(super) fn check_signature(ctx: &mut Ctx, key: Option<&crate::seal::PublicKey>) {
    use crate::seal::{SIGNATURE_FILE, SignatureStatus};
    let before = ctx.problems.len();
    let summary = match crate::seal::check_signature(&ctx.root, key) {
        SignatureStatus::Unsigned => "unsigned".to_owned(),
        SignatureStatus::NotChecked { key_id } => {
            format!("signed by {key_id}, not checked (pass --key)")
        }
        SignatureStatus::Verified { key_id } => format!("signed by {key_id}, signature holds"),
        SignatureStatus::Failed(why) => {
            ctx.problem("signature", SIGNATURE_FILE, None, why);
            "signature does not hold".to_owned()
        }
    };
    ctx.done("signature", before, summary);
}

fn first_different_line<'a>(expected: &'a str, found: &'a str) -> (usize, &'a str, &'a str) {
    let mut e = expected.split('\n');
    let mut f = found.split('\n');
    let mut n = 1;
    loop {
        match (e.next(), f.next()) {
            (Some(a), Some(b)) if a == b => n += 1,
            (a, b) => return (n, a.unwrap_or("<end>"), b.unwrap_or("<end>")),
        }
    }
}

/// Every listed file exists with its digest; no file is unlisted.
pub(super) fn check_digests(ctx: &mut Ctx) {
    let before = ctx.problems.len();
    let text = match std::fs::read(ctx.root.join(SUMS_FILE)) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            ctx.problem("digest", SUMS_FILE, None, format!("cannot read: {e}"));
            ctx.done("digest", before, "no digests".into());
            return;
        }
    };
    let mut listed = std::collections::BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let parsed = line.split_once("  ").filter(|(hex, rel)| {
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                && !rel.is_empty()
        });
        let Some((want, rel)) = parsed else {
            ctx.problem(
                "digest",
                SUMS_FILE,
                Some(i + 1),
                format!("not a `<sha256>  <path>` line: {line:?}"),
            );
            continue;
        };
        listed.insert(rel.to_owned());
        if rel.split('/').any(|c| c == ".." || c.is_empty()) {
            ctx.problem(
                "digest",
                SUMS_FILE,
                Some(i + 1),
                format!("path `{rel}` leaves the run directory"),
            );
            continue;
        }
        match file_digest(&ctx.root.join(rel)) {
            Ok(got) if got == want => {}
            Ok(got) => ctx.problem(
                "digest",
                rel,
                None,
                format!(
                    "SHA-256 is {got}, but {SUMS_FILE} line {} records {want}",
                    i + 1
                ),
            ),
            Err(e) => ctx.problem(
                "digest",
                rel,
                None,
                format!(
                    "listed in {SUMS_FILE} line {} but cannot be read: {e}",
                    i + 1
                ),
            ),
        }
    }
    match evidence_files(&ctx.root) {
        Ok(files) => {
            for rel in files.iter().filter(|f| !listed.contains(*f)) {
                ctx.problem(
                    "digest",
                    rel,
                    None,
                    format!("not listed in {SUMS_FILE}: added after the run was sealed"),
                );
            }
        }
        Err(e) => ctx.problem("digest", ".", None, format!("cannot list the run: {e}")),
    }
    ctx.done(
        "digest",
        before,
        format!("{} files against {SUMS_FILE}", listed.len()),
    );
}
