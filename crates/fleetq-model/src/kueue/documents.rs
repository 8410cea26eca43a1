//! Splitting a YAML stream into its documents.

use serde::Deserialize;

use crate::FieldError;

/// One non-empty YAML document, as a JSON value so that every later step can
/// report exact field paths with `serde_path_to_error`.
pub(crate) struct RawDocument {
    /// 1-based position in the stream, counting empty documents too, so the
    /// number matches what a reader counts between `---` markers.
    pub number: usize,
    pub value: serde_json::Value,
}

/// The documents of `yaml`, skipping empty and comment-only ones.
///
/// A YAML error ends the reading: after a syntax error the parser cannot say
/// where the next document starts, so anything it returned would be a guess.
/// The documents before it are still returned, to be checked too.
pub(crate) fn split_documents(yaml: &str) -> (Vec<RawDocument>, Option<FieldError>) {
    let mut documents = Vec::new();
    for (index, document) in serde_norway::Deserializer::from_str(yaml).enumerate() {
        let number = index + 1;
        match serde_json::Value::deserialize(document) {
            Ok(serde_json::Value::Null) => continue,
            Ok(value) => documents.push(RawDocument { number, value }),
            Err(error) => {
                let error =
                    FieldError::new("", "", format!("malformed YAML: {error}")).in_document(number);
                return (documents, Some(error));
            }
        }
    }
    (documents, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_documents_and_skips_empty_ones() {
        let yaml = "# leading comment\n---\na: 1\n---\n# only a comment\n---\nb: 2\n---\n";
        let (docs, error) = split_documents(yaml);
        assert!(error.is_none());
        let numbers: Vec<usize> = docs.iter().map(|d| d.number).collect();
        assert_eq!(numbers, vec![1, 3]);
        assert_eq!(docs[1].value["b"], 2);
    }

    #[test]
    fn empty_input_has_no_documents() {
        for yaml in ["", "\n", "# nothing here\n", "---\n---\n"] {
            let (docs, error) = split_documents(yaml);
            assert!(docs.is_empty() && error.is_none(), "{yaml:?}");
        }
    }

    #[test]
    fn syntax_error_stops_reading_and_names_the_document() {
        let yaml = "a: 1\n---\nb: [1, 2\n---\nc: 3\n";
        let (docs, error) = split_documents(yaml);
        assert_eq!(docs.len(), 1);
        let error = error.expect("a syntax error");
        assert_eq!(error.document, Some(2));
        assert!(error.message.starts_with("malformed YAML"), "{error}");
    }
}
