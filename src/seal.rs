//! What binds a sealed run beyond its digests (V1, V2): the journal binding — the store's
//! identity and each target's journal digest at the seal ([`JOURNAL_FILE`]) — and the
//! operator's signature over the seal ([`SIGNATURE_FILE`], an ed25519 DSSE envelope).
//!
//! Keys: `patchdiff key new` writes an ed25519 private key (PKCS#8 PEM, 0600) to
//! `<config dir>/`[`KEY_FILE`] and prints its public key as one line, [`PublicKey::encode`]
//! (`ed25519:` + standard base64 of the 32 key bytes). `report` signs the seal when that file
//! exists; `verify --key PUB` checks the signature.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use ed25519_dalek::{Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::evidence::{RunDir, SEAL_FILE, write_new_private};
use crate::store::{EditStore, JournalDigest, StoreError, StoreIdentity, journal_digest};

/// The journal binding of a sealed run, written by `report` just before the sums (so
/// `SHA256SUMS` covers it).
pub use crate::evidence::run_dir::JOURNAL_FILE;

pub use crate::evidence::SIGNATURE_FILE;

/// The private key's file name under the config directory (P4: `PATCHDIFF_CONFIG_DIR`).
pub const KEY_FILE: &str = "seal-key.pem";

/// DSSE `payloadType` of a signed seal: the payload is the exact bytes of [`SEAL_FILE`]
/// (which names the SHA-256 of `manifest.json` and of `SHA256SUMS`).
pub const PAYLOAD_TYPE: &str = "application/vnd.patchdiff.seal.v1+text";

/// Prefix of a printed public key.
pub const PUBLIC_KEY_PREFIX: &str = "ed25519:";

/// The journal binding ([`JOURNAL_FILE`]): which database the run's journal lives in and
/// each target's journal digest when the run was sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalBinding {
    pub store: StoreIdentity,
    /// By target, in fixture order.
    pub targets: Vec<JournalDigest>,
}

