//! Limits a YAML stream must meet before it is parsed, so that no input
//! costs more than its size: a 200 KB `[[[...]]]` 100,000 deep cost the
//! parser 27 s of CPU (quadratic in depth), and a 26 KB alias bomb (one
//! anchored list of 10,000 values referred to 2,000 times) expanded to a
//! gigabyte. Kueue objects need neither: they are a few levels deep and
//! never use anchors or aliases.
//!
//! One linear pass over the text, before any parser sees it:
//!
//! - no anchor (`&name`) or alias (`*name`) anywhere outside quoted
//!   strings, comments and block scalars (a plain scalar cannot begin
//!   with either character, so an unquoted token that does is one);
//! - flow collections (`[`, `{`) nested at most [`MAX_FLOW_DEPTH`] deep;
//! - no line indented more than [`MAX_INDENT`] columns (which bounds block
//!   nesting);
//! - at most [`MAX_DOCUMENTS`] documents.

use crate::FieldError;

pub const MAX_FLOW_DEPTH: usize = 32;
pub const MAX_INDENT: usize = 256;
pub const MAX_DOCUMENTS: usize = 1000;

/// The first limit `yaml` breaks, as an error naming the line.
pub fn check(yaml: &str) -> Result<(), FieldError> {
    let mut documents = 1usize;
    // Whether anything but blank lines and comments came yet: the first
    // document may open with its own `---` (as kubectl and Helm write
    // them), which starts document 1, not 2.
    let mut begun = false;
    let mut depth = 0usize;
    // Inside a block scalar: lines indented more than this are its text.
    let mut block_parent: Option<usize> = None;
    // A quote left open across lines (multi-line flow scalars).
    let mut open_quote: Option<char> = None;
    for (n, line) in yaml.lines().enumerate() {
        let number = n + 1;
        let indent = line.len() - line.trim_start_matches(' ').len();
        let content = line.trim_start();
        if let Some(parent) = block_parent {
            if content.is_empty() || indent > parent {
                continue;
            }
            block_parent = None;
        }
        if indent > MAX_INDENT {
            return Err(error(
                number,
                format!("is indented {indent} columns; at most {MAX_INDENT} (Kueue objects are a few levels deep)"),
            ));
        }
        if open_quote.is_none() && content.starts_with("---") {
            if begun {
                documents += 1;
                if documents > MAX_DOCUMENTS {
                    return Err(error(
                        number,
                        format!("starts document {documents}; at most {MAX_DOCUMENTS} documents per request"),
                    ));
                }
            }
            begun = true;
        } else if !content.is_empty() && !content.starts_with('#') {
            begun = true;
        }
        let mut previous = ' ';
        let mut chars = content.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if let Some(q) = open_quote {
                if c == q {
                    // '' inside a single-quoted scalar is an escaped quote.
                    if q == '\'' && chars.peek().is_some_and(|(_, n)| *n == '\'') {
                        chars.next();
                    } else {
                        open_quote = None;
                    }
                } else if c == '\\' && q == '"' {
                    chars.next();
                }
                previous = c;
                continue;
            }
            let token_start = matches!(previous, ' ' | '\t' | '[' | '{' | ',') || i == 0;
            match c {
                '#' if matches!(previous, ' ' | '\t') || i == 0 => break,
                '"' | '\'' if token_start || matches!(previous, ':') => open_quote = Some(c),
                '&' | '*' if token_start => {
                    let what = if c == '&' { "anchor" } else { "alias" };
                    return Err(error(
                        number,
                        format!("has a YAML {what} ({c}...): fleetq refuses anchors and aliases, which Kueue objects do not need (they can expand a small request into a huge one)"),
                    ));
                }
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        return Err(error(
                            number,
                            format!(
                                "nests flow collections ([ or {{) more than {MAX_FLOW_DEPTH} deep"
                            ),
                        ));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                '|' | '>' if token_start => {
                    // A block scalar header: the text that follows is
                    // content, whatever it holds.
                    let rest: String = content[i + 1..].chars().take_while(|c| *c != '#').collect();
                    if rest
                        .trim()
                        .chars()
                        .all(|c| matches!(c, '+' | '-' | '0'..='9'))
                    {
                        block_parent = Some(indent);
                        break;
                    }
                }
                _ => {}
            }
            previous = c;
        }
    }
    Ok(())
}

fn error(line: usize, message: String) -> FieldError {
    FieldError::new("", "", format!("line {line} {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_manifests_pass() {
        for yaml in [
            "a: 1\nb: [1, 2, {c: d}]\n",
            "description: 'it''s *fine* & dandy'\nother: \"x & *y\"\n",
            "text: |\n  * a list item\n  & an ampersand\nnext: 1\n",
            "# a comment with &anchor and *alias\nkey: value # trailing *comment\n",
            "name: a*b&c\n",
            "---\na: 1\n---\nb: 2\n",
        ] {
            assert!(check(yaml).is_ok(), "{yaml:?}: {:?}", check(yaml));
        }
    }

    #[test]
    fn anchors_aliases_depth_and_size_are_refused() {
        let alias_bomb = "a: &x [1, 2, 3]\nb: [*x, *x, *x]\n";
        let e = check(alias_bomb).unwrap_err();
        assert!(
            e.message.contains("line 1") && e.message.contains("anchor"),
            "{e}"
        );
        assert!(check("a:\n  - *ref\n")
            .unwrap_err()
            .message
            .contains("alias"));
        let deep = format!("a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let started = std::time::Instant::now();
        assert!(check(&deep).unwrap_err().message.contains("32 deep"));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let indented = format!("a:\n{}b: 1\n", " ".repeat(300));
        assert!(check(&indented)
            .unwrap_err()
            .message
            .contains("indented 300"));
        let many = "---\na: 1\n".repeat(MAX_DOCUMENTS + 1);
        assert!(check(&many).unwrap_err().message.contains("documents"));
        // The limit's own count, with and without the first `---`.
        let most = "---\na: 1\n".repeat(MAX_DOCUMENTS);
        assert_eq!(check(&most), Ok(()));
        assert_eq!(check(&most["---\n".len()..]), Ok(()));
        let over = format!("# a comment\n\n{}", "---\na: 1\n".repeat(MAX_DOCUMENTS + 1));
        assert!(check(&over).unwrap_err().message.contains("document 1001"));
    }
}
