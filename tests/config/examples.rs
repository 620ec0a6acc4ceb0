//! SPEC P1, P2: the files under `config/` through the real binary. `config/patchdiff.toml`
//! documents exactly the keys the config file accepts and loads cleanly as shipped; every
//! `config/examples/valid/*.toml` is accepted; every `config/examples/invalid/*.toml` is refused
//! with exit 2 and an error naming the variable (or key), the value and what is accepted, as
//! its `# expect-variable:`, `# expect-value:` and `# expect-accepted:` lines say.
//!
//! Each file is given as `PATCHDIFF_CONFIG` to `patchdiff mcp --print-host-config claude`,
//! which resolves and validates the whole startup configuration and exits without serving, in
//! an environment holding only `PATH` and a private `HOME` and XDG directories.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use patchdiff::config::{Key, SETTINGS, VARIABLE_PREFIX};

const EXE: &str = env!("CARGO_BIN_EXE_patchdiff");
/// Absolute paths in the examples live under this prefix; the test points it at a private
/// temporary directory.
const EXAMPLE_ROOT: &str = "/tmp/patchdiff-example";
/// The binary's exit code for invalid configuration.
const EXIT_USAGE: i32 = 2;

fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config")
}

/// The `.toml` files of `config/examples/<kind>`, sorted.
fn examples(kind: &str) -> Vec<PathBuf> {
    let dir = config_dir().join("examples").join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "too few examples in {}", dir.display());
    files
}

/// Runs `patchdiff mcp --print-host-config claude` with `file` (its example root rewritten into
/// a private directory) as the config file, from inside that directory.
fn run_with(file: &Path) -> Output {
    run_with_env(file, &[])
}

/// [`run_with`] with `extra` variables set too.
fn run_with_env(file: &Path, extra: &[(&str, &str)]) -> Output {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    let text = std::fs::read_to_string(file).expect("read example");
    let copy = root.join(file.file_name().expect("file name"));
    std::fs::write(
        &copy,
        text.replace(EXAMPLE_ROOT, &root.join("example").display().to_string()),
    )
    .expect("write copy");
    std::fs::create_dir(root.join("example")).expect("example root");
    let cwd = root.join("cwd");
    std::fs::create_dir(&cwd).expect("cwd");
    std::process::Command::new(EXE)
        .args(["mcp", "--print-host-config", "claude"])
        .current_dir(&cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.join("home"))
        .env("XDG_CONFIG_HOME", root.join("xdg/config"))
        .env("XDG_DATA_HOME", root.join("xdg/data"))
        .env("XDG_STATE_HOME", root.join("xdg/state"))
        .env("XDG_CACHE_HOME", root.join("xdg/cache"))
        .env("PATCHDIFF_CONFIG", &copy)
        .envs(extra.iter().copied())
        .output()
        .expect("run patchdiff")
}

/// The value of the `# <name>: value` header line of an invalid example.
fn expectation(text: &str, name: &str, file: &Path) -> String {
    let prefix = format!("# {name}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| panic!("{}: no `{prefix}` line", file.display()))
}

#[test]
fn valid_examples_are_accepted() {
    for file in examples("valid") {
        let out = run_with(&file);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{} refused: {stderr}",
            file.display()
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{}: stdout is not JSON: {e}", file.display()));
        assert!(
            doc["mcpServers"]["patchdiff"]["command"].is_string(),
            "{}",
            file.display()
        );
    }
}

#[test]
fn the_documented_file_loads_cleanly_as_shipped() {
    let file = config_dir().join("patchdiff.toml");
    let out = run_with(&file);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn invalid_examples_are_refused_naming_variable_value_and_accepted_values() {
    for file in examples("invalid") {
        let text = std::fs::read_to_string(&file).expect("read example");
        let variable = expectation(&text, "expect-variable", &file);
        let value = expectation(&text, "expect-value", &file);
        let accepted = expectation(&text, "expect-accepted", &file);
        let out = run_with(&file);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let shown = file.display();
        assert_eq!(
            out.status.code(),
            Some(EXIT_USAGE),
            "{shown}: want exit 2; stderr: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{shown}: printed a configuration");
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("{variable}=")))
            .unwrap_or_else(|| panic!("{shown}: no error naming {variable}: {stderr}"));
        assert!(line.contains(&value), "{shown}: value {value:?}: {line}");
        assert!(
            line.contains("accepted values are") && line.contains(&accepted),
            "{shown}: accepted {accepted:?}: {line}"
        );
    }
}

