//! Discovery on real files from well-known projects, one per language added after the first
//! five (W1, W2: the scopes of what is parsed, named the way each language's people write them).
//! Nothing of those projects is committed here: each file is read at test time from a package
//! the project's install steps put on the machine (.ci/run), and the scopes it must yield come
//! from an independent oracle, Universal Ctags (PHP: PHP's own reflection, since ctags 5.9 gives
//! no end lines for PHP), never from a list written down here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::discovery::line_span;
use crate::util::{self, EventLog};
use patchdiff::waymark::{Language, Scope, Waymark, WaymarkMode};

/// Where a real file comes from.
enum Origin {
    /// A path, relative to the checkout unless absolute.
    File(&'static str),
    /// An entry of a zip archive (the JDK's `src.zip`).
    Zip(&'static str, &'static str),
    /// A member of a `.tar.gz` under the checkout (a PyPI sdist in `target/real-sources`).
    TarGz(&'static str, &'static str),
    /// A file of Ruby's standard library (`RbConfig::CONFIG["rubylibdir"]`).
    RubyLib(&'static str),
}

/// Who lists the scopes a file must yield.
#[derive(Clone, Copy)]
enum Oracle {
    /// Universal Ctags with this `--language-force`.
    Ctags(&'static str),
    /// PHP's `ReflectionClass` / `ReflectionMethod` start and end lines.
    PhpReflection,
}

struct RealFile {
    language: Language,
    origin: Origin,
    /// The package and version it comes from, and the install step that brings it.
    package: &'static str,
    install: &'static str,
    oracle: Oracle,
    /// Names a reader of the project knows, asserted on top of the oracle's list.
    well_known: &'static [&'static str],
    /// Waymark scopes the oracle does not list, each with the reason.
    oracle_misses: &'static [(&'static str, &'static str)],
}

const CI_RUN: &str = "the install steps in .ci/run";

const REAL_FILES: &[RealFile] = &[
    RealFile {
        language: Language::Java,
        origin: Origin::Zip(
            "/usr/lib/jvm/java-17-openjdk-amd64/lib/src.zip",
            "java.base/java/util/ArrayList.java",
        ),
        package: "java.util.ArrayList of Debian's openjdk-17-source",
        install: "apt-get install openjdk-17-source",
        oracle: Oracle::Ctags("Java"),
        well_known: &[
            "ArrayList.Itr.next",
            "ArrayList.ListItr.previous",
            "ArrayList.SubList.removeRange",
            "ArrayList.ArrayListSpliterator.tryAdvance",
            "ArrayList.ArrayList",
        ],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::Java,
        origin: Origin::Zip(
            "/usr/lib/jvm/java-17-openjdk-amd64/lib/src.zip",
            "java.base/java/util/EnumMap.java",
        ),
        package: "java.util.EnumMap of Debian's openjdk-17-source",
        install: "apt-get install openjdk-17-source",
        oracle: Oracle::Ctags("Java"),
        // The anonymous `new Object() { public int hashCode() … }` held by the field NULL is
        // not EnumMap's own hashCode.
        well_known: &[
            "EnumMap.hashCode",
            "EnumMap.NULL.hashCode",
            "EnumMap.EntryIterator.Entry.Entry",
            "EnumMap.EnumMapIterator.hasNext",
        ],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::C,
        origin: Origin::File("integrations/waymark/node_modules/tree-sitter-python/src/scanner.c"),
        package: "tree-sitter-python@0.25.0's hand-written scanner (package-lock.json)",
        install: "npm ci --prefix integrations/waymark",
        oracle: Oracle::Ctags("C"),
        well_known: &[
            "tree_sitter_python_external_scanner_scan",
            "Delimiter",
            "Scanner",
            "TokenType",
        ],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::Cpp,
        origin: Origin::File("tests/tools/node_modules/node-pty/deps/winpty/src/agent/NamedPipe.h"),
        package: "winpty's agent, vendored in node-pty@1.0.0 (tests/tools/package-lock.json)",
        install: "npm ci --prefix tests/tools",
        oracle: Oracle::Ctags("C++"),
        well_known: &[
            "NamedPipe::IoWorker::~IoWorker",
            "NamedPipe::InputWorker::InputWorker",
            "NamedPipe::OpenMode",
            "NamedPipe::isConnected",
        ],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::Cpp,
        origin: Origin::File(
            "tests/tools/node_modules/node-pty/deps/winpty/src/shared/WindowsSecurity.h",
        ),
        package: "winpty's shared code, vendored in node-pty@1.0.0 (tests/tools/package-lock.json)",
        install: "npm ci --prefix tests/tools",
        oracle: Oracle::Ctags("C++"),
        // A conversion operator is named by its type, not its declarator's `() const`.
        well_known: &["SecurityItem::operator bool", "SecurityItem::operator="],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::Cpp,
        origin: Origin::File("tests/tools/node_modules/node-pty/deps/winpty/src/shared/Mutex.h"),
        package: "winpty's shared code, vendored in node-pty@1.0.0 (tests/tools/package-lock.json)",
        install: "npm ci --prefix tests/tools",
        oracle: Oracle::Ctags("C++"),
        // `Mutex(const Mutex &other) = delete;` has no body: no scope (ctags lists none either).
        well_known: &["Mutex::lock", "LockGuard::~LockGuard"],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::Cpp,
        origin: Origin::File(
            "tests/tools/node_modules/node-pty/deps/winpty/src/shared/DebugClient.cc",
        ),
        package: "winpty's shared code, vendored in node-pty@1.0.0 (tests/tools/package-lock.json)",
        install: "npm ci --prefix tests/tools",
        oracle: Oracle::Ctags("C++"),
        // In an anonymous `namespace { … }`, which is no scope.
        well_known: &["PreserveLastError::~PreserveLastError", "trace"],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::CSharp,
        origin: Origin::TarGz(
            "target/real-sources/pythonnet-3.2.1.tar.gz",
            "pythonnet-3.2.1/src/runtime/Py.cs",
        ),
        package: "pythonnet 3.2.1's sdist (tests/real-sources.txt, hash-pinned)",
        install: "pip download --no-binary :all: --no-deps --require-hashes -r tests/real-sources.txt -d target/real-sources",
        oracle: Oracle::Ctags("C#"),
        well_known: &[
            "Py.GILState.Dispose",
            "Py.GILState.~GILState",
            "Py.KeywordArguments.KeywordArguments",
            "Py.With",
        ],
        oracle_misses: &[(
            "Py.kw",
            "ctags 5.9's C# parser drops a method whose parameter is `params object?[]` (a nullable \
             array); tree-sitter-c-sharp parses it as the method it is",
        )],
    },
    RealFile {
        language: Language::CSharp,
        origin: Origin::TarGz(
            "target/real-sources/pythonnet-3.2.1.tar.gz",
            "pythonnet-3.2.1/src/runtime/Native/StolenReference.cs",
        ),
        package: "pythonnet 3.2.1's sdist (tests/real-sources.txt, hash-pinned)",
        install: "pip download --no-binary :all: --no-deps --require-hashes -r tests/real-sources.txt -d target/real-sources",
        oracle: Oracle::Ctags("C#"),
        well_known: &[
            "Python.Runtime.StolenReference.operator ==",
            "Python.Runtime.StolenReference.operator !=",
            "Python.Runtime.StolenReferenceExtensions.DangerousGetAddress",
        ],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::CSharp,
        origin: Origin::TarGz(
            "target/real-sources/pythonnet-3.2.1.tar.gz",
            "pythonnet-3.2.1/src/runtime/CollectionWrappers/IterableWrapper.cs",
        ),
        package: "pythonnet 3.2.1's sdist (tests/real-sources.txt, hash-pinned)",
        install: "pip download --no-binary :all: --no-deps --require-hashes -r tests/real-sources.txt -d target/real-sources",
        oracle: Oracle::Ctags("C#"),
        // An explicit interface implementation is named as written, beside the class's own
        // generic GetEnumerator.
        well_known: &[
            "Python.Runtime.CollectionWrappers.IterableWrapper.IEnumerable.GetEnumerator",
            "Python.Runtime.CollectionWrappers.IterableWrapper.GetEnumerator",
        ],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::Ruby,
        origin: Origin::RubyLib("monitor.rb"),
        package: "monitor.rb of Ruby's standard library (Debian's libruby3.1, from `ruby`)",
        install: "apt-get install ruby",
        oracle: Oracle::Ctags("Ruby"),
        well_known: &[
            "MonitorMixin::ConditionVariable#wait",
            "MonitorMixin.extend_object",
            "MonitorMixin#mon_synchronize",
            "Monitor#new_cond",
        ],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::Ruby,
        origin: Origin::RubyLib("digest.rb"),
        package: "digest.rb of Ruby's standard library (Debian's libruby3.1, from `ruby`)",
        install: "apt-get install ruby",
        oracle: Oracle::Ctags("Ruby"),
        // `class ::Digest::Class` inside `module Digest` is the top-level Digest::Class.
        well_known: &[
            "Digest::Class.file",
            "Digest::Instance#base64digest!",
            "Digest.const_missing",
            "Digest",
        ],
        oracle_misses: &[],
    },
    RealFile {
        language: Language::Php,
        origin: Origin::File("/usr/share/php/Psr/Log/Test/TestLogger.php"),
        package: "Psr\\Log\\Test\\TestLogger of Debian's php-psr-log",
        install: "apt-get install php-cli php-psr-log",
        oracle: Oracle::PhpReflection,
        well_known: &[
            "TestLogger",
            "TestLogger::hasRecordThatContains",
            "TestLogger::__call",
        ],
        oracle_misses: &[],
    },
];

/// A scope as the oracle lists it: Waymark's kind and qualified name, lines 1-based inclusive.
#[derive(Debug, Clone, PartialEq)]
struct Def {
    kind: String,
    name: String,
    start: usize,
    end: usize,
}

fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `program` runs (`program --version` exits 0).
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What `file` needs that this machine lacks (its source, its oracle), with the install step,
/// or `None` when it can be checked here.
fn missing_prerequisite(file: &RealFile) -> Option<String> {
    let source = match file.origin {
        Origin::File(p) => checkout().join(p).is_file(),
        Origin::Zip(archive, _) | Origin::TarGz(archive, _) => checkout().join(archive).is_file(),
        Origin::RubyLib(_) => runs("ruby"),
    };
    let (oracle, oracle_install) = match file.oracle {
        Oracle::Ctags(_) => (runs("ctags"), "apt-get install universal-ctags"),
        Oracle::PhpReflection => (runs("php"), "apt-get install php-cli"),
    };
    if !source {
        return Some(format!(
            "{} ({}): `{}`",
            file.language, file.package, file.install
        ));
    }
    (!oracle).then(|| format!("{} oracle: `{oracle_install}`", file.language))
}

/// Runs `program args`, failing the test with the install step when it is missing or fails.
fn output(program: &str, args: &[&str], install: &str) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}): run `{install}` ({CI_RUN})"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}): {}\nrun `{install}` ({CI_RUN})",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The file's text and a path holding exactly that text (for the oracle).
fn read(file: &RealFile, scratch: &Path) -> (String, PathBuf) {
    let missing = |path: &Path| -> ! {
        panic!(
            "{} is missing ({}): run `{}` ({CI_RUN})",
            path.display(),
            file.package,
            file.install
        )
    };
    let path = match file.origin {
        Origin::File(p) => checkout().join(p),
        Origin::RubyLib(name) => {
            let dir = output(
                "ruby",
                &["-rrbconfig", "-e", "print RbConfig::CONFIG['rubylibdir']"],
                file.install,
            );
            PathBuf::from(dir).join(name)
        }
        Origin::Zip(archive, entry) | Origin::TarGz(archive, entry) => {
            let archive = checkout().join(archive);
            if !archive.is_file() {
                missing(&archive);
            }
            // Python's zipfile/tarfile (python3 is already a CI prerequisite): no archive crate.
            let script = if matches!(file.origin, Origin::Zip(..)) {
                "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))"
            } else {
                "import sys, tarfile; sys.stdout.buffer.write(tarfile.open(sys.argv[1]).extractfile(sys.argv[2]).read())"
            };
            let text = output(
                "python3",
                &["-c", script, &archive.to_string_lossy(), entry],
                file.install,
            );
            let name = Path::new(entry).file_name().expect("entry name");
            let copy = scratch.join(name);
            std::fs::write(&copy, &text).expect("scratch copy");
            return (text, copy);
        }
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => (text, path),
        Err(_) => missing(&path),
    }
}