impl JournalBinding {
    /// Reads `store`'s identity and the journal digest of each of `targets`.
    /// Errors: the store's (`STORAGE`, `UNKNOWN_TARGET` for a target never initialized).
    pub fn of(store: &dyn EditStore, targets: &[String]) -> Result<Self, StoreError> {
        Ok(Self {
            store: store.identity()?,
            targets: targets
                .iter()
                .map(|t| journal_digest(store, t))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Writes [`JOURNAL_FILE`] into the run (created exclusively, 0600).
    pub fn write(&self, run: &RunDir) -> std::io::Result<()> {
        write_new_private(
            &run.path.join(JOURNAL_FILE),
            serde_json::to_string_pretty(self)?.as_bytes(),
        )
    }

    /// Writes [`JOURNAL_FILE`] saying why the seal could not bind the run to its journal
    /// (`{"error": …}`), so the run is still sealed and `verify` names it.
    pub fn write_failure(run: &RunDir, error: &str) -> std::io::Result<()> {
        write_new_private(
            &run.path.join(JOURNAL_FILE),
            serde_json::to_string_pretty(&serde_json::json!({ "error": error }))?.as_bytes(),
        )
    }

    /// Reads a run's [`JOURNAL_FILE`]: `Ok(None)` when the run has none (sealed before runs
    /// were bound to their journal), `Err` naming why it cannot be read or why the seal could
    /// not bind the journal.
    pub fn read(run_dir: &Path) -> Result<Option<Self>, String> {
        match std::fs::read(run_dir.join(JOURNAL_FILE)) {
            Ok(b) => {
                let value: serde_json::Value = serde_json::from_slice(&b)
                    .map_err(|e| format!("not a journal binding: {e}"))?;
                if let Some(error) = value.get("error").and_then(|e| e.as_str()) {
                    return Err(format!(
                        "the seal could not bind the run to its journal: {error}"
                    ));
                }
                serde_json::from_value(value)
                    .map(Some)
                    .map_err(|e| format!("not a journal binding: {e}"))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read: {e}")),
        }
    }
}

/// An ed25519 public key as `verify --key` takes it and `key new` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    /// One line: `ed25519:` + standard base64 (with padding) of the 32 key bytes.
    pub fn encode(&self) -> String {
        format!("{PUBLIC_KEY_PREFIX}{}", BASE64.encode(self.0.as_bytes()))
    }

    /// The key id a signature names: `sha256:` + the first 16 hex digits of the SHA-256 of
    /// the 32 key bytes.
    pub fn key_id(&self) -> String {
        let digest = crate::fixtures::sha256_hex(self.0.as_bytes());
        format!("sha256:{}", &digest[..16])
    }

    /// Parses the printed form ([`encode`](Self::encode)), surrounding whitespace ignored.
    /// Errors name what was wrong and what is accepted.
    pub fn parse(text: &str) -> Result<Self, String> {
        let accepted = "a public key is `ed25519:` followed by the base64 of 32 bytes, as \
                        `patchdiff key new` prints it";
        let text = text.trim();
        let Some(b64) = text.strip_prefix(PUBLIC_KEY_PREFIX) else {
            return Err(format!("{text:?} is not a public key; {accepted}"));
        };
        let bytes = BASE64
            .decode(b64)
            .map_err(|e| format!("{text:?}: the base64 does not decode ({e}); {accepted}"))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| {
            format!("{text:?} holds {} bytes, not 32; {accepted}", b.len())
        })?;
        VerifyingKey::from_bytes(&bytes)
            .map(Self)
            .map_err(|e| format!("{text:?} is not an ed25519 point ({e}); {accepted}"))
    }

    /// `--key`'s argument: the printed string itself, or a file holding it.
    pub fn from_arg(arg: &str) -> Result<Self, String> {
        if arg.trim_start().starts_with(PUBLIC_KEY_PREFIX) {
            return Self::parse(arg);
        }
        let text = std::fs::read_to_string(arg).map_err(|e| {
            format!(
                "--key {arg:?} is neither a public key (`{PUBLIC_KEY_PREFIX}…`) nor a readable \
                 file holding one: {e}"
            )
        })?;
        Self::parse(&text).map_err(|e| format!("{arg}: {e}"))
    }
}

/// The operator's signing key.
pub struct SealKey(SigningKey);

impl SealKey {
    /// Its public half.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// Loads the private key at `path` (PKCS#8 PEM). `Ok(None)` when no file is there.
    /// Errors: a key group or others may read (naming its mode), or one that does not parse.
    pub fn load(path: &Path) -> Result<Option<Self>, String> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        if !meta.file_type().is_file() {
            return Err(format!(
                "{} is not a regular file; a seal key is a PEM file written by `patchdiff key new`",
                path.display()
            ));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "{} has mode {mode:04o}: a private key must be readable by its owner only \
                 (chmod 600)",
                path.display()
            ));
        }
        let pem = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        SigningKey::from_pkcs8_pem(&pem)
            .map(|k| Some(Self(k)))
            .map_err(|e| {
                format!(
                    "{} is not an ed25519 PKCS#8 PEM private key ({e}); `patchdiff key new \
                     --force` writes a new one",
                    path.display()
                )
            })
    }

    /// Draws a new key from the operating system's randomness and writes it to `path`
    /// (PKCS#8 PEM, 0600, parent directories created 0700). Refuses an existing file unless
    /// `force`, which replaces it (a new file renamed over the old one).
    pub fn create(path: &Path, force: bool) -> Result<Self, String> {
        if !force && std::fs::symlink_metadata(path).is_ok() {
            return Err(format!(
                "{} exists: refusing to overwrite a seal key (runs signed with it verify only \
                 with its public key); pass --force to replace it",
                path.display()
            ));
        }
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| format!("no randomness: {e}"))?;
        let key = SigningKey::from_bytes(&secret);
        let pem = key
            .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
            .map_err(|e| format!("cannot encode the key: {e}"))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        crate::owned_fs::create_private_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let fresh = dir.join(format!(".{KEY_FILE}.{}.new", std::process::id()));
        let _ = std::fs::remove_file(&fresh);
        write_new_private(&fresh, pem.as_bytes())
            .map_err(|e| format!("{}: {e}", fresh.display()))?;
        let placed = if force {
            std::fs::rename(&fresh, path)
        } else {
            // Without --force a key that appeared meanwhile is not replaced.
            std::fs::hard_link(&fresh, path).and_then(|()| std::fs::remove_file(&fresh))
        };
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&fresh);
            return Err(format!("{}: {e}", path.display()));
        }
        Ok(Self(key))
    }

    /// Signs the run's seal: writes [`SIGNATURE_FILE`] (created exclusively) holding a DSSE
    /// envelope over the exact bytes of [`SEAL_FILE`]. Returns the key id.
    pub fn sign_run(&self, run: &Path) -> std::io::Result<String> {
        let payload = std::fs::read(run.join(SEAL_FILE))?;
        let signature = self.0.sign(&pae(PAYLOAD_TYPE, &payload));
        let key_id = self.public().key_id();
        let envelope = Envelope {
            payload_type: PAYLOAD_TYPE.to_owned(),
            payload: BASE64.encode(&payload),
            signatures: vec![EnvelopeSignature {
                keyid: key_id.clone(),
                sig: BASE64.encode(signature.to_bytes()),
            }],
        };
        write_new_private(
            &run.join(SIGNATURE_FILE),
            serde_json::to_string_pretty(&envelope)?.as_bytes(),
        )?;
        Ok(key_id)
    }
}

/// The default key path: `<config dir>/`[`KEY_FILE`].
pub fn key_path(config_dir: &Path) -> PathBuf {
    config_dir.join(KEY_FILE)
}

/// DSSE's pre-authentication encoding: `DSSEv1 <len(type)> <type> <len(body)> <body>`
/// (lengths in bytes, ASCII decimal).
pub fn pae(payload_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// A DSSE envelope (the JSON of [`SIGNATURE_FILE`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// Standard base64 of the payload bytes.
    pub payload: String,
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of an [`Envelope`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    pub keyid: String,
    /// Standard base64 of the 64-byte ed25519 signature over [`pae`].
    pub sig: String,
}

/// What the signature of a run says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureStatus {
    /// No [`SIGNATURE_FILE`].
    Unsigned,
    /// Signed, and no key was given to check it with.
    NotChecked { key_id: String },
    /// Signed by the given key, over the seal the run holds.
    Verified { key_id: String },
    /// Checked and it does not hold (another key, another seal, a broken envelope): why.
    Failed(String),
}

