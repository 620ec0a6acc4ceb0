//! The run's database (V2): opened without writing into the run (a scratch copy of its
//! SQLite file, or the PostgreSQL database named), and its identity against the one the run
//! recorded at `init` and at the seal.

use serde_json::Value;

use super::Ctx;
use super::journal::replay_all;
use super::receipts::check_receipts;
use crate::fixtures::FixtureManifest;
use crate::store::{EditStore, PostgresStore, SqliteStore};

/// The run's database: a scratch copy of `store.sqlite` (verify never writes into the run),
/// or the PostgreSQL database `database_url` names. `None` with a problem when there is none.
fn open_run_store(
    ctx: &mut Ctx,
    database_url: Option<&str>,
    before: usize,
) -> Option<(Box<dyn EditStore>, String, Option<tempfile::TempDir>)> {
    const DB: &str = crate::evidence::run_dir::DATABASE_FILE;
    let db = ctx.root.join(DB);
    if !db.is_file() {
        // A run on PostgreSQL replays from the database PATCHDIFF_DATABASE_URL names.
        match database_url.filter(|u| crate::store::is_postgres_url(u)) {
            Some(url) => match PostgresStore::connect(url) {
                Ok(store) => {
                    let source = store.redacted_url().to_owned();
                    return Some((Box::new(store), source, None));
                }
                Err(e) => {
                    ctx.problem("journal", DB, None, format!("cannot open: {e}"));
                    ctx.done("journal", before, "unreadable database".into());
                }
            },
            None => {
                ctx.problem(
                    "journal",
                    DB,
                    None,
                    "the run has no store.sqlite; a run on PostgreSQL replays from its database: \
                     set PATCHDIFF_DATABASE_URL=postgres://… and verify again"
                        .into(),
                );
                ctx.done("journal", before, "no database".into());
            }
        }
        return None;
    }
    // Open a copy: verifying must not write into the run (SQLite creates -wal/-shm files).
    let scratch = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            ctx.problem("journal", DB, None, format!("no scratch directory: {e}"));
            return None;
        }
    };
    let copy = scratch.path().join(DB);
    // The seal checkpoints the database, so its WAL is empty or gone; SQLite's side
    // files are not sealed, so a WAL holding frames is something written after the seal and is
    // never replayed.
    let wal = ctx.root.join(format!("{DB}-wal"));
    if let Ok(m) = std::fs::symlink_metadata(&wal)
        && m.len() > 0
    {
        ctx.problem(
            "journal",
            &format!("{DB}-wal"),
            None,
            format!(
                "holds {} bytes of database writes the seal does not cover (the run's database \
                 was written after `report` checkpointed it); they are not replayed",
                m.len()
            ),
        );
    }
    if let Err(e) = std::fs::copy(&db, &copy) {
        ctx.problem("journal", DB, None, format!("cannot copy: {e}"));
        return None;
    }
    match SqliteStore::open(&copy) {
        Ok(s) => Some((Box::new(s), DB.to_owned(), Some(scratch))),
        Err(e) => {
            ctx.problem("journal", DB, None, format!("cannot open: {e}"));
            ctx.done("journal", before, "unreadable database".into());
            None
        }
    }
}

/// Replays each target's journal from its authenticated fixture bytes: every edit must
/// reproduce its recorded hash, every save the content at its revision, and the last saved
/// version must equal the export byte for byte. Before that, the database must be the run's
/// (`store`: its identity against the one the manifest and the seal's journal binding
/// record); after it, each target's journal digest must be the one the seal recorded, and
/// every acknowledged receipt in the wire logs must be in the journal (`receipts`).
pub(super) fn check_journal(ctx: &mut Ctx, fixtures: &FixtureManifest, database_url: Option<&str>) {
    let before = ctx.problems.len();
    let Some((store, source, _scratch)) = open_run_store(ctx, database_url, before) else {
        return;
    };
    let binding = check_store_identity(ctx, store.as_ref(), &source);
    let before = ctx.problems.len();
    let indexes = replay_all(ctx, fixtures, store.as_ref(), &source, binding.as_ref());
    ctx.done("journal", before, indexes.1);
    check_receipts(ctx, &indexes.0);
}

/// The database at hand against the identity the run recorded: in `manifest.json`
/// (`configuration.store_identity`, at `init`) and in [`crate::seal::JOURNAL_FILE`] (at the
/// seal). Returns the journal binding when the run has one. A run from before either was
/// recorded is said to be unbound, not failed.
fn check_store_identity(
    ctx: &mut Ctx,
    store: &dyn EditStore,
    source: &str,
) -> Option<crate::seal::JournalBinding> {
    use crate::seal::{JOURNAL_FILE, JournalBinding};
    use crate::store::StoreIdentity;
    let before = ctx.problems.len();
    let found = match store.identity() {
        Ok(i) => i,
        Err(e) => {
            ctx.problem(
                "store",
                source,
                None,
                format!("cannot read its identity: {e}"),
            );
            ctx.done("store", before, "identity unreadable".into());
            return None;
        }
    };
    let recorded_at_init: Option<StoreIdentity> = std::fs::read(ctx.run.manifest())
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|m| serde_json::from_value(m["configuration"]["store_identity"].clone()).ok());
    let binding = match JournalBinding::read(&ctx.root) {
        Ok(b) => b,
        Err(e) => {
            ctx.problem("store", JOURNAL_FILE, None, e);
            None
        }
    };
    let mut compared = Vec::new();
    for (file, recorded) in [
        (
            crate::evidence::run_dir::MANIFEST_FILE,
            recorded_at_init.as_ref(),
        ),
        (JOURNAL_FILE, binding.as_ref().map(|b| &b.store)),
    ] {
        let Some(recorded) = recorded else { continue };
        compared.push(file);
        let differences = recorded.differences(&found);
        if !differences.is_empty() {
            ctx.problem(
                "store",
                source,
                None,
                format!(
                    "not the run's database: {} — {file} records {} database {:?}; verify \
                     against the database the run used",
                    differences.join(", "),
                    recorded.backend,
                    recorded.database
                ),
            );
        }
    }
    let summary = if compared.is_empty() {
        format!(
            "{} database {:?}: the run records no store identity (sealed before runs were \
             bound to their database)",
            found.backend, found.database
        )
    } else {
        format!(
            "{} database {:?} store id {} is the one {} record{}",
            found.backend,
            found.database,
            found.store_id.as_deref().unwrap_or("-"),
            compared.join(" and "),
            if compared.len() == 1 { "s" } else { "" }
        )
    };
    ctx.done("store", before, summary);
    binding
}
