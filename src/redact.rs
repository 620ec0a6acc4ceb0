//! The one redactor for files we write:
//! provider keys, database passwords and the value of any variable the redactor knows are
//! replaced by `[redacted:NAME]` wherever they appear — tool arguments, errors that echo them,
//! check output, host configuration copies, logs, reports.
//!
//! What it knows:
//! - the provider variables by name ([`PROVIDER_SECRETS`]: `ANTHROPIC_API_KEY`,
//!   `OPENAI_API_KEY`, …) and any variable whose name has a word saying it holds a credential
//!   (`KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `AUTH`, … between underscores), when its value is at least
//!   [`MIN_SECRET_BYTES`] long (shorter values would redact ordinary words);
//! - the password in the user info or the `password=` parameter of every database URL it is
//!   given (`postgres://user:PASSWORD@host/db`), as written and percent-decoded.
//!
//! Each value is also matched in the forms a writer may have escaped it into: JSON string
//! escaping (a wire log line, a report), percent-encoding (a URL) and XML escaping (JUnit). The replacement text holds
//! no character JSON or XML must escape, so redacting a JSON or XML document keeps it valid.

use std::borrow::Cow;
use std::sync::{OnceLock, RwLock, RwLockReadGuard};

static PROCESS: OnceLock<RwLock<Redactor>> = OnceLock::new();

fn process_lock() -> &'static RwLock<Redactor> {
    PROCESS.get_or_init(|| RwLock::new(Redactor::from_process_env()))
}

/// This process's redactor: the credentials of its environment (read once, at first use) and
/// whatever [`learn_database_url`] added. Every JSONL log and wire log we write passes it
/// ([`crate::evidence::JsonlLog::append`]).
pub fn process() -> RwLockReadGuard<'static, Redactor> {
    process_lock().read().unwrap_or_else(|e| e.into_inner())
}

/// Teaches this process's redactor the password of `url` (a database URL the resolved settings
/// name, which may come from a configuration file rather than the environment).
pub fn learn_database_url(name: &str, url: &str) {
    process_lock()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .add_database_url(name, url);
}

/// Values shorter than this (bytes) are not redacted: 6.
pub const MIN_SECRET_BYTES: usize = 6;

/// Provider credentials known by name (redacted whatever their names' words).
pub const PROVIDER_SECRETS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_OPENAI_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
];

/// Words in a variable's name (between `_`, `-` or `.`) that say its value is a credential.
const SECRET_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "AUTH",
    "CREDENTIAL",
    "CREDENTIALS",
];

/// Replaces known secret values in text (see the module docs). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// (name, form of the value), longest form first.
    secrets: Vec<(String, String)>,
}

