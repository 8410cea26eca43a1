//! Kubernetes' syntax rules for names, label keys and label values, as the
//! API server and Kueue's webhooks apply them. Each check returns `None` when
//! the input is valid, or the reason it is not, ready to become a
//! [`FieldError`](crate::FieldError) message.

/// RFC 1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
/// Kueue uses it for pod set names.
pub(crate) fn dns_label_error(value: &str) -> Option<String> {
    if value.is_empty() {
        return Some("must not be empty".into());
    }
    if value.len() > 63 {
        return Some(format!("{value:?} is longer than 63 characters"));
    }
    if !is_dns_label(value) {
        return Some(format!(
            "{value:?} must consist of lowercase letters, digits and '-', and start and end with a letter or digit"
        ));
    }
    None
}

fn is_dns_label(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-')
}

/// RFC 1123 subdomain: dot-separated labels, at most 253 characters.
pub(crate) fn is_dns_subdomain(value: &str) -> bool {
    !value.is_empty() && value.len() <= 253 && value.split('.').all(is_dns_label)
}

/// A qualified name as used for label keys, annotation keys and resource
/// names: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters from `[A-Za-z0-9_.-]` that starts and ends alphanumeric.
pub(crate) fn qualified_name_error(value: &str) -> Option<String> {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    if let Some(prefix) = prefix {
        if !is_dns_subdomain(prefix) {
            return Some(format!(
                "{value:?} has an invalid prefix {prefix:?}: it must be a lowercase DNS subdomain such as example.com"
            ));
        }
    }
    if name.is_empty() {
        return Some(format!("{value:?} has an empty name part"));
    }
    if name.len() > 63 {
        return Some(format!(
            "{value:?}: the name part must be at most 63 characters"
        ));
    }
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let bytes = name.as_bytes();
    let valid = bytes
        .iter()
        .all(|&b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().copied().is_some_and(alnum)
        && bytes.last().copied().is_some_and(alnum);
    if !valid {
        return Some(format!(
            "{value:?} is not a valid qualified name: letters, digits, '-', '_' and '.', starting and ending with a letter or digit, with an optional DNS prefix and '/'"
        ));
    }
    None
}

/// A label value: empty, or at most 63 characters from `[A-Za-z0-9_.-]`
/// starting and ending alphanumeric.
pub(crate) fn label_value_error(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    if value.len() > 63 {
        return Some(format!(
            "label value {value:?} is longer than 63 characters"
        ));
    }
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let bytes = value.as_bytes();
    let valid = bytes
        .iter()
        .all(|&b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().copied().is_some_and(alnum)
        && bytes.last().copied().is_some_and(alnum);
    if !valid {
        return Some(format!(
            "label value {value:?} must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in [
            "cpu",
            "nvidia.com/gpu",
            "nvidia.com/mig-1g.10gb",
            "cpu_credits",
            "kueue.x-k8s.io/queue-name",
            "Foo",
        ] {
            assert_eq!(qualified_name_error(ok), None, "{ok}");
        }
        for bad in [
            "",
            "/gpu",
            "Nvidia.com/gpu",
            "nvidia.com/",
            "-cpu",
            "cpu-",
            "a/b/c",
            "has space",
        ] {
            assert!(qualified_name_error(bad).is_some(), "{bad}");
        }
        assert!(qualified_name_error(&"x".repeat(64)).is_some());
    }

    #[test]
    fn label_values_and_dns_labels() {
        assert_eq!(label_value_error(""), None);
        assert_eq!(label_value_error("on-demand"), None);
        assert!(label_value_error("-x").is_some());
        assert!(label_value_error("a b").is_some());
        assert_eq!(dns_label_error("main"), None);
        assert!(dns_label_error("Main").is_some());
        assert!(dns_label_error("a.b").is_some());
        assert!(dns_label_error("").is_some());
        assert!(is_dns_subdomain("kueue.x-k8s.io"));
        assert!(!is_dns_subdomain("kueue..io"));
    }
}
