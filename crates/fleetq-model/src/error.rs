//! Errors that name where the problem is: the document, the object and the
//! field path, so a platform team can fix its manifest without guessing.

use std::fmt;

/// One problem in one field of one object.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FieldError {
    /// 1-based document number in a multi-document manifest, when known.
    pub document: Option<usize>,
    /// `Kind/name` or `Kind/namespace/name`; empty when the object has no name yet.
    pub object: String,
    /// Field path such as `spec.resourceGroups[0].flavors[0].resources[0].lendingLimit`.
    pub path: String,
    pub message: String,
}

impl FieldError {
    pub fn new(
        object: impl Into<String>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        FieldError {
            document: None,
            object: object.into(),
            path: path.into(),
            message: message.into(),
        }
    }

    pub fn in_document(mut self, document: usize) -> Self {
        self.document = Some(document);
        self
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(doc) = self.document {
            write!(f, "document {doc}: ")?;
        }
        if !self.object.is_empty() {
            write!(f, "{}: ", self.object)?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for FieldError {}

/// A non-empty list of field errors, displayed one per line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldErrors(pub Vec<FieldError>);

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for FieldErrors {}