impl Redactor {
    /// A redactor for the credentials among `vars` (name, value): the provider variables and
    /// every variable whose name holds a credential word, plus the password of every value that
    /// is a database URL.
    pub fn new<'a, K, V>(vars: impl IntoIterator<Item = &'a (K, V)>) -> Self
    where
        K: AsRef<str> + 'a,
        V: AsRef<str> + 'a,
    {
        let mut r = Self::default();
        for (name, value) in vars {
            r.add_var(name.as_ref(), value.as_ref());
        }
        r
    }

    /// A redactor for this process's environment ([`Redactor::new`] over `std::env::vars`).
    pub fn from_process_env() -> Self {
        let vars: Vec<(String, String)> = std::env::vars().collect();
        Self::new(&vars)
    }

    /// Adds variable `name` = `value` if it is a credential (see [`Redactor::new`]).
    pub fn add_var(&mut self, name: &str, value: &str) {
        if is_secret_name(name) {
            self.add(name, value);
        }
        if value.contains("://") {
            self.add_database_url(name, value);
        }
    }

    /// Adds the password of database URL `url` (user info or `password=` parameter), named
    /// `name` in the replacement.
    pub fn add_database_url(&mut self, name: &str, url: &str) {
        for password in url_passwords(url) {
            self.add(name, &password);
            if let Ok(decoded) = percent_decode(&password) {
                self.add(name, &decoded);
            }
        }
    }

    /// Adds `value` under `name`, in its raw, JSON-escaped, percent-encoded and XML-escaped forms, unless
    /// it is shorter than [`MIN_SECRET_BYTES`].
    pub fn add(&mut self, name: &str, value: &str) {
        if value.len() < MIN_SECRET_BYTES {
            return;
        }
        let json = serde_json::to_string(value).unwrap_or_default();
        let json = json.trim_matches('"').to_owned();
        let xml = value
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
            .replace('\'', "&apos;");
        for form in [value.to_owned(), json, percent_encode(value), xml] {
            if !self.secrets.iter().any(|(_, v)| *v == form) {
                self.secrets.push((name.to_owned(), form));
            }
        }
        // Longest first, so a secret containing another is replaced whole.
        self.secrets
            .sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    }

    /// Whether the redactor knows no secret.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every known secret replaced by `[redacted:NAME]`; borrows when there was
    /// none.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        for (name, value) in &self.secrets {
            if out.contains(value.as_str()) {
                out = Cow::Owned(out.replace(value.as_str(), &format!("[redacted:{name}]")));
            }
        }
        out
    }

    /// [`Redactor::redact`] over bytes that may not be UTF-8: each secret's bytes are replaced
    /// wherever they occur.
    pub fn redact_bytes<'b>(&self, bytes: &'b [u8]) -> Cow<'b, [u8]> {
        let mut out = Cow::Borrowed(bytes);
        for (name, value) in &self.secrets {
            let needle = value.as_bytes();
            if find(&out, needle).is_none() {
                continue;
            }
            let replacement = format!("[redacted:{name}]");
            let mut next = Vec::with_capacity(out.len());
            let mut rest: &[u8] = &out;
            while let Some(at) = find(rest, needle) {
                next.extend_from_slice(&rest[..at]);
                next.extend_from_slice(replacement.as_bytes());
                rest = &rest[at + needle.len()..];
            }
            next.extend_from_slice(rest);
            out = Cow::Owned(next);
        }
        out
    }
}

/// Longest partial line (bytes) a [`RedactingWriter`] holds back waiting for its newline:
/// 64 KiB, the W3 stderr capture per generation. Past it the pending bytes are written
/// (redacted) as they are; a secret is far shorter, so only one straddling that cut could pass.
pub const MAX_PENDING_LINE_BYTES: usize = 64 * 1024;

/// A writer for evidence streams we copy from a child (the worker's stderr, a member run's
/// console stderr): bytes are written line by line, each line through the [`Redactor`], so a
/// secret split across two reads is still replaced whole. The last partial line is written
/// when the writer is finished or dropped. Write errors of the inner writer are returned.
pub struct RedactingWriter<W: std::io::Write> {
    inner: W,
    redactor: Redactor,
    pending: Vec<u8>,
}

impl<W: std::io::Write> RedactingWriter<W> {
    /// Wraps `inner`, redacting with `redactor`.
    pub fn new(inner: W, redactor: Redactor) -> Self {
        Self {
            inner,
            redactor,
            pending: Vec::new(),
        }
    }

    /// Writes the partial line held back, if any, and flushes.
    pub fn finish(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            self.inner
                .write_all(&self.redactor.redact_bytes(&pending))?;
        }
        self.inner.flush()
    }
}

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let cut = match self.pending.iter().rposition(|&b| b == b'\n') {
            Some(newline) => newline + 1,
            None if self.pending.len() > MAX_PENDING_LINE_BYTES => self.pending.len(),
            None => return Ok(buf.len()),
        };
        let rest = self.pending.split_off(cut);
        let lines = std::mem::replace(&mut self.pending, rest);
        self.inner.write_all(&self.redactor.redact_bytes(&lines))?;
        Ok(buf.len())
    }

    /// Flushes the inner writer; a partial line stays held back (see [`RedactingWriter::finish`]).
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: std::io::Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// Copies `reader` (a child's stderr) into `log` until its end, redacted by `redactor` line by
/// line ([`RedactingWriter`]). Returns the bytes read; a read error ends the copy like the end.
pub async fn copy_redacted<R, W>(mut reader: R, log: W, redactor: Redactor) -> std::io::Result<u64>
where
    R: tokio::io::AsyncRead + Unpin,
    W: std::io::Write,
{
    use std::io::Write;
    use tokio::io::AsyncReadExt;
    let mut out = RedactingWriter::new(log, redactor);
    let mut chunk = vec![0u8; 8192];
    let mut total = 0u64;
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                out.write_all(&chunk[..n])?;
            }
        }
    }
    out.finish()?;
    Ok(total)
}

