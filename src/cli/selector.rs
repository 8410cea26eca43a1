//! kubectl's `-l` label selectors (`app=llm,tier!=dev,env in (a,b),gpu,
//! !spot`) read into Kubernetes' `LabelSelector` JSON, which
//! `fleetq_model::namespace::selector_matches` evaluates.

use serde_json::{json, Map, Value};

/// `text` as a LabelSelector, or what is wrong with it.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut labels = Map::new();
    let mut expressions = Vec::new();
    for term in terms(text)? {
        let term = term.trim();
        if term.is_empty() {
            return Err(format!("selector {text:?}: an empty requirement"));
        }
        if let Some((key, rest)) = split_set(term, " notin ") {
            expressions.push(json!({"key": key, "operator": "NotIn", "values": set(rest, text)?}));
        } else if let Some((key, rest)) = split_set(term, " in ") {
            expressions.push(json!({"key": key, "operator": "In", "values": set(rest, text)?}));
        } else if let Some((key, value)) = term.split_once("!=") {
            expressions
                .push(json!({"key": key.trim(), "operator": "NotIn", "values": [value.trim()]}));
        } else if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
            labels.insert(key.trim().to_string(), Value::from(value.trim()));
        } else if let Some(key) = term.strip_prefix('!') {
            expressions.push(json!({"key": key.trim(), "operator": "DoesNotExist"}));
        } else {
            expressions.push(json!({"key": term, "operator": "Exists"}));
        }
    }
    Ok(json!({"matchLabels": labels, "matchExpressions": expressions}))
}

/// The comma-separated requirements, commas inside `( )` kept.
fn terms(text: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(format!("selector {text:?}: ')' without '('"));
        }
    }
    if depth != 0 {
        return Err(format!("selector {text:?}: '(' without ')'"));
    }
    out.push(&text[start..]);
    Ok(out)
}

/// `key in (...)` split at ` in `: the key and the parenthesised rest.
fn split_set<'a>(term: &'a str, word: &str) -> Option<(&'a str, &'a str)> {
    let (key, rest) = term.split_once(word)?;
    rest.trim()
        .starts_with('(')
        .then(|| (key.trim(), rest.trim()))
}

fn set(rest: &str, text: &str) -> Result<Vec<String>, String> {
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("selector {text:?}: a set is written (a,b)"))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetq_model::namespace::selector_matches;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_kubectl_selectors() {
        let s = parse("app=llm,tier!=dev,env in (a, b),gpu,!spot").unwrap();
        let yes = labels(&[("app", "llm"), ("tier", "prod"), ("env", "b"), ("gpu", "")]);
        assert!(selector_matches(&s, &yes), "{s}");
        for no in [
            labels(&[("app", "web"), ("env", "a"), ("gpu", "")]),
            labels(&[("app", "llm"), ("tier", "dev"), ("env", "a"), ("gpu", "")]),
            labels(&[("app", "llm"), ("env", "c"), ("gpu", "")]),
            labels(&[("app", "llm"), ("env", "a")]),
            labels(&[("app", "llm"), ("env", "a"), ("gpu", ""), ("spot", "1")]),
        ] {
            assert!(!selector_matches(&s, &no), "{s} matched {no:?}");
        }
        let s = parse("env notin (dev),app==llm").unwrap();
        assert!(selector_matches(&s, &labels(&[("app", "llm")])));
        assert!(parse("env in (a").is_err());
        assert!(parse("a=1,,b=2").is_err());
    }
}
