//! Reading manifests named with `-f` the way kubectl does: a file, a
//! directory (its `.yaml`, `.yml` and `.json` files, in name order), or `-`
//! for standard input.

use std::io::Read;
use std::path::{Path, PathBuf};

/// One manifest text and the name errors should use for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub name: String,
    pub text: String,
}

/// What could be read, and one line per path that could not.
#[derive(Debug, Default)]
pub struct Sources {
    pub read: Vec<Source>,
    pub errors: Vec<String>,
}

/// Name used for standard input in messages.
pub const STDIN_NAME: &str = "<stdin>";

const MANIFEST_EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// Reads every path; a path that cannot be read becomes one error line
/// naming it, and the others are still read so all problems show at once.
pub fn read_sources(paths: &[PathBuf]) -> Sources {
    let mut sources = Sources::default();
    let mut stdin_read = false;
    for path in paths {
        if path.as_os_str() == "-" {
            if stdin_read {
                sources
                    .errors
                    .push("-: standard input can be read only once".to_string());
                continue;
            }
            stdin_read = true;
            let mut text = String::new();
            match std::io::stdin().read_to_string(&mut text) {
                Ok(_) => sources.read.push(Source {
                    name: STDIN_NAME.to_string(),
                    text,
                }),
                Err(error) => sources
                    .errors
                    .push(format!("{STDIN_NAME}: cannot read: {error}")),
            }
        } else if path.is_dir() {
            read_directory(path, &mut sources);
        } else {
            read_file(path, &mut sources);
        }
    }
    sources
}

fn read_file(path: &Path, sources: &mut Sources) {
    match std::fs::read_to_string(path) {
        Ok(text) => sources.read.push(Source {
            name: path.display().to_string(),
            text,
        }),
        Err(error) => sources
            .errors
            .push(format!("{}: cannot read: {error}", path.display())),
    }
}

fn read_directory(dir: &Path, sources: &mut Sources) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            return sources
                .errors
                .push(format!("{}: cannot read directory: {error}", dir.display()))
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_file()
                && path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| MANIFEST_EXTENSIONS.contains(&e))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        sources.errors.push(format!(
            "{}: directory has no .yaml, .yml or .json files",
            dir.display()
        ));
    }
    for file in files {
        read_file(&file, sources);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_files_and_directories_and_names_what_fails() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.yaml"), "b").unwrap();
        std::fs::write(dir.path().join("a.yml"), "a").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "skip").unwrap();
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let missing = dir.path().join("missing.yaml");
        let sources = read_sources(&[dir.path().to_path_buf(), missing.clone(), empty]);
        let texts: Vec<&str> = sources.read.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, ["a", "b"]);
        assert_eq!(sources.errors.len(), 2);
        assert!(sources.errors[0].starts_with(&format!("{}: cannot read", missing.display())));
        assert!(sources.errors[1].contains("no .yaml, .yml or .json files"));
    }
}