/// `key = value` assignments in `# key = value` comment lines: the commented-out defaults.
fn commented_assignments(text: &str) -> toml::Table {
    let lines: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| {
            l.split_once(" = ").is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
        })
        .collect();
    lines
        .join("\n")
        .parse()
        .expect("the commented-out defaults are valid TOML")
}

/// The `PATCHDIFF_*` names in `text`.
fn variables_named(text: &str) -> BTreeSet<String> {
    text.match_indices(VARIABLE_PREFIX)
        .map(|(i, _)| {
            text[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect::<String>()
        })
        .filter(|name| name.len() > VARIABLE_PREFIX.len())
        .collect()
}

/// Our variables that only the environment sets.
fn environment_only() -> impl Iterator<Item = &'static patchdiff::config::SettingSpec> {
    SETTINGS
        .iter()
        .filter(|s| s.file_key.is_none() && s.variable.starts_with(VARIABLE_PREFIX))
}

#[test]
fn the_documented_file_lists_exactly_the_accepted_keys() {
    let text = std::fs::read_to_string(config_dir().join("patchdiff.toml")).expect("read");
    // As shipped it sets nothing.
    let live: toml::Table = text.parse().expect("valid TOML");
    assert!(live.is_empty(), "keys set as shipped: {live:?}");
    let documented = commented_assignments(&text);
    let documented_keys: BTreeSet<&str> = documented.keys().map(String::as_str).collect();
    let accepted: BTreeSet<&str> = SETTINGS.iter().filter_map(|s| s.file_key).collect();
    assert_eq!(
        documented_keys, accepted,
        "config/patchdiff.toml must document every key the config file accepts, and no other"
    );
    for (key, value) in &documented {
        let spec = Key::from_file_key(key).expect("a file key").spec();
        assert!(
            value.is_str() || value.is_integer() || (value.is_bool() && spec.is_switch()),
            "{key} = {value}: not a kind of value the config file accepts"
        );
    }
    // Environment-only variables are named, but not as keys.
    for spec in environment_only() {
        assert!(
            text.contains(spec.variable),
            "{} is not mentioned",
            spec.variable
        );
    }
    // And nothing else is named.
    let known: BTreeSet<String> = SETTINGS.iter().map(|s| s.variable.to_owned()).collect();
    let unknown: Vec<String> = variables_named(&text).difference(&known).cloned().collect();
    assert!(unknown.is_empty(), "not settings: {unknown:?}");
}

#[test]
fn the_documented_file_states_each_keys_accepted_values_and_default_as_the_table_does() {
    let text = std::fs::read_to_string(config_dir().join("patchdiff.toml")).expect("read");
    // A block: the comment lines between blank lines, ending with `# key = value` lines.
    for block in text.split("\n\n") {
        for spec in SETTINGS.iter().filter(|s| s.file_key.is_some()) {
            let key = spec.file_key.expect("file key");
            if !block.contains(&format!("\n# {key} = ")) {
                continue;
            }
            let accepted = block
                .split("# default:")
                .next()
                .expect("text before the default");
            for choice in spec.choices {
                assert!(
                    accepted.contains(&format!("\"{choice}\"")) || accepted.contains(choice),
                    "{key}: accepted value {choice:?} is not documented:\n{block}"
                );
            }
            if let Some(default) = spec.default {
                let line = block
                    .lines()
                    .find(|l| l.starts_with("# default:"))
                    .unwrap_or_else(|| panic!("{key}: no `# default:` line:\n{block}"));
                let shown = line.trim_start_matches("# default:").trim();
                assert!(
                    shown == default
                        || shown.starts_with(&format!("{default} "))
                        || shown.starts_with(&format!("\"{default}\"")),
                    "{key}: default {default:?}, documented as {shown:?}"
                );
            }
        }
    }
}