/// Whether variable `name` holds a credential: one of [`PROVIDER_SECRETS`], or a name with a
/// credential word (`KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `AUTH`, …) between `_`, `-` or `.`.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    PROVIDER_SECRETS.contains(&upper.as_str())
        || upper
            .split(['_', '-', '.'])
            .any(|part| SECRET_WORDS.contains(&part))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The passwords a URL carries: its user info's (`scheme://user:PASSWORD@host`) and any
/// `password=` query parameter's, as written.
fn url_passwords(url: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
        if let Some(at) = authority.rfind('@')
            && let Some((_, password)) = authority[..at].split_once(':')
            && !password.is_empty()
        {
            out.push(password.to_owned());
        }
    }
    if let Some((_, query)) = url.split_once('?') {
        for kv in query.split('&') {
            if let Some((k, v)) = kv.split_once('=')
                && k.eq_ignore_ascii_case("password")
                && !v.is_empty()
            {
                out.push(v.to_owned());
            }
        }
    }
    out
}

fn percent_decode(s: &str) -> Result<String, ()> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or(())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| ())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ())
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacting_writer_replaces_a_secret_split_across_writes() {
        use std::io::Write;
        let r = Redactor::new(&[("ANTHROPIC_API_KEY", "sk-ant-split-0123456789")]);
        let mut out = Vec::new();
        {
            let mut w = RedactingWriter::new(&mut out, r);
            w.write_all(b"first line\nkey sk-ant-spl").unwrap();
            w.write_all(b"it-0123456789 here\ntail without newline sk-ant-split-0123456789")
                .unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "first line\nkey [redacted:ANTHROPIC_API_KEY] here\n\
             tail without newline [redacted:ANTHROPIC_API_KEY]"
        );
    }

    use super::*;

    #[test]
    fn provider_keys_and_secret_named_variables_are_redacted_short_values_kept() {
        let r = Redactor::new(&[
            ("ANTHROPIC_API_KEY", "sk-ant-SECRET-1234"),
            ("MY_SERVICE_TOKEN", "tok-987654"),
            ("PATH", "/usr/bin:/bin"),
            ("XAUTHORITY", "/root/.Xauthority"),
            ("OPENAI_API_KEY", "x"),
        ]);
        assert_eq!(
            r.redact("key=sk-ant-SECRET-1234 t=tok-987654 p=/usr/bin:/bin k=x"),
            "key=[redacted:ANTHROPIC_API_KEY] t=[redacted:MY_SERVICE_TOKEN] p=/usr/bin:/bin k=x"
        );
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn database_passwords_are_redacted_as_written_decoded_and_escaped() {
        let r = Redactor::new(&[(
            crate::config::Key::DatabaseUrl.variable(),
            "postgres://agent:p%40ss\"w0rd@127.0.0.1:5432/pd?sslmode=disable",
        )]);
        let url = "postgres://agent:p%40ss\"w0rd@127.0.0.1:5432/pd";
        assert_eq!(
            r.redact(url),
            format!(
                "postgres://agent:[redacted:{}]@127.0.0.1:5432/pd",
                crate::config::Key::DatabaseUrl.variable()
            )
        );
        assert_eq!(
            r.redact("password p@ss\"w0rd"),
            "password [redacted:PATCHDIFF_DATABASE_URL]"
        );
        // Inside a JSON document the quote is escaped; the document stays valid.
        let json = serde_json::json!({"env": {"URL": url}, "said": "p@ss\"w0rd"}).to_string();
        let redacted = r.redact(&json);
        assert!(!redacted.contains("w0rd"), "{redacted}");
        let v: serde_json::Value = serde_json::from_str(&redacted).expect("still JSON");
        assert_eq!(v["said"], "[redacted:PATCHDIFF_DATABASE_URL]");
        let q = Redactor::new(&[("U", "postgres://h/db?user=a&password=hunter22")]);
        assert_eq!(
            q.redact("hunter22"),
            "[redacted:U]",
            "password= parameters too"
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_are_redacted_too() {
        let r = Redactor::new(&[("OPENAI_API_KEY", "sk-proj-ABCDEF")]);
        let out = r.redact_bytes(b"\xff sk-proj-ABCDEF \xfe sk-proj-ABCDEF");
        assert_eq!(
            &*out,
            b"\xff [redacted:OPENAI_API_KEY] \xfe [redacted:OPENAI_API_KEY]"
        );
    }
}