/// What the oracle lists for `file` at `path`.
fn oracle(file: &RealFile, path: &Path) -> Vec<Def> {
    match file.oracle {
        Oracle::Ctags(language) => ctags(file.language, language, path),
        Oracle::PhpReflection => php_reflection(path),
    }
}

fn ctags(language: Language, ctags_language: &str, path: &Path) -> Vec<Def> {
    let json = output(
        "ctags",
        &[
            "--output-format=json",
            "--fields=+neKZSt",
            &format!("--language-force={ctags_language}"),
            "-f",
            "-",
            &path.to_string_lossy(),
        ],
        "apt-get install universal-ctags",
    );
    let tags: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).expect("a ctags JSON line"))
        .filter(|t: &serde_json::Value| t["_type"] == "tag")
        .collect();
    // C: `typedef struct {…} Delimiter;` is an anonymous struct ctags names `__anon…`, and a
    // typedef whose typeref points at it; Waymark names the struct by the typedef.
    let typedef_names: HashMap<String, String> = tags
        .iter()
        .filter(|t| t["kind"] == "typedef")
        .filter_map(|t| {
            let (_, target) = t["typeref"].as_str()?.split_once(':')?;
            Some((target.to_string(), t["name"].as_str()?.to_string()))
        })
        .collect();
    tags.iter()
        .filter_map(|t| ctags_def(language, t, &typedef_names))
        .collect()
}