/// Checks the run's [`SIGNATURE_FILE`] against its [`SEAL_FILE`] with `key`. Without a key
/// the envelope must still carry this run's seal as its payload (a run re-sealed after signing
/// fails either way); who signed it is then said, not checked.
pub fn check_signature(run: &Path, key: Option<&PublicKey>) -> SignatureStatus {
    let bytes = match std::fs::read(run.join(SIGNATURE_FILE)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match key {
                None => SignatureStatus::Unsigned,
                Some(k) => SignatureStatus::Failed(format!(
                    "the run is unsigned, but --key {} was given: a run signed by that key \
                     holds {SIGNATURE_FILE}",
                    k.key_id()
                )),
            };
        }
        Err(e) => return SignatureStatus::Failed(format!("cannot read: {e}")),
    };
    let envelope: Envelope = match serde_json::from_slice(&bytes) {
        Ok(e) => e,
        Err(e) => return SignatureStatus::Failed(format!("not a DSSE envelope: {e}")),
    };
    let Some(first) = envelope.signatures.first() else {
        return SignatureStatus::Failed("the envelope holds no signature".into());
    };
    if envelope.payload_type != PAYLOAD_TYPE {
        return SignatureStatus::Failed(format!(
            "payloadType is {:?}, a seal's is {PAYLOAD_TYPE:?}",
            envelope.payload_type
        ));
    }
    let payload = match BASE64.decode(&envelope.payload) {
        Ok(p) => p,
        Err(e) => return SignatureStatus::Failed(format!("the payload is not base64: {e}")),
    };
    match std::fs::read(run.join(SEAL_FILE)) {
        Ok(seal) if seal == payload => {}
        Ok(_) => {
            return SignatureStatus::Failed(format!(
                "the signed payload is not the run's {SEAL_FILE}: the run was re-sealed after \
                 it was signed"
            ));
        }
        Err(e) => return SignatureStatus::Failed(format!("cannot read {SEAL_FILE}: {e}")),
    }
    // Without a key the envelope still must be over this run's seal; who signed it is said,
    // not checked.
    let Some(key) = key else {
        return SignatureStatus::NotChecked {
            key_id: first.keyid.clone(),
        };
    };
    let message = pae(&envelope.payload_type, &payload);
    let wanted = key.key_id();
    for s in &envelope.signatures {
        let Ok(sig) = BASE64.decode(&s.sig) else {
            continue;
        };
        let Ok(sig) = ed25519_dalek::Signature::from_slice(&sig) else {
            continue;
        };
        if key.0.verify(&message, &sig).is_ok() {
            return SignatureStatus::Verified { key_id: wanted };
        }
    }
    let by: Vec<&str> = envelope
        .signatures
        .iter()
        .map(|s| s.keyid.as_str())
        .collect();
    SignatureStatus::Failed(format!(
        "no signature holds for key {wanted}: signed by {} — another key, or the seal changed \
         after signing",
        by.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_that_could_not_bind_its_journal_says_why_when_read() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir {
            run_id: "r-1".into(),
            path: dir.path().to_path_buf(),
        };
        assert_eq!(JournalBinding::read(dir.path()), Ok(None));
        JournalBinding::write_failure(&run, "STORAGE: server gone").unwrap();
        let err = JournalBinding::read(dir.path()).unwrap_err();
        assert_eq!(
            err,
            "the seal could not bind the run to its journal: STORAGE: server gone"
        );
    }

    #[test]
    fn pae_is_dsse_v1() {
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }

    #[test]
    fn a_public_key_round_trips_and_bad_ones_say_what_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let key = SealKey::create(&dir.path().join("k.pem"), false).unwrap();
        let printed = key.public().encode();
        assert_eq!(PublicKey::parse(&printed).unwrap(), key.public());
        for bad in ["ed25519:AAAA", "ssh-ed25519 AAAA", "ed25519:!!"] {
            let err = PublicKey::parse(bad).unwrap_err();
            assert!(err.contains("`ed25519:` followed by the base64"), "{err}");
        }
    }

    #[test]
    fn key_new_is_private_refuses_to_overwrite_and_force_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cfg").join(KEY_FILE);
        let first = SealKey::create(&path, false).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let err = SealKey::create(&path, false).err().unwrap();
        assert!(err.contains("--force"), "{err}");
        let loaded = SealKey::load(&path).unwrap().unwrap();
        assert_eq!(loaded.public(), first.public());
        let second = SealKey::create(&path, true).unwrap();
        assert_ne!(second.public(), first.public());
        assert_eq!(
            SealKey::load(&path).unwrap().unwrap().public(),
            second.public()
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = SealKey::load(&path).err().unwrap();
        assert!(err.contains("mode 0644"), "{err}");
    }
}
