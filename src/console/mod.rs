//! The operator console (SPEC U1–U5): the interactive ratatui screen and the headless
//! `--script` runner, both driving [`crate::canary::Canary`] through one command set.

pub mod headless;

/// Opens the interactive console (U1–U4).
pub async fn run_interactive(_options: crate::canary::CanaryOptions) -> anyhow::Result<()> {
    anyhow::bail!("the interactive console is not built yet; use --script")
}