/// The README's `## Configuration` section.
fn readme_configuration() -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("read README.md");
    let start = readme
        .find("\n## Configuration\n")
        .expect("a Configuration section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_owned()
}

#[test]
fn the_readme_settings_table_agrees_with_the_settings_table() {
    let section = readme_configuration();
    let rows: Vec<(&str, &str)> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let mut cells = l.trim_matches('|').splitn(2, " | ");
            Some((cells.next()?, cells.next()?))
        })
        .collect();
    for spec in SETTINGS.iter().filter(|s| s.file_key.is_some()) {
        let name = format!("`{}`", spec.variable);
        let (_, values) = rows
            .iter()
            .find(|(names, _)| names.contains(&name))
            .unwrap_or_else(|| panic!("{name} has no row in README.md's settings table"));
        for choice in spec.choices {
            assert!(
                values.contains(&format!("`{choice}`")),
                "README.md: {name} does not list `{choice}`: {values}"
            );
        }
        if let Some(default) = spec.default {
            let shown = if spec.choices.is_empty() {
                default.to_owned()
            } else {
                format!("`{default}`")
            };
            assert!(
                values.contains(&shown) && (spec.choices.len() == 1 || values.contains("default")),
                "README.md: {name}'s default {default:?} is not shown: {values}"
            );
        }
    }
    let paragraph = section
        .split("\n\n")
        .find(|p| p.starts_with("Environment only"))
        .expect("an `Environment only` paragraph");
    for spec in environment_only() {
        assert!(
            paragraph.contains(&format!("`{}`", spec.variable)),
            "README.md's environment-only list lacks {}",
            spec.variable
        );
        for choice in spec.choices {
            assert!(
                paragraph.contains(&format!("`{choice}`")),
                "README.md: {} does not list `{choice}`",
                spec.variable
            );
        }
    }
    let known: BTreeSet<String> = SETTINGS.iter().map(|s| s.variable.to_owned()).collect();
    let unknown: Vec<String> = variables_named(&section)
        .difference(&known)
        .cloned()
        .collect();
    assert!(
        unknown.is_empty(),
        "README.md names what is no setting: {unknown:?}"
    );
}

#[test]
fn the_commented_out_defaults_are_accepted_by_the_binary_where_they_need_no_machine_paths() {
    // The defaults that do not name a path on this machine, uncommented, load and validate.
    let text = std::fs::read_to_string(config_dir().join("patchdiff.toml")).expect("read");
    let documented = commented_assignments(&text);
    let portable: toml::Table = documented
        .into_iter()
        .filter(|(_, v)| !v.as_str().is_some_and(|s| s.contains('/')))
        .collect();
    assert!(portable.contains_key("waymark_mode") && portable.contains_key("mcp_http"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("defaults.toml");
    std::fs::write(&file, toml::to_string(&portable).expect("serialize")).expect("write");
    let out = run_with(&file);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{portable:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_unknown_gate2_value_refuses_to_start_naming_variable_value_and_accepted_values() {
    // C7: gate 2 stays closed unless the environment says exactly `open`; a near miss is not
    // taken for either.
    let file = config_dir().join("patchdiff.toml");
    let out = run_with_env(&file, &[(Key::Gate2.variable(), "Open")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_USAGE), "{stderr}");
    assert!(out.stdout.is_empty(), "printed a configuration");
    assert!(
        stderr.contains(
            "invalid PATCHDIFF_GATE2=\"Open\": accepted values are `closed` (the default) or `open`"
        ),
        "{stderr}"
    );
    for value in ["closed", "open"] {
        let out = run_with_env(&file, &[(Key::Gate2.variable(), value)]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{value}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