/// One ctags tag as a Waymark scope, or `None` for what Waymark does not report as a scope.
fn ctags_def(
    language: Language,
    tag: &serde_json::Value,
    typedef_names: &HashMap<String, String>,
) -> Option<Def> {
    let ctags_kind = tag["kind"].as_str()?;
    let mut name = tag["name"].as_str()?.to_string();
    let scope_owned: String;
    let mut scope = tag["scope"].as_str().unwrap_or("");
    let mut scope_kind = tag["scopeKind"].as_str().unwrap_or("");
    let last_scope = scope.rsplit(['.', ':']).next().unwrap_or("");
    if language == Language::Cpp {
        // An anonymous `namespace { … }` is no Waymark scope (ctags calls it `__anon…`), and C++
        // writes operators without ctags' space (`operator==`; `operator bool` keeps its own).
        let named: Vec<&str> = scope
            .split("::")
            .filter(|s| !s.starts_with("__anon"))
            .collect();
        scope_owned = named.join("::");
        scope = &scope_owned;
        if named.is_empty() {
            scope_kind = "";
        }
        if let Some(op) = name.strip_prefix("operator ")
            && !op.starts_with(|c: char| c.is_alphanumeric() || c == '_')
        {
            name = format!("operator{op}");
        }
    }
    let kind = match (language, ctags_kind) {
        // Left out everywhere: fields/members, enum constants and enumerators (no body of their
        // own), variables, macros (the preprocessor, not the grammar), prototypes (declarations:
        // W1 scopes are definitions), headers and `require`d libraries, C# properties and events
        // (accessors are not Waymark scopes), Ruby constants, `attr_*` accessors and aliases
        // (one-line declarations with no body), Java packages (nothing nests in them).
        (Language::Java, "class" | "interface" | "enum") => ctags_kind,
        (Language::Java, "annotation") => "interface", // `@interface`
        (Language::Java | Language::CSharp, "method") if name == last_scope => "constructor",
        (Language::CSharp, "method") if name.starts_with('~') => "destructor",
        (Language::Java | Language::CSharp, "method") => "method",
        (Language::CSharp, "class" | "struct" | "interface" | "enum" | "namespace") => ctags_kind,
        (Language::C | Language::Cpp, "struct" | "union") => "struct",
        (Language::C | Language::Cpp, "enum") => "enum",
        (Language::Cpp, "class" | "namespace") => ctags_kind,
        (Language::C | Language::Cpp, "function") => match scope_kind {
            "" | "namespace" => "function",
            _ => "method",
        },
        (Language::Ruby, "module" | "class") => ctags_kind,
        (Language::Ruby, "method") if scope.is_empty() => "function",
        (Language::Ruby, "method" | "singletonMethod") => "method",
        _ => return None,
    };
    if name.starts_with("__anon") {
        // An anonymous struct or enum is a scope only when a typedef names it; `enum { A, B };`
        // inside a class has no name to find it by (Waymark reports no unnamed scopes).
        let key = format!("{ctags_kind}:{name}");
        name = typedef_names
            .get(&key)
            .or_else(|| typedef_names.get(&name))
            .cloned()?;
    }
    let qualified = match language {
        _ if scope.is_empty() => name,
        Language::Ruby => {
            let join = match ctags_kind {
                "method" => "#",
                "singletonMethod" => ".",
                _ => "::",
            };
            // `class ::Digest::Class` in `module Digest` is the top-level Digest::Class; ctags
            // writes its scope `Digest..Digest` (an empty segment where the `::` starts).
            let scope = scope
                .rsplit_once("..")
                .map_or(scope, |(_, absolute)| absolute);
            format!("{}{join}{name}", scope.replace('.', "::"))
        }
        Language::C | Language::Cpp => format!("{scope}::{name}"),
        _ => format!("{scope}.{name}"),
    };
    Some(Def {
        kind: kind.to_string(),
        name: qualified,
        start: tag["line"].as_u64()? as usize,
        end: tag["end"]
            .as_u64()
            .unwrap_or_else(|| panic!("ctags gives no end line for {tag}")) as usize,
    })
}

/// PHP's reflection of the file: each class, interface and trait it declares and each method
/// declared in it, with PHP's own start and end lines (`Class::method`; a file-scoped
/// `namespace Psr\Log\Test;` is no Waymark scope, so short names).
fn php_reflection(path: &Path) -> Vec<Def> {
    const SCRIPT: &str = r#"
$file = realpath($argv[1]);
foreach (glob('/usr/share/php/Psr/*/autoload.php') as $autoload) require_once $autoload;
require_once $file;
$types = array_merge(get_declared_classes(), get_declared_interfaces(), get_declared_traits());
foreach ($types as $type) {
    $r = new ReflectionClass($type);
    if ($r->getFileName() !== $file) continue;
    $kind = $r->isInterface() ? 'interface' : ($r->isTrait() ? 'trait' : 'class');
    echo "$kind {$r->getShortName()} {$r->getStartLine()} {$r->getEndLine()}\n";
    foreach ($r->getMethods() as $m) {
        if ($m->getDeclaringClass()->getName() !== $type) continue;
        echo "method {$r->getShortName()}::{$m->getName()} {$m->getStartLine()} {$m->getEndLine()}\n";
    }
}
foreach (get_defined_functions()['user'] as $f) {
    $r = new ReflectionFunction($f);
    if ($r->getFileName() === $file)
        echo "function {$r->getShortName()} {$r->getStartLine()} {$r->getEndLine()}\n";
}
"#;
    output(
        "php",
        &["-r", SCRIPT, "--", &path.to_string_lossy()],
        "apt-get install php-cli php-psr-log",
    )
    .lines()
    .map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        Def {
            kind: f[0].to_string(),
            name: f[1].to_string(),
            start: f[2].parse().expect("start line"),
            end: f[3].parse().expect("end line"),
        }
    })
    .collect()
}

/// Lines an oracle starts a scope after, which Waymark's scope covers (the scope starts at its
/// first annotation, attribute or `template <…>`): Java annotations and C# attributes on lines
/// of their own, C++ `template <…>` lines. ctags' line is the one naming the definition.
fn leads_the_scope(language: Language, line: &str) -> bool {
    let line = line.trim_start();
    match language {
        Language::Java => line.starts_with('@'),
        Language::CSharp => line.starts_with('['),
        Language::Cpp => line.starts_with("template"),
        _ => false,
    }
}

/// The scope that `def` is in Waymark's result, if any: same kind and name, same end line, and
/// the same start line or an earlier one whose lines up to the oracle's all lead the scope.
fn matching<'a>(
    language: Language,
    lines: &[&str],
    def: &Def,
    scopes: &'a [Scope],
) -> Option<&'a Scope> {
    scopes.iter().find(|s| {
        s.kind == def.kind
            && s.name == def.name
            && s.end_line == def.end
            && s.start_line <= def.start
            && (s.start_line..def.start).all(|l| leads_the_scope(language, lines[l - 1]))
    })
}

/// A Java scope ctags does not descend to: inside a method (a local class, or an anonymous
/// class's method, `ArrayList.SubList.listIterator.hasNext`), or in an anonymous class or enum
/// constant body held by a field, constant or static initializer (`EnumMap.NULL.hashCode`: the
/// name has a segment between the enclosing scope's and its own).
fn beyond_ctags_in_java(scope: &Scope, scopes: &[Scope]) -> bool {
    let outer = scopes
        .iter()
        .filter(|o| {
            !std::ptr::eq(*o, scope)
                && o.start_byte <= scope.start_byte
                && scope.end_byte <= o.end_byte
        })
        .min_by_key(|o| o.end_byte - o.start_byte);
    let Some(outer) = outer else { return false };
    let Some(rest) = scope.name.strip_prefix(&format!("{}.", outer.name)) else {
        return false;
    };
    matches!(outer.kind.as_str(), "method" | "constructor") || rest.contains('.')
}

/// W1/W2: on a real file of each new language, every scope the oracle lists is found with the
/// same kind, qualified name and lines; every scope found covers exactly its lines; and the
/// only scopes found beyond the oracle's are the ones each file names with the reason.
#[tokio::test]
async fn discovery_on_real_files_finds_every_scope_byte_exact_with_each_languages_names() {
    let scratch = tempfile::tempdir().expect("tempdir");
    // A file whose package or oracle is not installed is SKIPPED outside CI (the README's test
    // command installs no Debian package); under CI=true it fails, naming the install step.
    let missing: Vec<String> = REAL_FILES.iter().filter_map(missing_prerequisite).collect();
    if !missing.is_empty() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "missing under CI=true ({CI_RUN}): {}",
            missing.join("; ")
        );
        eprintln!("SKIPPED (not installed): {}", missing.join("; "));
    }
    // Read every file and ask every oracle first: both block, and no discovery is under way.
    let inputs: Vec<(&RealFile, String, Vec<Def>)> = REAL_FILES
        .iter()
        .filter(|file| missing_prerequisite(file).is_none())
        .map(|file| {
            let (source, path) = read(file, scratch.path());
            let defs = oracle(file, &path);
            (file, source, defs)
        })
        .collect();
    let waymark = Waymark::new(
        util::config(WaymarkMode::Resident, scratch.path()),
        EventLog::default().recorder(),
    );
    for (file, source, defs) in &inputs {
        let what = format!("{} ({})", file.language, file.package);
        assert!(defs.len() >= 3, "{what}: the oracle lists {defs:?}");
        let found = waymark.discover(file.language, source).await.expect(&what);
        assert!(!found.has_error, "{what} parses cleanly: {found:?}");
        let lines: Vec<&str> = source.lines().collect();

        let mut matched = vec![false; found.scopes.len()];
        for def in defs {
            let scope = matching(file.language, &lines, def, &found.scopes).unwrap_or_else(|| {
                let named: Vec<_> = found.scopes.iter().filter(|s| s.name == def.name).collect();
                panic!("{what}: the oracle's {def:?} is not found; scopes so named: {named:#?}")
            });
            let i = found
                .scopes
                .iter()
                .position(|s| std::ptr::eq(s, scope))
                .expect("a scope of the result");
            matched[i] = true;
        }
        let explained = |scope: &Scope| {
            (file.language == Language::Java && beyond_ctags_in_java(scope, &found.scopes))
                || file
                    .oracle_misses
                    .iter()
                    .any(|(name, _)| *name == scope.name)
        };
        for name in file.well_known {
            let scope = found.scopes.iter().find(|s| s.name == *name);
            let scope = scope.unwrap_or_else(|| panic!("{what}: Waymark finds {name}"));
            assert!(
                defs.iter().any(|d| d.name == *name) || explained(scope),
                "{what}: the oracle lists {name}, or it is a scope the oracle cannot see"
            );
        }
        for (scope, matched) in found.scopes.iter().zip(&matched) {
            if !matched {
                assert!(
                    explained(scope),
                    "{what}: {scope:?} is not in the oracle's list"
                );
            }
            // C/C++ `struct S {…};` ends before its `;` (the specifier does not hold the
            // declaration's `;`); a `typedef struct {…} T;` and a `template <…> class C {…};`
            // hold it (the scope is the typedef or template declaration).
            let first = lines[scope.start_line - 1].trim_start();
            let before_semicolon = matches!(file.language, Language::C | Language::Cpp)
                && matches!(scope.kind.as_str(), "struct" | "class" | "enum")
                && !first.starts_with("typedef")
                && !first.starts_with("template")
                && lines[scope.end_line - 1].trim_end().ends_with(';');
            let span = line_span(source, scope.start_line, scope.end_line, before_semicolon);
            assert_eq!(
                (scope.start_byte, scope.end_byte),
                span,
                "{what}: {} covers lines {}-{} exactly: {:?}",
                scope.name,
                scope.start_line,
                scope.end_line,
                &source[scope.start_byte..scope.end_byte]
            );
        }
        for (name, _) in file.oracle_misses {
            assert!(
                found.scopes.iter().any(|s| s.name == *name)
                    && !defs.iter().any(|d| d.name == *name),
                "{what}: {name} is still found by Waymark and still missed by the oracle"
            );
        }
    }
    waymark.shutdown().await;
}
